//! The model every workload talks to: `gemini-script` with a script that behaves like the
//! reference's `fast_mock.py` (pure).
//!
//! - a request reporting a tool result (`functionResponse` last) → the standard text reply;
//! - the last user text holds `BENCH_CALL_TOOL:<name>` → one `functionCall` to `<name>` with
//!   `{"choice": "yes", "toolSummary": …, "toolAction": …}`;
//! - anything else → the standard text reply: `tokens` words (~1 token each) in `chunks` SSE
//!   events, `finishReason: STOP` and usage on the last one, no delay.
//!
//! Every entry repeats forever and looks only at the request, so any number of conversations
//! share one model process.

use std::hash::{Hash as _, Hasher as _};

use gemini_script::{Call, LoggedRequest, Matcher, Reply, Script};
use serde::Serialize;
use serde_json::{Value, json};

const WORDS: [&str; 26] = [
    "alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel", "india", "juliet",
    "kilo", "lima", "mike", "november", "oscar", "papa", "quebec", "romeo", "sierra", "tango",
    "uniform", "victor", "whiskey", "xray", "yankee", "zulu",
];

/// The standard reply: `tokens` words and a final period (`fast_mock.make_text`).
pub(crate) fn reply_text(tokens: usize) -> String {
    let words: Vec<&str> = (0..tokens).map(|i| WORDS[i % WORDS.len()]).collect();
    format!("{}.", words.join(" "))
}

/// `text` split into `n` pieces of whole words, each but the last keeping its trailing space
/// (`fast_mock.split_text`).
pub(crate) fn split_text(text: &str, n: usize) -> Vec<String> {
    let words: Vec<&str> = text.split(' ').collect();
    let n = n.clamp(1, words.len());
    let (per, extra) = (words.len() / n, words.len() % n);
    let mut out = Vec::with_capacity(n);
    let mut i = 0;
    for k in 0..n {
        let take = per + usize::from(k < extra);
        let mut piece = words[i..i + take].join(" ");
        i += take;
        if i < words.len() {
            piece.push(' ');
        }
        out.push(piece);
    }
    out
}

/// A prompt holding this makes the model run `true` with `run_command` before its reply.
pub(crate) const RUN_COMMAND_TAG: &str = "BENCH_RUN_COMMAND";

/// The script for a reply of `tokens` words in `chunks` events; `tools` are the names
/// `BENCH_CALL_TOOL:<name>` may ask for; [`RUN_COMMAND_TAG`] asks for a command.
pub(crate) fn script(tokens: usize, chunks: usize, tools: &[&str]) -> Script {
    let usage = |out: usize| json!({"promptTokenCount": 1000, "candidatesTokenCount": out, "totalTokenCount": 1000 + out});
    let text = Reply::text(split_text(&reply_text(tokens), chunks)).usage(usage(tokens));
    let mut script = Script::new().then(
        text.clone()
            .when(Matcher::function_response())
            .forever()
            .named("after a tool result"),
    );
    let command = json!({"CommandLine": "true", "Cwd": "{{workspace}}", "WaitMsBeforeAsync": 5000, "toolSummary": "Bench command", "toolAction": "Running true"});
    script = script.then(
        Reply::calls([Call::new("run_command", command).exact_args()])
            .usage(usage(10))
            .when(Matcher::any().user_text_contains(RUN_COMMAND_TAG))
            .forever()
            .named("run a command"),
    );
    for name in tools {
        let args = json!({"choice": "yes", "toolSummary": "Bench tool", "toolAction": "Asking the client"});
        script = script.then(
            Reply::calls([Call::new(*name, args).exact_args()])
                .usage(usage(10))
                .when(Matcher::any().user_text_contains(format!("BENCH_CALL_TOOL:{name}")))
                .forever()
                .named(format!("call {name}")),
        );
    }
    script.default_reply(text)
}

/// What the harness asked the model in one request, reduced to what its config decides: the
/// system prompt (the workspace, the thread's directories, the host's scratch directory and the
/// conversation id masked),
/// the declared tools and the generation config. Equal shapes for ours and the floor mean the
/// same harness config.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub(crate) struct RequestShape {
    pub(crate) bytes: usize,
    pub(crate) contents: usize,
    pub(crate) declared: Vec<String>,
    pub(crate) system_prompt_chars: usize,
    pub(crate) system_prompt_digest: String,
    pub(crate) tools_digest: String,
    pub(crate) generation_config_digest: String,
}

fn digest(text: &str) -> String {
    // SipHash with fixed keys: stable for a build, enough to tell two prompts apart.
    let mut h = std::collections::hash_map::DefaultHasher::new();
    text.hash(&mut h);
    format!("{:016x}", h.finish())
}

impl RequestShape {
    /// The shape of a logged model request of a host whose directories are under `root`.
    pub(crate) fn of(request: &LoggedRequest, root: &std::path::Path) -> Self {
        let body = &request.body;
        let mut prompt = request.system_instruction();
        if let Some(ws) = gemini_script::inspect::workspace(body).filter(|w| !w.is_empty()) {
            prompt = prompt.replace(&ws, "<workspace>");
            // The thread's own directories (its app data dir) are named like its workspace.
            if let Some(name) = std::path::Path::new(&ws).file_name() {
                prompt = prompt.replace(&*name.to_string_lossy(), "<thread>");
            }
        }
        let root = root.display().to_string();
        if !root.is_empty() {
            prompt = prompt.replace(&root, "<root>");
        }
        // Each conversation has its own id.
        let prompt: String = prompt
            .split_inclusive('\n')
            .map(|line| match line.strip_prefix("Conversation ID: ") {
                Some(rest) => format!("Conversation ID: <id>{}", &rest[rest.trim_end().len()..]),
                None => line.to_owned(),
            })
            .collect();
        let field = |name: &str| body.get(name).unwrap_or(&Value::Null).to_string();
        Self {
            bytes: body.to_string().len(),
            contents: gemini_script::inspect::contents(body).len(),
            declared: request.declared_functions(),
            system_prompt_chars: prompt.chars().count(),
            system_prompt_digest: digest(&prompt),
            tools_digest: digest(&field("tools")),
            generation_config_digest: digest(&field("generationConfig")),
        }
    }

    /// What differs from `other` ("same" when nothing).
    pub(crate) fn compare(&self, other: &Self) -> String {
        let mut diffs = Vec::new();
        if self.system_prompt_digest != other.system_prompt_digest {
            diffs.push("system prompt");
        }
        if self.tools_digest != other.tools_digest || self.declared != other.declared {
            diffs.push("tools");
        }
        if self.generation_config_digest != other.generation_config_digest {
            diffs.push("generation config");
        }
        if self.contents != other.contents {
            diffs.push("history length");
        }
        if diffs.is_empty() {
            "same".into()
        } else {
            format!("differs: {}", diffs.join(", "))
        }
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;

    #[test]
    fn the_reply_matches_fast_mock() {
        let text = reply_text(200);
        assert!(text.starts_with("alpha bravo charlie"));
        assert!(text.ends_with("romeo."), "{text}");
        assert_eq!(text.split(' ').count(), 200);
        let pieces = split_text(&text, 20);
        assert_eq!(pieces.len(), 20);
        assert_eq!(pieces.concat(), text);
        assert!(pieces[0].ends_with(' ') && !pieces[19].ends_with(' '));
        assert_eq!(pieces[0].split_whitespace().count(), 10);
        // Uneven splits put the extra words first.
        assert_eq!(split_text("a b c", 2), ["a b ", "c"]);
        assert_eq!(split_text("a", 5), ["a"]);
    }

    #[test]
    fn request_shapes_mask_the_workspace() {
        let request = |ws: &str, tool: &str| {
            let body = json!({
                "systemInstruction": {"parts": [{"text": format!("Active Workspaces:\n- {ws}\nData: {ws}/../app\nConversation ID: {ws}\nBe brief.")}]},
                "contents": [{"role": "user", "parts": [{"text": "hi"}]}],
                "tools": [{"functionDeclarations": [{"name": tool}]}],
                "generationConfig": {"temperature": 1},
            });
            serde_json::from_value::<LoggedRequest>(json!({
                "seq": 1, "method": "POST", "path": "/", "model": null, "rpc": null,
                "headers": {}, "body": body, "answered_by": {"kind": "default"}, "status": 200,
            }))
            .unwrap()
        };
        let a = RequestShape::of(&request("/w/a1", "list_dir"), Path::new("/w"));
        let b = RequestShape::of(&request("/w/floor/b2", "list_dir"), Path::new("/w/floor"));
        assert_eq!(a.declared, ["list_dir"]);
        assert_eq!(a.contents, 1);
        assert_eq!(a.compare(&b), "same");
        let c = RequestShape::of(&request("/w/a1", "view_file"), Path::new("/w"));
        assert_eq!(a.compare(&c), "differs: tools");
    }

    #[test]
    fn the_script_is_valid_and_round_trips() {
        let script = script(200, 20, &["bench_confirm"]);
        script.validate().unwrap();
        let again = Script::from_json(&script.to_json()).unwrap();
        assert_eq!(again.to_json(), script.to_json());
        assert!(script.to_json().contains("BENCH_CALL_TOOL:bench_confirm"));
    }
}
