//! The stream verifier, rule by rule (each [`Rule`] the official client enforces), including
//! the chunk expansion: each broken rule is reported at the right event, under the right rule,
//! with a message that names the ids involved (the messages are snapshotted).

mod support;

use agui_types::{
    ActivityDelta, ActivitySnapshot, EncryptedValueSubtype, Event, Rule, TextMessageChunk,
    TextMessageRole,
};
use serde_json::json;
use support::build::*;

#[test]
fn each_rule_is_enforced_with_a_precise_message() {
    use Rule::*;
    let open_all = vec![
        start(),
        Event::step_started("plan"),
        Event::text_message_start("m1"),
        Event::reasoning_start("rs"),
        Event::reasoning_message_start("rm"),
        Event::tool_call_start("c1", "f", None),
        subagent_started("s1", None),
        finish(),
    ];
    let activity = |replace: Option<bool>, tag: Option<&str>| -> Event {
        ActivitySnapshot {
            message_id: "act".into(),
            activity_type: "plan".into(),
            replace,
            subagent_run_id: tag.map(Into::into),
            ..Default::default()
        }
        .into()
    };
    let activity_delta = |tag: &str| -> Event {
        sub(
            ActivityDelta {
                message_id: "act".into(),
                activity_type: "plan".into(),
                ..Default::default()
            }
            .into(),
            tag,
        )
    };
    let cases: Vec<(&str, Vec<Event>, Expected<'_>)> = vec![
        (
            "first event",
            vec![Event::step_started("s")],
            (Some(0), FirstEvent, "must be RUN_STARTED"),
        ),
        (
            "after finished",
            vec![start(), finish(), Event::custom("x", json!(1))],
            (Some(2), AfterTerminal, "already ended with RUN_FINISHED"),
        ),
        (
            "error after finished",
            vec![start(), finish(), Event::run_error("x", None)],
            (Some(2), AfterTerminal, "RUN_FINISHED"),
        ),
        (
            "two finishes",
            vec![start(), finish(), finish()],
            (Some(2), AfterTerminal, "only a new RUN_STARTED"),
        ),
        (
            "after error",
            vec![start(), Event::run_error("x", None), finish()],
            (Some(2), AfterTerminal, "already ended with RUN_ERROR"),
        ),
        (
            "nested run",
            vec![start(), start()],
            (Some(1), RunAlreadyActive, "still active"),
        ),
        (
            "finish names another run",
            vec![start(), Event::run_finished("t", "other")],
            (Some(1), RunIdMismatch, "run 'other'"),
        ),
        (
            "finish with everything open",
            open_all,
            (
                Some(7),
                OpenAtRunFinished,
                "steps 'plan'; text messages 'm1'; reasoning messages 'rm'; reasoning spans 'rs'; tool calls 'c1'; subagents 's1'",
            ),
        ),
        (
            "text start twice",
            vec![
                start(),
                Event::text_message_start("m"),
                Event::text_message_start("m"),
            ],
            (Some(2), AlreadyOpen, "text message 'm' is already open"),
        ),
        (
            "content before start",
            vec![start(), Event::text_message_content("m", "x")],
            (Some(1), NotOpen, "no open text message 'm'"),
        ),
        (
            "content after end",
            [
                vec![start()],
                text("m"),
                vec![Event::text_message_content("m", "x")],
            ]
            .concat(),
            (Some(4), NotOpen, "no open text message 'm'"),
        ),
        (
            "end twice",
            [vec![start()], text("m"), vec![Event::text_message_end("m")]].concat(),
            (Some(4), NotOpen, "TEXT_MESSAGE_END"),
        ),
        (
            "tool start twice",
            vec![
                start(),
                Event::tool_call_start("c", "f", None),
                Event::tool_call_start("c", "f", None),
            ],
            (Some(2), AlreadyOpen, "tool call 'c'"),
        ),
        (
            "args after end",
            vec![
                start(),
                Event::tool_call_start("c", "f", None),
                Event::tool_call_end("c"),
                Event::tool_call_args("c", "{}"),
            ],
            (Some(3), NotOpen, "no open tool call 'c'"),
        ),
        (
            "step twice",
            vec![start(), Event::step_started("s"), Event::step_started("s")],
            (
                Some(2),
                AlreadyOpen,
                "step 's' is already open for the parent agent",
            ),
        ),
        (
            "step not started",
            vec![start(), Event::step_finished("s")],
            (Some(1), NotOpen, "step 's' was not started"),
        ),
        (
            "step finished by another owner",
            vec![
                start(),
                Event::step_started("s"),
                sub(Event::step_finished("s"), "s1"),
            ],
            (
                Some(2),
                NotOpen,
                "finished by subagent 's1' but is open under the parent agent",
            ),
        ),
        (
            "span twice",
            vec![
                start(),
                Event::reasoning_start("r"),
                Event::reasoning_start("r"),
            ],
            (Some(2), AlreadyOpen, "reasoning span 'r'"),
        ),
        (
            "reasoning content before start",
            vec![start(), Event::reasoning_message_content("r", "x")],
            (Some(1), NotOpen, "no open reasoning message 'r'"),
        ),
        (
            "span end without start",
            vec![start(), Event::reasoning_end("r")],
            (Some(1), NotOpen, "no open reasoning span 'r'"),
        ),
        (
            "subagent finished without start",
            vec![start(), subagent_finished("s1")],
            (Some(1), NotOpen, "no active subagent 's1'"),
        ),
        (
            "subagent started twice",
            vec![
                start(),
                subagent_started("s1", None),
                subagent_started("s1", None),
            ],
            (Some(2), AlreadyOpen, "subagent 's1' is already active"),
        ),
        (
            "subagent id reused",
            vec![
                start(),
                subagent_started("s1", None),
                subagent_finished("s1"),
                subagent_started("s1", None),
            ],
            (Some(3), Subagent, "already finished in this run"),
        ),
        (
            "unknown parent subagent",
            vec![start(), subagent_started("s2", Some("s1"))],
            (Some(1), Subagent, "parentSubagentRunId 's1'"),
        ),
        (
            "content from another subagent",
            vec![
                start(),
                sub(Event::text_message_start("m"), "s1"),
                sub(Event::text_message_content("m", "x"), "s2"),
            ],
            (
                Some(2),
                Attribution,
                "'s2' does not match the text message 'm' owned by subagent 's1'",
            ),
        ),
        (
            "tagged content on a parent message",
            vec![
                start(),
                Event::text_message_start("m"),
                sub(Event::text_message_end("m"), "s1"),
            ],
            (Some(2), Attribution, "owned by the parent agent"),
        ),
        (
            "reopen under another owner",
            [
                vec![start()],
                text("m"),
                vec![sub(Event::text_message_start("m"), "s1")],
            ]
            .concat(),
            (Some(4), Attribution, "text message 'm'"),
        ),
        (
            "tool call in another owner's message",
            vec![
                start(),
                Event::text_message_start("m"),
                sub(Event::tool_call_start("c", "f", Some("m".into())), "s1"),
            ],
            (
                Some(2),
                Attribution,
                "parent message 'm' owned by the parent agent",
            ),
        ),
        (
            "activity delta from another owner",
            vec![
                start(),
                activity(None, Some("s1")),
                activity(Some(false), Some("s2")),
                activity_delta("s2"),
            ],
            (
                Some(3),
                Attribution,
                "activity 'act' owned by subagent 's1'",
            ),
        ),
        (
            "encrypted value for another owner's tool call",
            vec![
                start(),
                sub(Event::tool_call_start("c", "f", None), "s1"),
                sub(
                    Event::reasoning_encrypted_value(EncryptedValueSubtype::ToolCall, "c", "e"),
                    "s2",
                ),
            ],
            (Some(2), Attribution, "tool call 'c'"),
        ),
        (
            "first text chunk without id",
            vec![start(), text_chunk(None, "x")],
            (Some(1), Chunk, "must carry messageId"),
        ),
        (
            "first tool chunk without name",
            vec![start(), tool_chunk(Some("c"), None, "{}")],
            (Some(1), Chunk, "toolCallId and toolCallName"),
        ),
        (
            "first reasoning chunk without id",
            vec![start(), reasoning_chunk(None, "x")],
            (Some(1), Chunk, "must carry messageId"),
        ),
        (
            "chunk changes the role",
            vec![
                start(),
                text_chunk(Some("m"), "a"),
                TextMessageChunk {
                    role: Some(TextMessageRole::User),
                    delta: Some("b".into()),
                    ..Default::default()
                }
                .into(),
            ],
            (
                Some(2),
                Chunk,
                "chunk role 'user' does not match the open stream's role 'assistant'",
            ),
        ),
        (
            "chunk changes the tool name",
            vec![
                start(),
                tool_chunk(Some("c"), Some("f"), "{"),
                tool_chunk(None, Some("g"), "}"),
            ],
            (Some(2), Chunk, "toolCallName 'g'"),
        ),
        (
            "ambiguous chunk",
            vec![
                start(),
                sub(text_chunk(Some("a"), "x"), "s1"),
                sub(text_chunk(Some("b"), "y"), "s2"),
                text_chunk(None, "z"),
            ],
            (Some(3), Chunk, "ambiguous TEXT_MESSAGE_CHUNK"),
        ),
        (
            "chunk continues another lane's message",
            vec![
                start(),
                sub(text_chunk(Some("a"), "x"), "s1"),
                sub(text_chunk(Some("a"), "y"), "s2"),
            ],
            (
                Some(2),
                Chunk,
                "does not match the open stream's subagent 's1'",
            ),
        ),
        (
            "explicit end of a chunked message",
            vec![
                start(),
                text_chunk(Some("m"), "x"),
                Event::text_message_end("m"),
            ],
            (Some(2), NotOpen, "no open text message 'm'"),
        ),
        (
            "chunk opens an id that is already open",
            vec![
                start(),
                Event::text_message_start("m"),
                text_chunk(Some("m"), "x"),
            ],
            (
                Some(2),
                AlreadyOpen,
                "chunk expansion (TEXT_MESSAGE_START): text message 'm' is already open",
            ),
        ),
        ("empty stream", vec![], (None, EmptyStream, "no events")),
        (
            "no terminal",
            vec![
                start(),
                Event::text_message_start("m"),
                text_chunk(Some("k"), "x"),
                Event::raw(json!(1), None),
            ],
            (
                None,
                MissingTerminal,
                "without RUN_FINISHED or RUN_ERROR; still open: text messages 'k', 'm'",
            ),
        ),
    ];
    let mut report = Vec::new();
    for (name, events, expected) in cases {
        report.push(check(name, events, Err(expected)));
    }
    insta::assert_snapshot!(report.join("\n"));
}
