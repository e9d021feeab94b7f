//! Tool calls reported by steps: arguments once, the result at the end, per turn.

use std::collections::HashMap;

use agui_types::Event;
use harness_proto::step::{StepError, StepKey, StepStatus, ToolAction};
use serde_json::{Map, Value};

use crate::ids::{IdKind, ToolCallIds};
use crate::out::Out;

/// Every tool call of the turn, keyed by the step that carries it (one call per step).
///
/// The client concatenates `TOOL_CALL_ARGS` deltas into one JSON document, so the arguments
/// are sent once, whole, at first sight; later snapshots never add to them (a grown JSON
/// object is not a string extension of the smaller one). A call stays known for the whole
/// turn, so a re-delivered step never starts it twice.
#[derive(Debug, Default)]
pub(crate) struct ToolCalls {
    calls: HashMap<StepKey, Call>,
    /// The AG-UI tool call ids used so far (harness ids may repeat or clash with ours): this
    /// turn's, or the caller's record when it shares one.
    ids: ToolCallIds,
    /// Calls with `TOOL_CALL_END` still owed, in start order.
    open: Vec<StepKey>,
}

#[derive(Debug)]
struct Call {
    id: String,
    phase: Phase,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// Started, arguments sent, not ended.
    Open,
    /// Ended at a run or lane boundary before its result: only the result is still owed.
    Flushed,
    /// Result delivered; nothing more is ever emitted for it.
    Completed,
}

impl ToolCalls {
    /// Whether the call of this step was already started.
    pub(crate) fn contains(&self, key: &StepKey) -> bool {
        self.calls.contains_key(key)
    }

    /// Records tool call ids in `ids` (shared with the caller) from now on.
    pub(crate) fn share_ids(&mut self, ids: ToolCallIds) {
        self.ids = ids;
    }

    /// `TOOL_CALL_START` and the single `TOOL_CALL_ARGS` of a call seen for the first time,
    /// with the id [`ToolCallIds::assign`] gives `harness_id`.
    pub(crate) fn start(
        &mut self,
        key: &StepKey,
        name: &str,
        harness_id: Option<&str>,
        parent_message_id: Option<String>,
        arguments: &Map<String, Value>,
        out: &mut Out,
    ) {
        let id = self
            .ids
            .assign(harness_id, || out.id(IdKind::ToolCall, key));
        out.own(&id, &key.trajectory_id);
        out.push(Event::tool_call_start(id.clone(), name, parent_message_id));
        let args = serde_json::to_string(arguments).unwrap_or_else(|_| "{}".to_owned());
        out.push(Event::tool_call_args(id.clone(), args));
        self.calls.insert(
            key.clone(),
            Call {
                id,
                phase: Phase::Open,
            },
        );
        self.open.push(key.clone());
    }

    /// Ends the call of this step (unless already ended) and delivers its result, once.
    pub(crate) fn finish(&mut self, key: &StepKey, content: String, out: &mut Out) {
        let Some(call) = self.calls.get_mut(key) else {
            return;
        };
        match call.phase {
            Phase::Completed => return,
            Phase::Open => {
                out.push(Event::tool_call_end(call.id.clone()));
                self.open.retain(|k| k != key);
            }
            // A flush already took it off `open`.
            Phase::Flushed => {}
        }
        call.phase = Phase::Completed;
        let id = call.id.clone();
        let message_id = out.id(IdKind::ToolResult, key);
        out.push(Event::tool_call_result(message_id, id, content));
    }

    /// The AG-UI id of this step's call, if it was started.
    pub(crate) fn id_of(&self, key: &StepKey) -> Option<&str> {
        self.calls.get(key).map(|c| c.id.as_str())
    }

    /// Ends the call of this step (`TOOL_CALL_END`) if it is open; its result is delivered
    /// later by [`finish`](Self::finish).
    pub(crate) fn end(&mut self, key: &StepKey, out: &mut Out) {
        if let Some(call) = self.calls.get_mut(key)
            && call.phase == Phase::Open
        {
            out.push(Event::tool_call_end(call.id.clone()));
            call.phase = Phase::Flushed;
            self.open.retain(|k| k != key);
        }
    }

    /// Ends the open calls of one trajectory (it went idle, or its bracket closed).
    pub(crate) fn flush_lane(&mut self, trajectory_id: &str, out: &mut Out) {
        self.flush_where(|k| k.trajectory_id == trajectory_id, out);
    }

    /// Ends every open call (the run is ending); their results come in a later run.
    pub(crate) fn flush_all(&mut self, out: &mut Out) {
        self.flush_where(|_| true, out);
    }

    fn flush_where(&mut self, mut select: impl FnMut(&StepKey) -> bool, out: &mut Out) {
        let calls = &mut self.calls;
        self.open.retain(|key| {
            if !select(key) {
                return true;
            }
            if let Some(call) = calls.get_mut(key) {
                out.push(Event::tool_call_end(call.id.clone()));
                call.phase = Phase::Flushed;
            }
            false
        });
    }
}

/// The `TOOL_CALL_RESULT` content of a finished call.
///
/// `TOOL_CALL_RESULT` has no error channel and an empty string would make "failed" and "no
/// output" look alike, so both are stated in words. Otherwise: one result field gives its
/// value (a string as-is, anything else as JSON), several give a JSON object.
pub(crate) fn result_content(
    tool: &ToolAction,
    status: StepStatus,
    error: Option<&StepError>,
) -> String {
    let name = &tool.name;
    if status == StepStatus::Error {
        let message = error.map_or("the step failed", |e| e.message.as_str());
        return format!("There was an error executing {name}: {message}");
    }
    // Error fields are part of the result only when they say something.
    let mut fields: Map<String, Value> = Map::new();
    for (key, value) in &tool.result {
        match (ERROR_FIELDS.contains(&key.as_str()), error_text(value)) {
            (true, Some(message)) => {
                return format!("There was an error executing {name}: {message}");
            }
            (true, None) => {}
            (false, _) => {
                fields.insert(key.clone(), value.clone());
            }
        }
    }
    let content = match fields.len() {
        0 => String::new(),
        1 => match fields.into_iter().next().map(|(_, v)| v) {
            Some(Value::String(s)) => s,
            Some(value) => value.to_string(),
            None => String::new(),
        },
        _ => Value::Object(fields).to_string(),
    };
    if content.is_empty() {
        format!("{name} completed without returning any output.")
    } else {
        content
    }
}

/// Result fields in which the harness reports a failure (a custom tool's error response, a
/// skill lookup's `errorMessage`).
const ERROR_FIELDS: &[&str] = &["error", "errorMessage"];

/// The failure an error field states, if it states one.
fn error_text(value: &Value) -> Option<String> {
    match value {
        Value::String(s) if !s.trim().is_empty() => Some(s.clone()),
        Value::Object(m) if !m.is_empty() => Some(value.to_string()),
        Value::Array(a) if !a.is_empty() => Some(value.to_string()),
        Value::Bool(true) => Some("true".to_owned()),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use harness_proto::step::ToolKind;
    use serde_json::json;

    use super::*;

    fn tool(result: Value) -> ToolAction {
        ToolAction {
            name: "run_command".into(),
            kind: ToolKind::Builtin,
            arguments: Map::new(),
            result: result.as_object().cloned().unwrap_or_default(),
        }
    }

    #[test]
    fn results_are_stated_plainly() {
        let done = StepStatus::Done;
        assert_eq!(
            result_content(&tool(json!({})), done, None),
            "run_command completed without returning any output."
        );
        assert_eq!(
            result_content(&tool(json!({"combinedOutput": "hi\n"})), done, None),
            "hi\n"
        );
        assert_eq!(
            result_content(&tool(json!({"exitCode": 0})), done, None),
            "0"
        );
        assert_eq!(
            result_content(
                &tool(json!({"exitCode": 1, "combinedOutput": "no"})),
                done,
                None
            ),
            r#"{"combinedOutput":"no","exitCode":1}"#
        );
    }

    #[test]
    fn failures_are_stated_in_words() {
        let error = StepError {
            message: "denied by pre-tool hook: no".into(),
            http_code: 0,
        };
        assert_eq!(
            result_content(&tool(json!({})), StepStatus::Error, Some(&error)),
            "There was an error executing run_command: denied by pre-tool hook: no"
        );
        assert_eq!(
            result_content(&tool(json!({"error": "boom"})), StepStatus::Done, None),
            "There was an error executing run_command: boom"
        );
        // An empty error field is no failure, and an empty result is no output.
        assert_eq!(
            result_content(
                &tool(json!({"error": "", "combinedOutput": ""})),
                StepStatus::Done,
                None
            ),
            "run_command completed without returning any output."
        );
    }
}
