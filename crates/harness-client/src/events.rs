//! What a conversation reports to its reader, and how the end of a turn is detected.

use harness_proto::lh::{
    TrajectoryStateUpdate, UsageMetadata, UsageUpdate, trajectory_state_update,
};
use harness_proto::step::Step;

use crate::exit::ExitInfo;

/// Something that happened on a conversation, in harness order.
#[derive(Debug, Clone, PartialEq)]
pub enum ConversationEvent {
    /// A snapshot of a step (root or subagent). The same step arrives many times as it grows.
    Step(Step),
    /// A trajectory changed state (the root's RUNNING, a subagent starting or going idle, …).
    Trajectory(TrajectoryState),
    /// Cumulative token usage after a model response.
    Usage(Usage),
    /// The turn is over: the root trajectory went idle or was cancelled. Sent after the
    /// corresponding [`ConversationEvent::Trajectory`] — at once, except when a subagent that
    /// finished during the turn is about to wake the root again (its idle message has not reached
    /// the root yet, or reached it while the root was still running): then only if the root does
    /// not run again within a bound, and otherwise at the idle that follows.
    TurnEnded(TurnEnd),
    /// The connection is gone; this is the last event of the connection.
    Closed(CloseReason),
}

pub use harness_proto::trajectory::TrajectoryStatus;

/// A trajectory state change.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TrajectoryState {
    /// The trajectory.
    pub trajectory_id: String,
    /// Its parent, for subagents.
    pub parent_trajectory_id: Option<String>,
    /// Nesting depth (0 for the root).
    pub depth: i32,
    /// The new state.
    pub status: TrajectoryStatus,
    /// Why it stopped, when it failed.
    pub error: Option<String>,
    /// A machine-readable error code, when given.
    pub error_code: Option<String>,
    /// A budget or quota stop reason, when given (proto enum name).
    pub stop_reason: Option<String>,
}

impl From<&TrajectoryStateUpdate> for TrajectoryState {
    fn from(u: &TrajectoryStateUpdate) -> Self {
        use trajectory_state_update::StopReason;
        let status = TrajectoryStatus::from(u.state());
        let non_empty = |s: &Option<String>| s.clone().filter(|s| !s.is_empty());
        Self {
            trajectory_id: u.trajectory_id().to_owned(),
            parent_trajectory_id: non_empty(&u.parent_trajectory_id),
            depth: u.depth(),
            status,
            error: non_empty(&u.error),
            error_code: non_empty(&u.error_code),
            stop_reason: match u.stop_reason() {
                StopReason::Unspecified => None,
                other => Some(other.as_str_name().to_owned()),
            },
        }
    }
}

/// How a turn ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TurnEnd {
    /// The root trajectory was cancelled (a PreTurn hook denial) rather than going idle.
    /// A host `cancel()` ends with idle, not cancelled: see [`TurnEnd::halted`].
    pub cancelled: bool,
    /// Whether this host asked for the cancel (`haltRequest`) during the turn.
    pub halted: bool,
    /// The failure, e.g. `model unreachable: …` or `Error 400, Message: …`. A turn with an error
    /// is usually followed by the harness closing the socket (see [`crate::Conversation::reconnect`]).
    pub error: Option<String>,
    /// A machine-readable error code, when given.
    pub error_code: Option<String>,
    /// A budget or quota stop reason, when given.
    pub stop_reason: Option<String>,
    /// The root's reply is over but tasks it started in the background still run (a command
    /// left running): the harness starts a turn of its own when they end (the model answers
    /// their end), with no input from the host. Keep the conversation connected meanwhile.
    pub background_tasks: bool,
}

/// Token usage, cumulative for the conversation.
#[derive(Debug, Clone, PartialEq)]
pub struct Usage {
    /// All trajectories together.
    pub total: UsageMetadata,
    /// Per trajectory (root and subagents).
    pub by_trajectory: Vec<(String, UsageMetadata)>,
}

impl From<&UsageUpdate> for Usage {
    fn from(u: &UsageUpdate) -> Self {
        Self {
            total: u.total.clone().unwrap_or_default(),
            by_trajectory: u
                .agents
                .iter()
                .map(|a| {
                    (
                        a.trajectory_id().to_owned(),
                        a.usage.clone().unwrap_or_default(),
                    )
                })
                .collect(),
        }
    }
}

/// Why a connection ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CloseReason {
    /// The harness process exited (crashed, killed, or shut down by someone else).
    ProcessExited(ExitInfo),
    /// The harness closed the socket. It does so after a terminal model error (400, 500,
    /// exhausted retries); the conversation survives and can be re-attached.
    ClosedByHarness {
        /// WebSocket close code, if a close frame was sent.
        code: Option<u16>,
        /// The error of the turn that preceded the close, if any.
        turn_error: Option<String>,
    },
    /// The connection broke (I/O error) while the process still runs.
    ConnectionLost(String),
    /// This host closed it (`close()`, or the process is shutting down).
    ClosedByHost,
}

impl std::fmt::Display for CloseReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::ProcessExited(info) => write!(f, "{info}"),
            Self::ClosedByHarness {
                turn_error: Some(e),
                ..
            } => {
                write!(
                    f,
                    "the harness closed the conversation's connection after the turn failed: {e}"
                )
            }
            Self::ClosedByHarness { code, .. } => {
                write!(
                    f,
                    "the harness closed the conversation's connection (close code {code:?})"
                )
            }
            Self::ConnectionLost(e) => write!(f, "the connection to the harness broke: {e}"),
            Self::ClosedByHost => f.write_str("the conversation was closed by this host"),
        }
    }
}
