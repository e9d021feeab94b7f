//! A typed view of a trajectory's state, shared by the I/O layer and the translator.

use crate::lh::trajectory_state_update::State;

/// State of a trajectory (the root agent or a subagent).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TrajectoryStatus {
    /// Working.
    Running,
    /// Done with its work (`FULLY_IDLE`).
    Idle,
    /// Cancelled (e.g. a PreTurn hook denied the turn).
    Cancelled,
    /// Waiting for background tasks (still working).
    WaitingForTasks,
    /// Waiting for its subagents (still working, not the end of the turn).
    WaitingForSubagents,
    /// A state this version does not know.
    Unknown,
}

impl From<State> for TrajectoryStatus {
    fn from(state: State) -> Self {
        match state {
            State::Running => Self::Running,
            State::FullyIdle => Self::Idle,
            State::Cancelled => Self::Cancelled,
            State::WaitingForTasks => Self::WaitingForTasks,
            State::WaitingForSubagents => Self::WaitingForSubagents,
            State::Unspecified => Self::Unknown,
        }
    }
}
