//! One live thread: a task that owns everything about it.
//!
//! Each live AG-UI thread is owned by one task ([`task`]): its conversation (hibernated, open,
//! or gone with its harness), the turn in flight, the requests parked on the client, the run
//! streams subscribed to it, its message log and what it has forwarded. Everything else talks
//! to it by message:
//! - runs, connects, stops, hibernation requests and shutdown arrive as commands
//!   ([`command`]) from the agent, through the registry ([`registry`]);
//! - the harness's callbacks (tools, hooks, questions) and server tools send requests
//!   through a link ([`link`]), and wait for their answer on a oneshot channel — never on a
//!   lock;
//! - the harness's events are read by the task itself, even while no run is attached, so a
//!   turn goes on whether or not anyone watches.
//!
//! A run is a subscription to the thread's events, not the owner of the turn: a client that
//! leaves or falls behind only loses its stream.

pub(crate) mod background_tasks;
pub(crate) mod callbacks;
pub(crate) mod command;
pub(crate) mod context;
pub(crate) mod conversation;
mod echo_alignment;
mod history;
pub(crate) mod link;
pub(crate) mod output;
pub(crate) mod parking;
pub(crate) mod registry;
mod shared;
pub(crate) mod status;
pub(crate) mod task;

pub use callbacks::{APP_CONTEXT_TOOL, APP_STATE_TOOL};
