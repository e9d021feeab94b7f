//! AG-UI sessions backed by Antigravity conversations.
//!
//! An [`Agent`] serves AG-UI runs (`RunAgentInput` in, a stream of events out) for one agent
//! configuration ([`AgentOptions`]), keeping one Antigravity conversation per AG-UI thread.
//! The substance is bridging two shapes: an Antigravity turn can span several AG-UI runs,
//! because it parks on a human (a frontend tool, a question, an approval) — the run ends, the
//! harness waits with no timeout, and a later run answers and continues the same turn.
//!
//! What a run does, in order: adopt the client's state and context; apply answers
//! (`resume[]` and `forwardedProps.command` answer interrupts, tool messages answer frontend
//! tools — each channel only its own kind); pick the newest user message not yet forwarded
//! (by message id: each reaches the harness exactly once); abandon what is parked if the user
//! moved on; then stream the turn (translated by `agui-translate`, merged with the events of
//! server and frontend tools) until it ends or parks, and end with exactly one terminal event.
//!
//! Sessions survive what they can: a parked session stays live (hot resume); an idle one is
//! hibernated (its conversation closed) and resumed transparently; a swept or restarted
//! thread continues its conversation from the save directory with its forwarded message ids
//! (persisted there too), so nothing is forgotten and nothing is sent twice; a model error
//! that closes the socket is re-attached; a dead harness is replaced on the next run.
//!
//! The public API speaks this crate's own types and harness-client's, never the generated
//! protocol types of `harness-proto`, so regenerating those breaks nothing above this crate
//! (`cargo xtask check-architecture` checks it).
//!
//! Features: `testing` adds `testing::FakeHarness`, a scripted backend for fast tests;
//! `clap` derives `clap::ValueEnum` for the option enums, for command lines.

mod activity;
mod agent;
mod answers;
mod backend;
mod choices;
mod claim;
mod contract;
pub mod defaults;
mod divergence;
mod error;
mod hash;
mod identity_migration;
mod interrupts;
mod lease;
mod migrate;
mod options;
mod owner;
mod places;
mod prompt;
mod rewind;
mod spare_conversations;
mod store;
#[cfg(any(test, feature = "testing"))]
pub mod testing;
mod thread;
pub mod threads;
mod tools;
mod trees;
mod turn;
mod workspace;

pub use agent::{Agent, AgentStats, RunStream, ThreadError};
/// The `activityType`s of file changes and commands (see [`AgentOptions::activities`]).
pub use agui_translate::{COMMAND_ACTIVITY, FILE_CHANGE_ACTIVITY};
pub use backend::Backend;
pub use choices::{
    Behavior, ConcurrentRuns, InterruptReasons, OnDisconnect, StructuredOutputMode, SubagentEvents,
};
pub use claim::claim_file;
pub use contract::{conversation_config, warm_up};
pub use error::{RunErrorCode, RunFailure, SessionError};
pub use identity_migration::{IdentityMigration, migrate_identities};
pub use interrupts::{InterruptAnswer, REASON_APPROVAL, REASON_QUESTION};
pub use lease::{LeaseDenied, ThreadLeases};
pub use options::{AgentOptions, HarnessSettings};
pub use owner::Owner;
pub use places::Isolation;
pub use store::owners::Admission;
pub use thread::{APP_CONTEXT_TOOL, APP_STATE_TOOL};
pub use tools::{FnTool, InterruptRequest, ServerTool, ToolContext, ToolError, ToolRegistry};
pub use workspace::ThreadWorkspace;
