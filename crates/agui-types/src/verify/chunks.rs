//! Expansion of `TEXT_MESSAGE_CHUNK`, `TOOL_CALL_CHUNK` and `REASONING_MESSAGE_CHUNK`, as
//! `@ag-ui/client`'s `transformChunks` does it, feeding the synthesized starts, contents and
//! ends through the ordinary checks.
//!
//! Each "lane" (the parent agent, or one subagent) holds at most one stream assembled from
//! chunks. A chunk continues it or closes it and opens another; the stream is closed when a
//! non-chunk event of the same lane arrives, when its subagent ends, or at any run boundary.

use super::{Check, Owner, Rule, StreamVerifier, owned, owner_name};
use crate::events::{
    Event, EventType, ReasoningMessageChunk, TextMessageChunk, TextMessageRole, ToolCallChunk,
};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Text,
    Tool,
    Reasoning,
}

impl Kind {
    fn entity(self) -> &'static str {
        match self {
            Self::Text => "text message",
            Self::Tool => "tool call",
            Self::Reasoning => "reasoning message",
        }
    }

    /// The end event the client synthesizes for a stream of this kind.
    fn end(self) -> EventType {
        match self {
            Self::Text => EventType::TextMessageEnd,
            Self::Tool => EventType::ToolCallEnd,
            Self::Reasoning => EventType::ReasoningMessageEnd,
        }
    }

    fn id_field(self) -> &'static str {
        match self {
            Self::Tool => "toolCallId",
            Self::Text | Self::Reasoning => "messageId",
        }
    }
}

/// A stream being assembled from chunks, with the fields its opener established.
#[derive(Debug, Clone)]
enum Pending {
    Text {
        id: String,
        role: TextMessageRole,
        name: Option<String>,
        tag: Owner,
    },
    Tool {
        id: String,
        name: String,
        parent: Option<String>,
        tag: Owner,
    },
    Reasoning {
        id: String,
        tag: Owner,
    },
}

impl Pending {
    fn kind(&self) -> Kind {
        match self {
            Self::Text { .. } => Kind::Text,
            Self::Tool { .. } => Kind::Tool,
            Self::Reasoning { .. } => Kind::Reasoning,
        }
    }

    fn id(&self) -> &str {
        match self {
            Self::Text { id, .. } | Self::Tool { id, .. } | Self::Reasoning { id, .. } => id,
        }
    }

    fn tag(&self) -> Option<&str> {
        match self {
            Self::Text { tag, .. } | Self::Tool { tag, .. } | Self::Reasoning { tag, .. } => {
                tag.as_deref()
            }
        }
    }
}

/// Open chunk streams per lane, in the order they opened.
#[derive(Debug, Default)]
pub(super) struct Lanes(Vec<(Owner, Pending)>);

impl Lanes {
    fn get(&self, lane: &Owner) -> Option<&Pending> {
        self.0
            .iter()
            .find(|(owner, _)| owner == lane)
            .map(|(_, pending)| pending)
    }

    fn take(&mut self, lane: &Owner) -> Option<Pending> {
        let at = self.0.iter().position(|(owner, _)| owner == lane)?;
        Some(self.0.remove(at).1)
    }

    fn holder(&self, kind: Kind, id: &str) -> Option<&Owner> {
        self.0
            .iter()
            .find(|(_, p)| p.kind() == kind && p.id() == id)
            .map(|(owner, _)| owner)
    }
}

/// Says which synthesized event a failure belongs to.
fn expanded(event_type: EventType, (rule, message): (Rule, String)) -> (Rule, String) {
    (rule, format!("chunk expansion ({event_type}): {message}"))
}

fn chunk_error<T>(message: String) -> Result<T, (Rule, String)> {
    Err((Rule::Chunk, message))
}

/// A continuation may repeat a field its opener set, but only with the same value.
fn agree(
    kind: Kind,
    id: &str,
    field: &str,
    incoming: Option<&str>,
    established: Option<&str>,
) -> Check {
    match incoming {
        Some(value) if Some(value) != established => chunk_error(format!(
            "cannot continue {} '{id}': chunk {field} '{value}' does not match the open stream's {field} {}",
            kind.entity(),
            established.map_or_else(|| "(absent)".to_owned(), |v| format!("'{v}'"))
        )),
        _ => Ok(()),
    }
}

impl StreamVerifier {
    /// Closes the chunk streams `event` implicitly ends, before the event itself is checked.
    pub(super) fn close_lanes_before(&mut self, event: &Event) -> Check {
        match event {
            Event::TextMessageStart(_)
            | Event::TextMessageContent(_)
            | Event::TextMessageEnd(_)
            | Event::ToolCallStart(_)
            | Event::ToolCallArgs(_)
            | Event::ToolCallEnd(_)
            | Event::ToolCallResult(_)
            | Event::StateSnapshot(_)
            | Event::StateDelta(_)
            | Event::Custom(_)
            | Event::StepStarted(_)
            | Event::StepFinished(_)
            | Event::ReasoningStart(_)
            | Event::ReasoningMessageStart(_)
            | Event::ReasoningMessageContent(_)
            | Event::ReasoningMessageEnd(_)
            | Event::ReasoningEnd(_) => self.close_lane(&owned(event.subagent_run_id())),
            Event::RunStarted(_)
            | Event::RunFinished(_)
            | Event::RunError(_)
            | Event::MessagesSnapshot(_) => self.close_all_lanes(),
            Event::SubagentFinished(_) | Event::SubagentError(_) => {
                self.close_lane(&owned(event.subagent_run_id()))
            }
            // RAW, ACTIVITY_*, REASONING_ENCRYPTED_VALUE and SUBAGENT_STARTED leave chunk
            // streams open; chunks manage their own lane.
            _ => Ok(()),
        }
    }

    fn close_lane(&mut self, lane: &Owner) -> Check {
        match self.run.lanes.take(lane) {
            Some(pending) => self.end_pending(&pending),
            None => Ok(()),
        }
    }

    fn close_all_lanes(&mut self) -> Check {
        for (_, pending) in std::mem::take(&mut self.run.lanes.0) {
            self.end_pending(&pending)?;
        }
        Ok(())
    }

    /// Feeds the synthesized end of a chunk stream through the ordinary checks.
    fn end_pending(&mut self, pending: &Pending) -> Check {
        let (id, tag) = (pending.id(), pending.tag());
        match pending.kind() {
            Kind::Text => self.text_continue(id, tag, true),
            Kind::Tool => self.tool_continue(id, tag, true),
            Kind::Reasoning => self.reasoning_continue(false, id, tag, true),
        }
        .map_err(|error| expanded(pending.kind().end(), error))
    }

    /// Which lane a chunk belongs to; a continuation may omit both its id and its tag.
    fn resolve_lane(
        &self,
        kind: Kind,
        chunk: EventType,
        id: Option<&str>,
        tag: Option<&str>,
    ) -> Result<Owner, (Rule, String)> {
        if let Some(id) = id {
            return match self.run.lanes.holder(kind, id) {
                Some(holder) if tag.is_some() && holder.as_deref() != tag => Err((
                    Rule::Chunk,
                    format!(
                        "cannot continue {} '{id}': chunk subagentRunId '{}' does not match the open stream's {}",
                        kind.entity(),
                        tag.unwrap_or_default(),
                        owner_name(holder)
                    ),
                )),
                Some(holder) => Ok(holder.clone()),
                None => Ok(owned(tag)),
            };
        }
        if tag.is_some() {
            return Ok(owned(tag));
        }
        if self.run.lanes.get(&None).is_some_and(|p| p.kind() == kind) {
            return Ok(None);
        }
        let candidates: Vec<&Owner> = self
            .run
            .lanes
            .0
            .iter()
            .filter(|(_, p)| p.kind() == kind)
            .map(|(o, _)| o)
            .collect();
        match candidates.as_slice() {
            [] => Ok(None),
            [only] => Ok((*only).clone()),
            several => Err((
                Rule::Chunk,
                format!(
                    "ambiguous {chunk}: it carries neither {} nor subagentRunId, but {} lanes have an open {}",
                    kind.id_field(),
                    several.len(),
                    kind.entity()
                ),
            )),
        }
    }

    pub(super) fn text_chunk(&mut self, chunk: &TextMessageChunk) -> Check {
        let ty = EventType::TextMessageChunk;
        let tag = chunk.subagent_run_id.as_deref();
        let lane = self.resolve_lane(Kind::Text, ty, chunk.message_id.as_deref(), tag)?;
        let open = match self.run.lanes.get(&lane) {
            Some(Pending::Text {
                id,
                role,
                name,
                tag: opener,
            }) if chunk.message_id.as_ref().is_none_or(|m| m == id) => {
                let role_now = chunk.role.map(TextMessageRole::as_str);
                agree(Kind::Text, id, "role", role_now, Some(role.as_str()))?;
                agree(
                    Kind::Text,
                    id,
                    "name",
                    chunk.name.as_deref(),
                    name.as_deref(),
                )?;
                Some((id.clone(), opener.clone()))
            }
            _ => None,
        };
        let start = |this: &mut Self| {
            let Some(id) = chunk.message_id.clone() else {
                return chunk_error(format!("the first {ty} of a message must carry messageId"));
            };
            this.text_start(&id, tag)
                .map_err(|e| expanded(EventType::TextMessageStart, e))?;
            let pending = Pending::Text {
                id: id.clone(),
                role: chunk.role.unwrap_or_default(),
                name: chunk.name.clone(),
                tag: owned(tag),
            };
            Ok((id, pending))
        };
        let content = chunk.delta.is_some() || !chunk.base.is_empty();
        self.expand(lane, tag, open, start, content, |this, id, owner| {
            this.text_continue(id, owner, false)
                .map_err(|e| expanded(EventType::TextMessageContent, e))
        })
    }

    pub(super) fn tool_chunk(&mut self, chunk: &ToolCallChunk) -> Check {
        let ty = EventType::ToolCallChunk;
        let tag = chunk.subagent_run_id.as_deref();
        let lane = self.resolve_lane(Kind::Tool, ty, chunk.tool_call_id.as_deref(), tag)?;
        let open = match self.run.lanes.get(&lane) {
            Some(Pending::Tool {
                id,
                name,
                parent,
                tag: opener,
            }) if chunk.tool_call_id.as_ref().is_none_or(|c| c == id) => {
                agree(
                    Kind::Tool,
                    id,
                    "toolCallName",
                    chunk.tool_call_name.as_deref(),
                    Some(name),
                )?;
                let parent_now = chunk.parent_message_id.as_deref();
                agree(
                    Kind::Tool,
                    id,
                    "parentMessageId",
                    parent_now,
                    parent.as_deref(),
                )?;
                Some((id.clone(), opener.clone()))
            }
            _ => None,
        };
        let start = |this: &mut Self| {
            let (Some(id), Some(name)) = (&chunk.tool_call_id, &chunk.tool_call_name) else {
                return chunk_error(format!(
                    "the first {ty} of a call must carry toolCallId and toolCallName"
                ));
            };
            let parent = chunk.parent_message_id.clone();
            this.tool_start(id, tag, parent.as_deref())
                .map_err(|e| expanded(EventType::ToolCallStart, e))?;
            let pending = Pending::Tool {
                id: id.clone(),
                name: name.clone(),
                parent,
                tag: owned(tag),
            };
            Ok((id.clone(), pending))
        };
        let content = chunk.delta.is_some() || !chunk.base.is_empty();
        self.expand(lane, tag, open, start, content, |this, id, owner| {
            this.tool_continue(id, owner, false)
                .map_err(|e| expanded(EventType::ToolCallArgs, e))
        })
    }

    pub(super) fn reasoning_chunk(&mut self, chunk: &ReasoningMessageChunk) -> Check {
        let ty = EventType::ReasoningMessageChunk;
        let tag = chunk.subagent_run_id.as_deref();
        let lane = self.resolve_lane(Kind::Reasoning, ty, chunk.message_id.as_deref(), tag)?;
        let open = match self.run.lanes.get(&lane) {
            Some(Pending::Reasoning { id, tag: opener })
                if chunk.message_id.as_ref().is_none_or(|m| m == id) =>
            {
                Some((id.clone(), opener.clone()))
            }
            _ => None,
        };
        let start = |this: &mut Self| {
            let Some(id) = chunk.message_id.clone() else {
                return chunk_error(format!("the first {ty} of a message must carry messageId"));
            };
            this.reasoning_open(false, &id, tag)
                .map_err(|e| expanded(EventType::ReasoningMessageStart, e))?;
            let pending = Pending::Reasoning {
                id: id.clone(),
                tag: owned(tag),
            };
            Ok((id, pending))
        };
        let content = chunk.delta.is_some() || !chunk.base.is_empty();
        self.expand(lane, tag, open, start, content, |this, id, owner| {
            this.reasoning_continue(false, id, owner, false)
                .map_err(|e| expanded(EventType::ReasoningMessageContent, e))
        })
    }

    /// The end of every chunk's expansion: the chunk continues `lane`'s stream when it is
    /// `open` (its id and its opener's tag); otherwise the lane's stream is closed and `start`
    /// opens another (its id and what to remember of it). A chunk with `content` then adds it
    /// to the stream, attributed to its own tag or else the opener's.
    fn expand(
        &mut self,
        lane: Owner,
        tag: Option<&str>,
        open: Option<(String, Owner)>,
        start: impl FnOnce(&mut Self) -> Result<(String, Pending), (Rule, String)>,
        content: bool,
        add: impl FnOnce(&mut Self, &str, Option<&str>) -> Check,
    ) -> Check {
        let (id, opener) = match open {
            Some(open) => open,
            None => {
                self.close_lane(&lane)?;
                let (id, pending) = start(self)?;
                self.run.lanes.0.push((lane, pending));
                (id, owned(tag))
            }
        };
        if content {
            add(self, &id, tag.or(opener.as_deref()))?;
        }
        Ok(())
    }
}
