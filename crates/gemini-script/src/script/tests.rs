use serde_json::json;

use super::*;
use crate::{
    matcher::PartKind,
    reply::{Call, Hang},
};

/// Parses `input` and checks the error text contains every expected fragment.
fn check_error(input: &str, expected: &[&str]) {
    match Script::from_json(input) {
        Ok(script) => panic!("{input} parsed unexpectedly: {script:?}"),
        Err(e) => {
            let text = e.to_string();
            for fragment in expected {
                assert!(
                    text.contains(fragment),
                    "error for {input}\n  was: {text}\n  expected to contain: {fragment}"
                );
            }
        }
    }
}

#[test]
fn malformed_scripts_name_the_entry_and_field() {
    let cases: &[(&str, &[&str])] = &[
        ("not json", &["line 1"]),
        (
            r#"[{"reply": {"text": "a"}}, {"reply": {"txt": "a"}}]"#,
            &["[1].reply", "unknown field `txt`"],
        ),
        (
            r#"[{"reply": {"text": 5}}]"#,
            &["[0].reply.text", "a string or a list of strings"],
        ),
        (r#"[{"reply": {"text": ["a", 5]}}]"#, &["[0].reply.text"]),
        (
            r#"[{"match": {"last_part": "tool"}, "reply": {}}]"#,
            &["[0].match.last_part", "unknown variant `tool`"],
        ),
        (
            r#"[{"repeat": 0, "reply": {}}]"#,
            &["[0].repeat", "positive number or \"forever\""],
        ),
        (r#"[{"repeat": "always", "reply": {}}]"#, &["[0].repeat"]),
        (r#"[{"repeat": -1, "reply": {}}]"#, &["[0].repeat"]),
        (r#"[{"match": {}}]"#, &["missing field `reply`"]),
        (
            r#"[{"reply": {"hang": "later"}}]"#,
            &["[0].reply.hang", "forever"],
        ),
        (
            r#"[{"reply": {"chunking": {"lines": 2}}}]"#,
            &["[0].reply.chunking"],
        ),
        (
            r#"[{"reply": {"calls": [{"name": "f", "args": [1]}]}}]"#,
            &["[0].reply.calls[0].args"],
        ),
        (r#"{"replies": [], "extra": 1}"#, &["unknown field `extra`"]),
        (
            r#"{"default": {"text": "x", "error": {"code": 429}}}"#,
            &["default reply", "`error`", "in_stream"],
        ),
        (
            r#"[{"name": "boom", "reply": {"error": {"code": 200}}}]"#,
            &["entry 0 (\"boom\")", "reply.error.code", "400 to 599"],
        ),
        (
            r#"[{"reply": {}}, {"reply": {"error": {"code": 429}, "calls": [{"name": "f"}]}}]"#,
            &["entry 1", "reply.error"],
        ),
        (
            r#"[{"reply": {"chunks": [{}], "text": "x"}}]"#,
            &["reply.chunks", "verbatim"],
        ),
        (
            r#"[{"reply": {"chunks": [1]}}]"#,
            &["reply.chunks[0]", "JSON object"],
        ),
        (
            r#"[{"reply": {"chunking": {"words": 0}}}]"#,
            &["reply.chunking", "at least 1"],
        ),
        (
            r#"[{"reply": {"signature": "not base64!"}}]"#,
            &["reply.signature", "base64"],
        ),
        (r#"[{"reply": {"usage": 3}}]"#, &["reply.usage"]),
        (
            r#"[{"reply": {"finish": ""}}]"#,
            &["reply.finish", "no_finish"],
        ),
        (
            r#"[{"reply": {"calls": [{"args": {}}]}}]"#,
            &["reply.calls[0].name", "missing"],
        ),
        (
            r#"[{"reply": {"calls": [{"name": "", "args": {}}]}}]"#,
            &["reply.calls[0].name", "empty"],
        ),
        (
            r#"[{"reply": {"calls": [{"name": "a", "first_declared_except": []}]}}]"#,
            &["reply.calls[0].name", "cannot be combined"],
        ),
        (
            r#"[{"match": {"keywords": [""]}, "reply": {}}]"#,
            &["match.keywords", "empty"],
        ),
        (
            r#"[{"reply": {"headers": {"bad header": "x"}}}]"#,
            &["reply.headers", "bad header"],
        ),
    ];
    for (input, expected) in cases {
        check_error(input, expected);
    }
}

#[test]
fn both_script_forms_parse_to_the_same_entries() {
    let list = r#"[
        {"match": {"last_part": "text"}, "reply": {"text": ["Hello ", "world"], "thought": "hmm"}},
        {"name": "after tool", "match": {"last_part": "functionResponse"}, "repeat": "forever",
         "reply": {"text": "done", "hang": "forever", "delay_ms": 5, "chunking": {"words": 2}}}
    ]"#;
    let object = format!(r#"{{"replies": {list}, "default": {{"text": "fallback"}}}}"#);
    let from_list = Script::from_json(list).expect("list form");
    let from_object = Script::from_json(&object).expect("object form");
    assert_eq!(from_list.replies, from_object.replies);
    assert_eq!(from_object.default, Some(Reply::text("fallback")));
    let expected = Script::new()
        .then(
            Reply::text(["Hello ", "world"])
                .thought("hmm")
                .when(Matcher::any().last_part(PartKind::Text)),
        )
        .then(
            Reply::text("done")
                .hang_forever()
                .delay_ms(5)
                .chunk_words(2)
                .when(Matcher::function_response())
                .forever()
                .named("after tool"),
        );
    assert_eq!(from_list.replies, expected.replies);
}

#[test]
fn scripts_round_trip_through_json() {
    let script = Script::new()
        .then(
            Reply::call("get_weather", json!({"city": "Paris"}))
                .signature("c2ln")
                .times(3),
        )
        .then(
            Reply::error(429)
                .message("slow down")
                .header("Retry-After", "1"),
        )
        .then(
            Reply::text("partial")
                .and_call("f", json!({}))
                .with_call(Call::new("g", json!({})).id("c1").exact_args()),
        )
        .then(Reply::error(500).in_stream().hang_ms(10))
        .then(Reply::chunks([json!({"candidates": []})]).no_finish())
        .then(Reply::calls([Call::first_declared_except(
            ["get_weather"],
            json!({"x": 1}),
        )]))
        .default_reply(
            Reply::text("d")
                .finish("MAX_TOKENS")
                .usage(json!({"totalTokenCount": 1})),
        );
    script.validate().expect("valid");
    let back = Script::from_json(&script.to_json()).expect("round trip");
    assert_eq!(back, script);
    assert_eq!(script.replies[3].reply.hang, Some(Hang::Millis(10)));
}

#[test]
fn reads_script_files() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("script.json");
    std::fs::write(&path, r#"[{"reply": {"text": "from a file"}}]"#).expect("write");
    let script = Script::from_file(&path).expect("parse file");
    assert_eq!(script.replies[0].reply, Reply::text("from a file"));
    let missing = Script::from_file(dir.path().join("missing.json"));
    assert!(
        matches!(missing, Err(Error::ReadFile { .. })),
        "{missing:?}"
    );
}

#[test]
fn builder_values_are_validated() {
    for (script, field) in [
        (Script::new().then(Reply::error(302)), "reply.error.code"),
        (
            Script::new().then(Reply::text("x").chunk_chars(0)),
            "reply.chunking",
        ),
        (
            Script::new().default_reply(Reply::text("x").signature("%%")),
            "signature",
        ),
    ] {
        match script.validate() {
            Err(Error::Invalid { field: f, .. }) => assert!(f.contains(field), "{f} vs {field}"),
            other => panic!("expected an Invalid error for {field}, got {other:?}"),
        }
    }
}

#[test]
fn the_readme_example_script_parses() {
    let readme = include_str!("../../README.md");
    let start = readme.find("```json\n").map(|i| i + "```json\n".len());
    let block = start.and_then(|s| readme[s..].find("```").map(|e| &readme[s..s + e]));
    let script = Script::from_json(block.unwrap_or_default()).expect("README example parses");
    assert_eq!(script.replies.len(), 4);
    assert_eq!(
        script.replies[2].repeat,
        Repeat::Times(NonZeroU32::new(2).unwrap_or(NonZeroU32::MIN))
    );
}
