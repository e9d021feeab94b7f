//! Whether a run's messages change the thread's past: an edit or a regenerate.
//!
//! Clients resend the transcript, and the server owns the history; most runs agree with it or
//! merely lag behind it. The rule ([`detect`]), checked before anything of the run is applied:
//!
//! 1. **Edited**: a user message of the run has the id of a message the thread already sent to
//!    the harness, and other content. Content is compared as sent: the trimmed text parts and
//!    the attachments, against the digest recorded when the message was forwarded
//!    ([`Digests`]); a message forwarded before digests were kept is compared by its text
//!    with the thread's log. The oldest edited message is the point of divergence.
//! 2. **Regenerate**: nothing is edited, the run brings no new user message, and its last
//!    message (activity and reasoning aside) is a user message the thread forwarded whose answer
//!    the thread holds (an assistant message after it in the thread's log), with no turn in
//!    flight, and every client saw what happened on the thread (no part of it ran while nobody
//!    watched): the history was cut short before the server's last answer.
//! 3. **Regenerate, marked**: the run says it is one (`forwardedProps.regenerate: true`,
//!    [`Asked::Regenerate`]) and nothing is edited: its last message must be a user message
//!    the thread forwarded, whose answer is generated again. The mark is what tells a
//!    regenerate from a retry where the server cannot (its history not read back yet, after a
//!    restart or on another replica, or the client not having seen the answer), so neither the
//!    log nor what the client saw is asked. Any other last message is [`NotRegenerable`].
//! 4. Anything else is not a divergence. A client that lags — it sends only its new message,
//!    or an older transcript, or ends on an assistant message it saw — forwards its new message
//!    (if any) as always; what it missed is restated. So is a client that left during a turn
//!    and sends its transcript again: it did not see the answer it would be cutting.
//!
//! Pure and total: no input makes it panic.

use crate::store::Digests;
use agui_types::{Content, ContentPart, Message, UserMessage};

/// How a run's messages change the thread's past.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Divergence {
    /// The user message `message_id` was edited: the thread continues from just before it,
    /// with the run's version of it.
    Edited {
        /// The edited message's id.
        message_id: String,
    },
    /// The answer to the user message `message_id` is to be generated again: the thread
    /// continues from just after it.
    Regenerate {
        /// The id of the user message whose answer is regenerated.
        message_id: String,
    },
}

impl Divergence {
    /// The message the divergence is about.
    pub(crate) fn message_id(&self) -> &str {
        match self {
            Self::Edited { message_id } | Self::Regenerate { message_id } => message_id,
        }
    }

    /// `edit` or `regenerate`, for logs and the wire.
    pub(crate) fn kind(&self) -> &'static str {
        match self {
            Self::Edited { .. } => "edit",
            Self::Regenerate { .. } => "regenerate",
        }
    }
}

/// What the thread knows of its past, for [`detect`].
#[derive(Clone, Copy)]
pub(crate) struct Known<'a> {
    /// The thread's messages (empty while its history was not read back).
    pub(crate) log: &'a [Message],
    /// The digests of the forwarded user messages.
    pub(crate) sent: &'a Digests,
    /// Whether a user message id was forwarded.
    pub(crate) forwarded: &'a dyn Fn(&str) -> bool,
    /// A turn is in flight.
    pub(crate) turn_in_flight: bool,
    /// Something happened on the thread that no client saw (it ran on after its client left):
    /// a client sending less may only have missed it.
    pub(crate) unwatched: bool,
}

/// What the run's client says its messages mean (`forwardedProps.regenerate`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Asked {
    /// Nothing: the rule tells what the messages mean.
    Nothing,
    /// The run regenerates the answer to its last user message.
    Regenerate,
}

/// A run marked as a regenerate whose last message is not a user message the thread sent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct NotRegenerable {
    /// Why, for the client.
    pub(crate) why: &'static str,
}

/// Applies the rule of this module to a run's `messages`.
pub(crate) fn detect(
    known: Known<'_>,
    messages: &[Message],
    asked: Asked,
) -> Result<Option<Divergence>, NotRegenerable> {
    if let Some(edited) = edited_message(known, messages) {
        return Ok(Some(edited));
    }
    let last = messages
        .iter()
        .rev()
        .find(|m| !matches!(m, Message::Activity(_) | Message::Reasoning(_)));
    if asked == Asked::Regenerate {
        let Some(Message::User(user)) = last else {
            return Err(NotRegenerable {
                why: "a regenerate's last message must be the user message whose answer is generated again",
            });
        };
        if !(known.forwarded)(&user.id) {
            return Err(NotRegenerable {
                why: "a regenerate's last message must be a user message the thread has already sent",
            });
        }
        return Ok(Some(Divergence::Regenerate {
            message_id: user.id.clone(),
        }));
    }
    Ok(unmarked_regenerate(known, messages, last))
}

/// Rule 1: the oldest user message of the run that the thread sent with other content.
fn edited_message(known: Known<'_>, messages: &[Message]) -> Option<Divergence> {
    messages
        .iter()
        .filter_map(|m| match m {
            Message::User(user) => Some(user),
            _ => None,
        })
        .find(|user| (known.forwarded)(&user.id) && edited(known, user))
        .map(|user| Divergence::Edited {
            message_id: user.id.clone(),
        })
}

/// Rule 2, for a run whose client said nothing; `last` is its last message (activity and
/// reasoning aside).
fn unmarked_regenerate(
    known: Known<'_>,
    messages: &[Message],
    last: Option<&Message>,
) -> Option<Divergence> {
    let any_new = messages
        .iter()
        .any(|m| matches!(m, Message::User(user) if !(known.forwarded)(&user.id)));
    if any_new || known.turn_in_flight || known.unwatched {
        return None;
    }
    let Message::User(user) = last? else {
        return None;
    };
    if !(known.forwarded)(&user.id) {
        return None;
    }
    let at = known.log.iter().position(|m| m.id() == user.id)?;
    known.log[at + 1..]
        .iter()
        .any(|m| matches!(m, Message::Assistant(_)))
        .then(|| Divergence::Regenerate {
            message_id: user.id.clone(),
        })
}

fn log_user<'a>(log: &'a [Message], id: &str) -> Option<&'a UserMessage> {
    log.iter().find_map(|m| match m {
        Message::User(user) if user.id == id => Some(user),
        _ => None,
    })
}

/// Whether the run's `user` message differs from what the thread sent under its id.
fn edited(known: Known<'_>, user: &UserMessage) -> bool {
    if let Some(sent) = known.sent.get(&user.id) {
        return sent != digest(user);
    }
    // Forwarded before digests were kept: only plain text can be compared with the log's
    // version (a history read back holds the text the harness echoed, attachment notes in it).
    match log_user(known.log, &user.id) {
        Some(logged) if text_only(logged) && text_only(user) => {
            normalized_text(logged) != normalized_text(user)
        }
        _ => false,
    }
}

fn text_only(user: &UserMessage) -> bool {
    match &user.content {
        Content::Text(_) => true,
        Content::Parts(parts) => parts.iter().all(|p| matches!(p, ContentPart::Text(_))),
    }
}

/// The trimmed, non-blank text parts joined by newlines.
fn normalized_text(user: &UserMessage) -> String {
    match &user.content {
        Content::Text(text) => text.trim().to_owned(),
        Content::Parts(parts) => parts
            .iter()
            .filter_map(|part| match part {
                ContentPart::Text(text) => Some(text.text.trim()),
                _ => None,
            })
            .filter(|t| !t.is_empty())
            .collect::<Vec<_>>()
            .join("\n"),
    }
}

/// A short digest of a user message's content as the harness gets it: its normalized text and
/// its attachments (each as the client sent it).
pub(crate) fn digest(user: &UserMessage) -> String {
    let mut data = normalized_text(user).into_bytes();
    if let Content::Parts(parts) = &user.content {
        for part in parts {
            if matches!(part, ContentPart::Text(_)) {
                continue;
            }
            data.push(0);
            data.extend(serde_json::to_vec(part).unwrap_or_default());
        }
    }
    crate::hash::sha256_hex(&data, 8)
}

#[cfg(test)]
mod tests;
