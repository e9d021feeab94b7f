//! The AG-UI side as a client keeps it: threads with their whole transcript, `RunAgentInput`
//! bodies, and the stream checks of the reference benchmark (pure).

use serde_json::{Value, json};

/// The frontend tool of W4 (the reference's `bench_confirm`).
pub(crate) const TOOL_NAME: &str = "bench_confirm";

/// The W4 tool as a `RunAgentInput.tools` entry.
pub(crate) fn tool_def() -> Value {
    json!({
        "name": TOOL_NAME,
        "description": "Ask the user to confirm. Returns the user's answer.",
        "parameters": {
            "type": "object",
            "properties": {"choice": {"type": "string", "description": "proposed answer"}},
            "required": ["choice"],
        },
    })
}

/// The W4 prompt that makes the model call [`TOOL_NAME`].
pub(crate) fn tool_prompt() -> String {
    format!("Please confirm this. BENCH_CALL_TOOL:{TOOL_NAME}")
}

/// A fresh id with a prefix (`u-…`, `r-…`).
pub(crate) fn new_id(prefix: &str) -> String {
    format!("{prefix}-{}", uuid::Uuid::new_v4().simple())
}

/// One AG-UI thread as a client keeps it: every run resends the whole transcript.
#[derive(Debug, Clone)]
pub(crate) struct Thread {
    pub(crate) id: String,
    pub(crate) messages: Vec<Value>,
}

impl Thread {
    /// A new thread whose id starts with `prefix`.
    pub(crate) fn new(prefix: &str) -> Self {
        let id = uuid::Uuid::new_v4().simple().to_string();
        Self {
            id: format!("{prefix}-{}", &id[..16]),
            messages: Vec::new(),
        }
    }

    /// Appends a user message and returns the run's input.
    pub(crate) fn next_turn(&mut self, text: &str, tools: &[Value]) -> Value {
        self.messages
            .push(json!({"id": new_id("u"), "role": "user", "content": text}));
        self.input(tools)
    }

    /// The input of a run over the current transcript.
    pub(crate) fn input(&self, tools: &[Value]) -> Value {
        json!({
            "threadId": self.id,
            "runId": new_id("r"),
            "protocolVersion": "1.0",
            "state": {},
            "messages": self.messages,
            "tools": tools,
            "context": [],
            "forwardedProps": {},
        })
    }

    /// Records the assistant's reply text (if any), as a client does after a run.
    pub(crate) fn record_reply(&mut self, text: &str) {
        if !text.is_empty() {
            self.messages
                .push(json!({"id": new_id("a"), "role": "assistant", "content": text}));
        }
    }

    /// Records a frontend tool call and the client's answer to it (W4's second run).
    pub(crate) fn record_tool_answer(&mut self, call: &ToolCall, text: &str, answer: &str) {
        let mut assistant = json!({
            "id": new_id("a"),
            "role": "assistant",
            "toolCalls": [{
                "id": call.id,
                "type": "function",
                "function": {"name": call.name, "arguments": if call.args.is_empty() { "{}" } else { &call.args }},
            }],
        });
        if !text.is_empty() {
            assistant["content"] = json!(text);
        }
        self.messages.push(assistant);
        self.messages.push(json!({
            "id": new_id("tm"),
            "role": "tool",
            "toolCallId": call.id,
            "content": answer,
        }));
    }
}

/// The first tool call of a run, as streamed.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct ToolCall {
    pub(crate) id: String,
    pub(crate) name: String,
    pub(crate) args: String,
}

const TERMINAL: [&str; 2] = ["RUN_FINISHED", "RUN_ERROR"];

/// Whether an event type ends a run.
pub(crate) fn is_terminal(kind: &str) -> bool {
    TERMINAL.contains(&kind)
}

/// The reference benchmark's stream checks; an empty list means valid.
pub(crate) fn validate(events: &[Value], thread_id: &str, run_id: &str) -> Vec<String> {
    use std::collections::BTreeSet;
    let mut probs = Vec::new();
    if events.is_empty() {
        return vec!["no events".into()];
    }
    let kind = |e: &Value| e["type"].as_str().unwrap_or("").to_owned();
    let types: Vec<String> = events.iter().map(kind).collect();
    if types[0] != "RUN_STARTED" {
        probs.push(format!("first event is {}, not RUN_STARTED", types[0]));
    }
    let started = types.iter().filter(|t| *t == "RUN_STARTED").count();
    if started != 1 {
        probs.push(format!("{started} RUN_STARTED"));
    }
    let terminals = types.iter().filter(|t| is_terminal(t)).count();
    if terminals != 1 {
        probs.push(format!("{terminals} terminal events"));
    }
    let last = types.last().map_or("", String::as_str);
    if !is_terminal(last) {
        probs.push(format!("last event is {last}, not terminal"));
    }
    for (e, t) in events.iter().zip(&types) {
        if (t == "RUN_STARTED" || t == "RUN_FINISHED")
            && (e["threadId"] != thread_id || e["runId"] != run_id)
        {
            probs.push(format!("{t} ids do not echo the input"));
        }
    }
    let mut open: [BTreeSet<String>; 5] = Default::default();
    let [text, tool, reasoning, rmsg, steps] = &mut open;
    for (e, t) in events.iter().zip(&types) {
        let mid = e["messageId"].as_str().unwrap_or("").to_owned();
        let tid = e["toolCallId"].as_str().unwrap_or("").to_owned();
        if t == "TEXT_MESSAGE_CONTENT" && e["delta"].as_str().is_none_or(str::is_empty) {
            probs.push("empty TEXT_MESSAGE_CONTENT delta".into());
        }
        let step = e["stepName"].as_str().unwrap_or("").to_owned();
        let problem = match t.as_str() {
            "TEXT_MESSAGE_START" => (!text.insert(mid)).then_some("TEXT_MESSAGE_START twice"),
            "TEXT_MESSAGE_CONTENT" => {
                (!text.contains(&mid)).then_some("TEXT_MESSAGE_CONTENT outside START/END")
            }
            "TEXT_MESSAGE_END" => (!text.remove(&mid)).then_some("TEXT_MESSAGE_END without START"),
            "TOOL_CALL_START" => (!tool.insert(tid)).then_some("TOOL_CALL_START twice"),
            "TOOL_CALL_ARGS" => {
                (!tool.contains(&tid)).then_some("TOOL_CALL_ARGS outside START/END")
            }
            "TOOL_CALL_END" => (!tool.remove(&tid)).then_some("TOOL_CALL_END without START"),
            "REASONING_START" => {
                reasoning.insert(mid);
                None
            }
            "REASONING_END" => (!reasoning.remove(&mid)).then_some("REASONING_END without START"),
            "REASONING_MESSAGE_START" => {
                rmsg.insert(mid);
                None
            }
            "REASONING_MESSAGE_CONTENT" => {
                (!rmsg.contains(&mid)).then_some("REASONING_MESSAGE_CONTENT outside START/END")
            }
            "REASONING_MESSAGE_END" => {
                (!rmsg.remove(&mid)).then_some("REASONING_MESSAGE_END without START")
            }
            "STEP_STARTED" => {
                steps.insert(step);
                None
            }
            "STEP_FINISHED" => {
                (!steps.remove(&step)).then_some("STEP_FINISHED without STEP_STARTED")
            }
            _ => None,
        };
        probs.extend(problem.map(str::to_owned));
    }
    // RUN_ERROR may end a run with things open; RUN_FINISHED may not.
    if last == "RUN_FINISHED" {
        let names = [
            "TEXT_MESSAGE",
            "TOOL_CALL",
            "REASONING",
            "REASONING_MESSAGE",
            "STEP",
        ];
        for (name, set) in names.iter().zip(&open) {
            if !set.is_empty() {
                probs.push(format!("{} {name} left open at RUN_FINISHED", set.len()));
            }
        }
    }
    probs
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(events: &[Value]) -> Vec<String> {
        validate(events, "t", "r")
    }

    #[test]
    fn a_well_formed_run_is_valid() {
        let events = [
            json!({"type": "RUN_STARTED", "threadId": "t", "runId": "r"}),
            json!({"type": "TEXT_MESSAGE_START", "messageId": "m"}),
            json!({"type": "TEXT_MESSAGE_CONTENT", "messageId": "m", "delta": "hi"}),
            json!({"type": "TEXT_MESSAGE_END", "messageId": "m"}),
            json!({"type": "TOOL_CALL_START", "toolCallId": "c", "toolCallName": "x"}),
            json!({"type": "TOOL_CALL_END", "toolCallId": "c"}),
            json!({"type": "RUN_FINISHED", "threadId": "t", "runId": "r"}),
        ];
        assert_eq!(run(&events), Vec::<String>::new());
    }

    #[test]
    fn broken_runs_are_reported() {
        assert_eq!(run(&[]), ["no events"]);
        let open_text = [
            json!({"type": "RUN_STARTED", "threadId": "t", "runId": "r"}),
            json!({"type": "TEXT_MESSAGE_START", "messageId": "m"}),
            json!({"type": "TEXT_MESSAGE_CONTENT", "messageId": "m", "delta": ""}),
            json!({"type": "RUN_FINISHED", "threadId": "t", "runId": "x"}),
        ];
        assert_eq!(
            run(&open_text),
            [
                "RUN_FINISHED ids do not echo the input",
                "empty TEXT_MESSAGE_CONTENT delta",
                "1 TEXT_MESSAGE left open at RUN_FINISHED"
            ]
        );
        let no_end = [json!({"type": "TEXT_MESSAGE_END", "messageId": "m"})];
        assert_eq!(
            run(&no_end),
            [
                "first event is TEXT_MESSAGE_END, not RUN_STARTED",
                "0 RUN_STARTED",
                "0 terminal events",
                "last event is TEXT_MESSAGE_END, not terminal",
                "TEXT_MESSAGE_END without START"
            ]
        );
        // RUN_ERROR may leave blocks open.
        let error = [
            json!({"type": "RUN_STARTED", "threadId": "t", "runId": "r"}),
            json!({"type": "TOOL_CALL_START", "toolCallId": "c"}),
            json!({"type": "RUN_ERROR", "message": "boom"}),
        ];
        assert!(run(&error).is_empty());
    }

    #[test]
    fn threads_resend_their_transcript() {
        let mut thread = Thread::new("w1");
        let first = thread.next_turn("hello", &[]);
        thread.record_reply("hi there");
        thread.record_reply("");
        let second = thread.next_turn("more", &[tool_def()]);
        assert_eq!(first["messages"].as_array().unwrap().len(), 1);
        assert_eq!(second["messages"].as_array().unwrap().len(), 3);
        assert_eq!(second["messages"][1]["role"], "assistant");
        assert_eq!(second["tools"][0]["name"], TOOL_NAME);
        assert_ne!(first["runId"], second["runId"]);
        let call = ToolCall {
            id: "c1".into(),
            name: TOOL_NAME.into(),
            args: String::new(),
        };
        thread.record_tool_answer(&call, "", "yes");
        let tail = &thread.messages[thread.messages.len() - 2..];
        assert_eq!(tail[0]["toolCalls"][0]["function"]["arguments"], "{}");
        assert!(tail[0].get("content").is_none());
        assert_eq!(tail[1]["toolCallId"], "c1");
    }
}
