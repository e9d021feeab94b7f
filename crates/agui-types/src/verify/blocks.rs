//! Start/end pairing and ownership of text messages, tool calls, reasoning, steps and
//! subagents. The functions take ids rather than events so that the chunk expansion can
//! feed its synthesized starts and ends through the same checks.

use std::collections::BTreeSet;

use super::{Check, Owner, Rule, StreamVerifier, owned, owner_check, owner_name};
use crate::events::{EncryptedValueSubtype, ReasoningEncryptedValue, SubagentStarted};

/// A kind of block, as a continuation names it: what the block is (in messages), what its
/// owner record is of (spans share the reasoning messages' record), and the order rule a
/// continuation of a block that is not open breaks.
struct Block(&'static str, &'static str, &'static str);

const TEXT: Block = Block(
    "text message",
    "text message",
    "TEXT_MESSAGE_START must come first, and nothing may follow TEXT_MESSAGE_END",
);
const TOOL: Block = Block(
    "tool call",
    "tool call",
    "TOOL_CALL_START must come first, and nothing may follow TOOL_CALL_END",
);
const SPAN: Block = Block(
    "reasoning span",
    "reasoning message",
    "REASONING_START must come first",
);
const REASONING: Block = Block(
    "reasoning message",
    "reasoning message",
    "REASONING_MESSAGE_START must come first",
);

impl Block {
    /// A continuation of block `id` (its end when `closing`): the block must be among `open`,
    /// and `tag` must match its `owner`; the end removes it from `open`.
    fn continued(
        &self,
        open: &mut BTreeSet<String>,
        owner: Option<&Owner>,
        id: &str,
        tag: Option<&str>,
        closing: bool,
    ) -> Check {
        let Block(what, owned_as, order) = self;
        if !open.contains(id) {
            return Err((Rule::NotOpen, format!("no open {what} '{id}' ({order})")));
        }
        owner_check(tag, owner, owned_as, id)?;
        if closing {
            open.remove(id);
        }
        Ok(())
    }
}

impl StreamVerifier {
    pub(super) fn text_start(&mut self, id: &str, tag: Option<&str>) -> Check {
        if self.run.text.contains(id) {
            return Err((
                Rule::AlreadyOpen,
                format!(
                    "text message '{id}' is already open; close it with TEXT_MESSAGE_END first"
                ),
            ));
        }
        // First writer wins: re-opening a closed id under another owner would append one
        // producer's text to another's message.
        let existing = self.run.owners.message.get(id);
        owner_check(tag, existing, "text message", id)?;
        if existing.is_none() {
            self.run.owners.message.insert(id.to_owned(), owned(tag));
        }
        self.run.text.insert(id.to_owned());
        Ok(())
    }

    pub(super) fn text_continue(&mut self, id: &str, tag: Option<&str>, closing: bool) -> Check {
        let owner = self.run.owners.message.get(id);
        TEXT.continued(&mut self.run.text, owner, id, tag, closing)
    }

    pub(super) fn tool_start(
        &mut self,
        id: &str,
        tag: Option<&str>,
        parent_message_id: Option<&str>,
    ) -> Check {
        if self.run.tools.contains(id) {
            return Err((
                Rule::AlreadyOpen,
                format!("tool call '{id}' is already open; close it with TOOL_CALL_END first"),
            ));
        }
        // A call lives inside its parent message and carries no owner of its own, so it
        // cannot be attributed differently from that message.
        let parent_owner =
            parent_message_id.and_then(|pid| self.run.owners.message.get(pid).map(|o| (pid, o)));
        if let (Some(tag), Some((pid, owner))) = (tag, parent_owner)
            && owner.as_deref() != Some(tag)
        {
            return Err((
                Rule::Attribution,
                format!(
                    "subagentRunId '{tag}' does not match its parent message '{pid}' owned by {}",
                    owner_name(owner)
                ),
            ));
        }
        let effective: Owner = match (tag, parent_owner) {
            (Some(tag), _) => Some(tag.to_owned()),
            (None, Some((_, owner))) => owner.clone(),
            (None, None) => None,
        };
        // An untagged call without a known parent agrees with any recorded owner.
        let claims_owner = tag.is_some() || parent_owner.is_some();
        match self.run.owners.tool_call.get(id) {
            Some(existing) if claims_owner && existing != &effective => {
                return Err((
                    Rule::Attribution,
                    format!(
                        "tool call '{id}' is owned by {} but would be re-opened by {}",
                        owner_name(existing),
                        owner_name(&effective)
                    ),
                ));
            }
            Some(_) => {}
            None => {
                self.run.owners.tool_call.insert(id.to_owned(), effective);
            }
        }
        self.run.tools.insert(id.to_owned());
        Ok(())
    }

    pub(super) fn tool_continue(&mut self, id: &str, tag: Option<&str>, closing: bool) -> Check {
        let owner = self.run.owners.tool_call.get(id);
        TOOL.continued(&mut self.run.tools, owner, id, tag, closing)
    }

    /// `REASONING_START` (`span`) or `REASONING_MESSAGE_START`.
    pub(super) fn reasoning_open(&mut self, span: bool, id: &str, tag: Option<&str>) -> Check {
        let (open, what, closer) = if span {
            (&mut self.run.spans, "reasoning span", "REASONING_END")
        } else {
            (
                &mut self.run.reasoning,
                "reasoning message",
                "REASONING_MESSAGE_END",
            )
        };
        if open.contains(id) {
            return Err((
                Rule::AlreadyOpen,
                format!("{what} '{id}' is already open; close it with {closer} first"),
            ));
        }
        // Spans and messages share one owner record, so a span and the message inside it
        // cannot be claimed by different producers.
        let existing = self.run.owners.reasoning.get(id);
        owner_check(tag, existing, "reasoning message", id)?;
        if existing.is_none() {
            self.run.owners.reasoning.insert(id.to_owned(), owned(tag));
        }
        open.insert(id.to_owned());
        Ok(())
    }

    /// `REASONING_END` (`span`), `REASONING_MESSAGE_CONTENT` or `REASONING_MESSAGE_END`.
    pub(super) fn reasoning_continue(
        &mut self,
        span: bool,
        id: &str,
        tag: Option<&str>,
        closing: bool,
    ) -> Check {
        let (open, block) = if span {
            (&mut self.run.spans, &SPAN)
        } else {
            (&mut self.run.reasoning, &REASONING)
        };
        let owner = self.run.owners.reasoning.get(id);
        block.continued(open, owner, id, tag, closing)
    }

    pub(super) fn encrypted_value(&mut self, event: &ReasoningEncryptedValue) -> Check {
        let owners = &self.run.owners;
        let id = event.entity_id.as_str();
        let (owner, kind) = match event.subtype {
            EncryptedValueSubtype::ToolCall => (owners.tool_call.get(id), "tool call"),
            // Text and reasoning messages both take encrypted values; ids are unique per
            // kind, so at most one bucket knows this one.
            EncryptedValueSubtype::Message => (
                owners.message.get(id).or_else(|| owners.reasoning.get(id)),
                "message",
            ),
        };
        owner_check(event.subagent_run_id.as_deref(), owner, kind, id)
    }

    pub(super) fn step_started(&mut self, name: &str, tag: Option<&str>) -> Check {
        let steps = self.run.steps.entry(owned(tag)).or_default();
        if !steps.insert(name.to_owned()) {
            return Err((
                Rule::AlreadyOpen,
                format!(
                    "step '{name}' is already open for {}",
                    owner_name(&owned(tag))
                ),
            ));
        }
        Ok(())
    }

    pub(super) fn step_finished(&mut self, name: &str, tag: Option<&str>) -> Check {
        let owner = owned(tag);
        if self
            .run
            .steps
            .get_mut(&owner)
            .is_some_and(|steps| steps.remove(name))
        {
            return Ok(());
        }
        let other = self
            .run
            .steps
            .iter()
            .find(|(holder, names)| **holder != owner && names.contains(name))
            .map(|(holder, _)| holder);
        let message = match other {
            Some(holder) => format!(
                "step '{name}' is finished by {} but is open under {}; a step must be finished by whoever started it",
                owner_name(&owner),
                owner_name(holder)
            ),
            None => format!("step '{name}' was not started"),
        };
        Err((Rule::NotOpen, message))
    }

    pub(super) fn subagent_started(&mut self, event: &SubagentStarted) -> Check {
        let id = event.subagent_run_id.as_str();
        if self.run.subagents.contains(id) {
            return Err((
                Rule::AlreadyOpen,
                format!(
                    "subagent '{id}' is already active; finish it with SUBAGENT_FINISHED first"
                ),
            ));
        }
        if self.run.closed_subagents.contains(id) {
            return Err((
                Rule::Subagent,
                format!(
                    "subagent '{id}' already finished in this run; subagent run ids are per invocation"
                ),
            ));
        }
        if let Some(parent) = &event.parent_subagent_run_id
            && !self.run.subagents.contains(parent)
            && !self.run.closed_subagents.contains(parent)
        {
            return Err((
                Rule::Subagent,
                format!("parentSubagentRunId '{parent}' was not started in this run"),
            ));
        }
        self.run.subagents.insert(id.to_owned());
        Ok(())
    }

    pub(super) fn subagent_ended(&mut self, id: &str) -> Check {
        if !self.run.subagents.remove(id) {
            return Err((
                Rule::NotOpen,
                format!("no active subagent '{id}' (SUBAGENT_STARTED must come first)"),
            ));
        }
        self.run.closed_subagents.insert(id.to_owned());
        Ok(())
    }
}
