//! A Rust host for the Antigravity `localharness` binary.
//!
//! Everything the Python SDK's local connection does, for Rust programs: find the binary
//! ([`find_binary`]), start it in its own process group and hand-shake over stdio
//! ([`HarnessProcess`]), open conversations over WebSocket ([`Conversation`]) configured with a
//! typed builder ([`ConversationConfig`]), stream their typed steps and detect turn ends
//! ([`ConversationEvent`]), answer the harness's callbacks ([`Callbacks`]) with no timeout,
//! survive faults (a model error that closes the socket can be re-attached; a dead process
//! fails its conversations at once with its stderr tail), shut down with escalation, share
//! processes between conversations ([`HarnessPool`]), and confine a process to what it is
//! granted ([`sandbox`], the `harness-sandbox` crate; its launcher behind the default `sandbox`
//! feature).
//!
//! ```no_run
//! # async fn demo() -> harness_client::Result<()> {
//! use std::sync::Arc;
//! use harness_client::*;
//!
//! let process = HarnessProcess::spawn(&ProcessOptions::new("/tmp/agent/save")).await?;
//! let config = ConversationConfig::new("gemini-3-flash-preview", ModelEndpoint::gemini("http://127.0.0.1:4011", "key"))
//!     .workspace("/tmp/agent/ws")
//!     .app_data_dir("/tmp/agent/app")
//!     .policy(policy::allow_all())
//!     .build()?;
//! let mut conversation = Conversation::open(&process, config, Arc::new(DefaultCallbacks)).await?;
//! conversation.send_text("Say hello").await?;
//! while let Some(event) = conversation.next_event().await {
//!     match event {
//!         ConversationEvent::Step(step) => print!("{}", step.text_delta),
//!         ConversationEvent::TurnEnded(_) | ConversationEvent::Closed(_) => break,
//!         _ => {}
//!     }
//! }
//! process.shutdown().await;
//! # Ok(()) }
//! ```

mod blocking;
mod callbacks;
mod config;
mod conversation;
mod discovery;
mod disk_watch;
mod error;
mod events;
mod exit;
pub mod input;
mod known_lines;
mod link;
mod pool;
mod process;
mod redirect;
pub mod trajectory;
mod turn_end;
pub mod values;
mod warm_up;

pub use callbacks::{
    Answer, CallContext, Callbacks, DefaultCallbacks, HookRequest, HookResponse, Media,
    PolicyOutcome, PolicyRequest, Question, QuestionAnswer, QuestionRequest, ToolCallRequest,
    ToolOutcome,
};
pub use config::{
    BuiltinTool, ConversationConfig, CustomTool, DEFAULT_IMAGE_MODEL, ModelEndpoint,
    SystemInstructions, default_builtin_tools, policy,
};
pub use conversation::{Canceller, Conversation};
pub use discovery::{HARNESS_PATH_ENV, find_binary, find_or_install_binary};
pub use error::{HarnessError, InitRefusal, Result};
pub use events::{
    CloseReason, ConversationEvent, TrajectoryState, TrajectoryStatus, TurnEnd, Usage,
};
pub use exit::ExitInfo;
pub use harness_proto::step::{
    Step, StepAction, StepError, StepKey, StepSource, StepStatus, StepTarget, ToolAction, ToolKind,
    UserRequest,
};
pub use known_lines::known_harmless_lines;
pub use link::{ConnectOptions, FrameDirection, FrameTap, InitInfo};
pub use pool::{HarnessPool, PoolOptions, PoolStats, Reservation};
pub use process::{DEFAULT_PASSTHROUGH_ENV, HarnessProcess, ProcessOptions};
pub use warm_up::WarmUp;

/// Confinement of harness processes (the `harness-sandbox` crate).
pub use harness_sandbox as sandbox;

/// The harness protocol types, for settings the builder does not cover.
pub use harness_proto as proto;
