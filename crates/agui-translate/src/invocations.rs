//! Subagent invocations as AG-UI subagent events ([`SubagentEvents::Subagent`]): one
//! invocation per subagent trajectory, announced with `SUBAGENT_STARTED` before any event
//! attributed to it and closed by `SUBAGENT_FINISHED` or `SUBAGENT_ERROR`.
//!
//! [`SubagentEvents::Subagent`]: crate::SubagentEvents::Subagent

use std::collections::HashMap;

use agui_types::Event;
use agui_types::{SubagentError, SubagentFinished, SubagentOutcome, SubagentStarted};
use serde_json::Value;

/// The name every invocation is announced with: the harness reports neither the subagent's
/// type nor its role to the host (the `invoke_subagent` action has no fields), so the only
/// definition the host knows is the harness's subagent mechanism itself.
pub const SUBAGENT_NAME: &str = "subagent";

/// The invocations of the turn, per subagent trajectory.
///
/// The `subagentRunId` of a trajectory's first invocation is the trajectory id (opaque, and the
/// same whenever the turn is translated again); a subagent woken again after it finished is a
/// new invocation (`<trajectory>-2`, …), as an id must not be reused within a run. An
/// invocation still running when a run ends is closed there as suspended and announced again,
/// under the same id, when it produces more output in a later run (the spec allows a suspended
/// invocation to continue under its id).
#[derive(Debug, Default)]
pub(crate) struct Invocations {
    current: HashMap<String, Invocation>,
    /// Invocations started so far per trajectory.
    counts: HashMap<String, u32>,
    /// Trajectories whose invocation is announced on the wire in this run, in order.
    shown: Vec<String>,
}

#[derive(Debug)]
struct Invocation {
    run_id: String,
    ended: bool,
    /// The subagent's latest reply: what its parent receives when it goes idle.
    reply: String,
}

/// How an invocation ended.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Ending<'a> {
    /// The subagent went idle: it finished.
    Idle,
    /// It stopped with this error.
    Failed(&'a str),
    /// It was cancelled.
    Cancelled,
}

/// Where an invocation comes from, for its `SUBAGENT_STARTED`.
#[derive(Debug, Default)]
pub(crate) struct Origin {
    /// The invocation of the subagent that invoked this one.
    pub(crate) parent_run: Option<String>,
    /// The `invoke_subagent` tool call.
    pub(crate) tool_call: Option<String>,
    /// The message holding that tool call.
    pub(crate) message: Option<String>,
    /// The invocation step's label (the model's summary of the call).
    pub(crate) label: String,
}

impl Invocations {
    /// A subagent trajectory is running: starts its invocation unless one is in progress.
    /// Returns the new invocation's `subagentRunId`.
    pub(crate) fn begin(&mut self, trajectory: &str) -> Option<String> {
        if self.current.get(trajectory).is_some_and(|i| !i.ended) {
            return None;
        }
        let count = self.counts.entry(trajectory.to_owned()).or_insert(0);
        *count += 1;
        let run_id = match *count {
            1 => trajectory.to_owned(),
            n => format!("{trajectory}-{n}"),
        };
        self.current.insert(
            trajectory.to_owned(),
            Invocation {
                run_id: run_id.clone(),
                ended: false,
                reply: String::new(),
            },
        );
        Some(run_id)
    }

    /// Whether the trajectory has an invocation in progress.
    pub(crate) fn active(&self, trajectory: &str) -> bool {
        self.current.get(trajectory).is_some_and(|i| !i.ended)
    }

    /// The `subagentRunId` of the trajectory's current invocation.
    pub(crate) fn run_id(&self, trajectory: &str) -> Option<&str> {
        self.current.get(trajectory).map(|i| i.run_id.as_str())
    }

    /// Whether the trajectory's invocation still has to be announced in this run before its
    /// output (it is running and not on the wire).
    pub(crate) fn needs_announcing(&self, trajectory: &str) -> bool {
        self.current.get(trajectory).is_some_and(|i| !i.ended)
            && !self.shown.iter().any(|t| t == trajectory)
    }

    /// `SUBAGENT_STARTED` for the trajectory's current invocation.
    pub(crate) fn announce(&mut self, trajectory: &str, origin: Origin, out: &mut Vec<Event>) {
        let Some(invocation) = self.current.get(trajectory) else {
            return;
        };
        let label = origin.label.trim();
        out.push(Event::SubagentStarted(SubagentStarted {
            subagent_run_id: invocation.run_id.clone(),
            name: SUBAGENT_NAME.to_owned(),
            description: (!label.is_empty()).then(|| label.to_owned()),
            parent_subagent_run_id: origin.parent_run,
            parent_tool_call_id: origin.tool_call,
            parent_message_id: origin.message,
            ..SubagentStarted::default()
        }));
        self.shown.push(trajectory.to_owned());
    }

    /// Notes the subagent's latest reply text.
    pub(crate) fn reply(&mut self, trajectory: &str, text: &str) {
        if let Some(invocation) = self.current.get_mut(trajectory)
            && !text.trim().is_empty()
        {
            invocation.reply = text.to_owned();
        }
    }

    /// The replies of the given trajectories' latest invocations, for the invoking tool call's
    /// result.
    pub(crate) fn replies<'a>(&'a self, trajectories: &'a [String]) -> Vec<&'a str> {
        trajectories
            .iter()
            .filter_map(|t| self.current.get(t))
            .map(|i| i.reply.as_str())
            .filter(|r| !r.is_empty())
            .collect()
    }

    /// The invocation ended (the subagent went idle or was cancelled): `SUBAGENT_FINISHED`
    /// with its reply as result, or `SUBAGENT_ERROR` when it failed. The caller announces it
    /// first if needed.
    pub(crate) fn end(&mut self, trajectory: &str, ending: Ending<'_>, out: &mut Vec<Event>) {
        let Some(invocation) = self.current.get_mut(trajectory) else {
            return;
        };
        if invocation.ended {
            return;
        }
        invocation.ended = true;
        self.shown.retain(|t| t != trajectory);
        let run_id = invocation.run_id.clone();
        let failure = match ending {
            Ending::Idle => None,
            Ending::Failed(error) => Some((public_error(error), "SUBAGENT_FAILED")),
            Ending::Cancelled => Some((
                "The subagent was cancelled.".to_owned(),
                "SUBAGENT_CANCELLED",
            )),
        };
        out.push(match failure {
            Some((message, code)) => Event::SubagentError(SubagentError {
                subagent_run_id: run_id,
                message,
                code: Some(code.to_owned()),
                ..SubagentError::default()
            }),
            None => Event::SubagentFinished(SubagentFinished {
                subagent_run_id: run_id,
                result: (!invocation.reply.is_empty())
                    .then(|| Value::String(invocation.reply.clone())),
                ..SubagentFinished::default()
            }),
        });
    }

    /// Closes every invocation announced in this run, innermost first, as suspended: the run
    /// ends while they are still running (their turn continues in a later run). `interrupts`
    /// are the run's interrupts with the trajectory that raised each; an invocation lists its
    /// own.
    pub(crate) fn suspend_all(&mut self, interrupts: &[(String, String)], out: &mut Vec<Event>) {
        while let Some(trajectory) = self.shown.pop() {
            let Some(invocation) = self.current.get(&trajectory) else {
                continue;
            };
            let interrupt_ids = interrupts
                .iter()
                .filter(|(_, t)| *t == trajectory)
                .map(|(id, _)| id.clone())
                .collect();
            out.push(Event::SubagentFinished(SubagentFinished {
                subagent_run_id: invocation.run_id.clone(),
                outcome: Some(SubagentOutcome::Suspended { interrupt_ids }),
                ..SubagentFinished::default()
            }));
        }
    }
}

/// The client-facing message of a subagent failure. The harness's error text can carry an
/// upstream response, so only its HTTP status is kept (as for a run's model failure).
fn public_error(error: &str) -> String {
    let status = error
        .strip_prefix("Error ")
        .and_then(|rest| rest.split(|c: char| !c.is_ascii_digit()).next())
        .filter(|code| code.len() == 3);
    match status {
        Some(code) => format!("The subagent's model call failed (HTTP {code})."),
        None => "The subagent stopped with an error.".to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::public_error;

    #[test]
    fn failures_keep_only_the_status() {
        assert_eq!(
            public_error("Error 400, Message: secret upstream text"),
            "The subagent's model call failed (HTTP 400)."
        );
        assert_eq!(
            public_error("something else"),
            "The subagent stopped with an error."
        );
    }
}
