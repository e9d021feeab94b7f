//! Semantic checks of a parsed `RunAgentInput`.

use std::collections::HashMap;

use super::{Message, RunAgentInput};

/// A failed check: JSON path and reason.
pub(super) type Failure = (String, String);

/// Runs every check, returning the first failure in document order.
pub(super) fn check(input: &RunAgentInput) -> Result<(), Failure> {
    non_empty("threadId", &input.thread_id)?;
    non_empty("runId", &input.run_id)?;

    let mut message_ids = Unique::new("message id");
    let mut tool_call_ids = Unique::new("tool call id");
    for (index, message) in input.messages.iter().enumerate() {
        let at = format!("messages[{index}]");
        message_ids.insert(&format!("{at}.id"), message.id())?;
        match message {
            Message::Assistant(assistant) => {
                for (call_index, call) in assistant.tool_calls.iter().enumerate() {
                    tool_call_ids.insert(&format!("{at}.toolCalls[{call_index}].id"), &call.id)?;
                    non_empty(
                        &format!("{at}.toolCalls[{call_index}].function.name"),
                        &call.function.name,
                    )?;
                }
            }
            Message::Tool(tool) => non_empty(&format!("{at}.toolCallId"), &tool.tool_call_id)?,
            _ => {}
        }
    }

    let mut tool_names = Unique::new("tool name");
    for (index, tool) in input.tools.iter().enumerate() {
        tool_names.insert(&format!("tools[{index}].name"), &tool.name)?;
    }

    let mut interrupt_ids = Unique::new("interrupt id");
    for (index, entry) in input.resume.iter().enumerate() {
        interrupt_ids.insert(&format!("resume[{index}].interruptId"), &entry.interrupt_id)?;
    }
    Ok(())
}

fn non_empty(path: &str, value: &str) -> Result<(), Failure> {
    if value.is_empty() {
        return Err((path.to_owned(), "must not be empty".to_owned()));
    }
    Ok(())
}

/// Tracks values that must be unique and non-empty, remembering where each was first seen.
struct Unique<'a> {
    what: &'static str,
    seen: HashMap<&'a str, String>,
}

impl<'a> Unique<'a> {
    fn new(what: &'static str) -> Self {
        Self {
            what,
            seen: HashMap::new(),
        }
    }

    fn insert(&mut self, path: &str, value: &'a str) -> Result<(), Failure> {
        non_empty(path, value)?;
        if let Some(first) = self.seen.get(value) {
            let reason = format!("duplicate {} {value:?} (also at {first})", self.what);
            return Err((path.to_owned(), reason));
        }
        self.seen.insert(value, path.to_owned());
        Ok(())
    }
}
