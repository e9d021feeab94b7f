//! The raw floor: the same turns driven straight through `harness-client` (a [`HarnessPool`]
//! and its [`Conversation`]s), with no HTTP, no AG-UI and no session layer, this process being
//! the host.
//!
//! The harness config is the one the server would send: the server's own flags (those of
//! [`crate::launch::server_args`]) are parsed by `agui-server` into agent options, and
//! [`agui_session::conversation_config`] builds the conversation config from them (same tools,
//! policy, behaviour, model endpoint). Prompts are plain text, sent as a run sends a text
//! message; the pool has the server's options (8 conversations per process, a spare
//! started ahead). Per turn: time to the first model text, to the end of the turn (the root
//! trajectory idle), and for W4 to the frontend tool call and from its answer to the end.

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use agui_session::{AgentOptions, ToolRegistry};
use agui_types::Tool;
use anyhow::Context as _;
use async_trait::async_trait;
use harness_client::{
    CallContext, Callbacks, Conversation, ConversationEvent, DefaultCallbacks, HarnessPool,
    PoolOptions, ProcessOptions, StepSource, ToolCallRequest, ToolOutcome,
};
use tokio::sync::{mpsc, oneshot};

use crate::launch::{Binaries, Dirs, ServerSettings, server_args};

/// The harness set-up the server would use.
pub(crate) struct Floor {
    options: AgentOptions,
    pool_options: PoolOptions,
    process: ProcessOptions,
    /// Answers the warm-up turns of the processes a pool starts ahead of need, as the server's
    /// model proxy does (so they are not counted as the workload's model requests).
    warm_up_model: tokio::sync::OnceCell<gemini_script::Handle>,
}

impl Floor {
    /// The floor for a server started with `settings` against `model_url`, with its
    /// directories under `root` (wiped).
    pub(crate) fn new(
        bins: &Binaries,
        model_url: &str,
        root: &Path,
        settings: &ServerSettings,
    ) -> anyhow::Result<Self> {
        let dirs = Dirs::fresh(root)?;
        let args = server_args("127.0.0.1:0", model_url, &dirs, settings);
        let config = agui_server::ServerConfig::from_args(
            std::iter::once("agui-antigravity".to_owned()).chain(args),
        )
        .context("parsing the server flags for the floor")?;
        let agent = config.agents.first().context("no agent configured")?;
        let options = agui_server::internals::options(agent, "/", &dirs.root, None)
            .context("building the agent options for the floor")?;
        // As the server makes the pool of an agent (its `build.rs`).
        let defaults = PoolOptions::default();
        let pool_options = PoolOptions {
            max_conversations_per_process: agent
                .pool_size
                .unwrap_or(defaults.max_conversations_per_process),
            idle_grace: agent
                .harness_idle_grace_secs
                .map_or(defaults.idle_grace, Duration::from_secs),
            prestart_spare: agent
                .prestart_harness
                .unwrap_or(agui_server::internals::PRESTART_HARNESS),
            ..defaults
        };
        let mut process = ProcessOptions::new(options.save_dir.clone());
        process.binary = Some(bins.harness.clone());
        // The server runs with a cleared environment (`PATH`, `HOME`, `RUST_LOG` and the
        // harness path, see `launch`), so its harness inherits only `PATH`: so does this one.
        process.passthrough_env.retain(|name| name == "PATH");
        Ok(Self {
            options,
            pool_options,
            process,
            warm_up_model: tokio::sync::OnceCell::new(),
        })
    }

    /// A fresh pool with the server's options (start one per workload or level), warming up
    /// as the server does when it starts.
    pub(crate) async fn pool(&self) -> anyhow::Result<HarnessPool> {
        let pool = HarnessPool::new(self.pool_options.clone())?;
        let model = self
            .warm_up_model
            .get_or_try_init(|| gemini_script::ScriptedModel::start(gemini_script::Script::new()))
            .await?;
        let endpoint = harness_client::ModelEndpoint::gemini(model.base_url(), "warm-up");
        let warm_up = agui_session::warm_up(&self.options, &ToolRegistry::new(), endpoint);
        pool.prestart(&self.process, Some(warm_up)).await?;
        Ok(pool)
    }

    /// Opens a conversation as a new thread's first run would, declaring `client_tools`.
    pub(crate) async fn open(
        &self,
        pool: &HarnessPool,
        client_tools: &[Tool],
        callbacks: Arc<dyn Callbacks>,
    ) -> anyhow::Result<Conversation> {
        let id = uuid::Uuid::new_v4().simple().to_string();
        let workspace = self.options.workspace_root.join(&id[..10]);
        std::fs::create_dir_all(&workspace)?;
        let config = agui_session::conversation_config(
            &self.options,
            &ToolRegistry::new(),
            client_tools,
            &workspace,
            &workspace.join(".app"),
            &id,
        )
        .build()?;
        Ok(pool.open(&self.process, config, callbacks).await?)
    }

    /// Opens a conversation with no client tools whose callbacks answer nothing.
    pub(crate) async fn open_plain(&self, pool: &HarnessPool) -> anyhow::Result<Conversation> {
        self.open(pool, &[], Arc::new(DefaultCallbacks)).await
    }
}

/// The W4 tool as `RunAgentInput.tools` declares it.
pub(crate) fn bench_tool() -> Tool {
    serde_json::from_value(crate::agui::tool_def()).expect("the bench tool is a valid Tool")
}

/// One floor turn; times are from `t0`.
#[derive(Debug, Clone, Default)]
pub(crate) struct FloorTurn {
    pub(crate) first_text: Option<Duration>,
    pub(crate) end: Option<Duration>,
    pub(crate) text: String,
    pub(crate) deltas: usize,
    /// When the harness asked the host for a frontend tool call.
    pub(crate) tool_call: Option<Duration>,
    /// When the call was answered.
    pub(crate) answered: Option<Duration>,
    pub(crate) error: Option<String>,
}

impl FloorTurn {
    pub(crate) fn ok(&self) -> bool {
        self.error.is_none() && self.end.is_some()
    }
}

/// A frontend tool call waiting for the driver's answer.
pub(crate) type PendingCall = (Instant, ToolCallRequest, oneshot::Sender<ToolOutcome>);

/// Callbacks that hand every host tool call to the driver and wait for its answer.
pub(crate) struct ParkingCallbacks {
    pub(crate) calls: mpsc::UnboundedSender<PendingCall>,
}

#[async_trait]
impl Callbacks for ParkingCallbacks {
    async fn tool_call(&self, _ctx: &CallContext, call: ToolCallRequest) -> ToolOutcome {
        let (tx, rx) = oneshot::channel();
        if self.calls.send((Instant::now(), call, tx)).is_err() {
            return ToolOutcome::error("the benchmark is gone");
        }
        rx.await
            .unwrap_or_else(|_| ToolOutcome::error("the benchmark dropped the call"))
    }
}

/// The prompt as a run sends a text user message: trimmed, one sanitised text part.
fn prompt(text: &str) -> harness_client::proto::lh::UserInput {
    harness_client::input::text(text.trim())
}

/// Where a turn's frontend tool calls arrive, and how long the driver waits before answering
/// (a client's think time; the events that arrive meanwhile wait in their queue).
pub(crate) struct Answering<'a> {
    pub(crate) calls: &'a mut mpsc::UnboundedReceiver<PendingCall>,
    pub(crate) delay: Duration,
}

/// Sends `text` and reads the turn to its end. A frontend tool call is answered with `"yes"`
/// (what W4's client answers) after `answering.delay`.
pub(crate) async fn turn(
    conversation: &mut Conversation,
    text: &str,
    t0: Instant,
    mut answering: Option<Answering<'_>>,
    timeout: Duration,
) -> FloorTurn {
    let mut out = FloorTurn::default();
    if let Err(e) = conversation.send(prompt(text)).await {
        out.error = Some(format!("send: {e}"));
        return out;
    }
    let read = async {
        loop {
            let call = async {
                match answering.as_mut() {
                    Some(a) => a.calls.recv().await,
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                event = conversation.next_event() => match event {
                    Some(ConversationEvent::Step(step)) => {
                        // Model text, not a tool step's label.
                        if step.source == StepSource::Model
                            && step.action.is_none()
                            && !step.text_delta.is_empty()
                        {
                            out.first_text.get_or_insert(t0.elapsed());
                            out.deltas += 1;
                            out.text.push_str(&step.text_delta);
                        }
                    }
                    Some(ConversationEvent::TurnEnded(end)) => {
                        out.end = Some(t0.elapsed());
                        if let Some(e) = end.error {
                            out.error = Some(e);
                        }
                        return;
                    }
                    Some(ConversationEvent::Closed(reason)) => {
                        out.error = Some(format!("closed: {reason:?}"));
                        return;
                    }
                    None => {
                        out.error = Some("connection gone".into());
                        return;
                    }
                    Some(_) => {}
                },
                Some((at, _call, answer)) = call => {
                    out.tool_call.get_or_insert(at.duration_since(t0));
                    if let Some(delay) = answering.as_ref().map(|a| a.delay).filter(|d| !d.is_zero()) {
                        tokio::time::sleep(delay).await;
                    }
                    out.answered.get_or_insert(t0.elapsed());
                    let _ = answer.send(ToolOutcome::json(serde_json::json!("yes")));
                }
            }
        }
    };
    if tokio::time::timeout(timeout, read).await.is_err() {
        out.error = Some(format!("timeout after {} s", timeout.as_secs_f64()));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The floor's ratio column compares like with like: its pool has the servers' size.
    #[test]
    fn the_floor_pools_conversations_as_the_servers_do() {
        let root = tempfile::tempdir().unwrap();
        let bins = Binaries {
            server: "/unused/agui-antigravity".into(),
            model: "/unused/gemini-script".into(),
            harness: "/unused/localharness".into(),
        };
        for pool_size in [8, 1] {
            let settings = ServerSettings::floor(pool_size);
            let floor = Floor::new(&bins, "http://m", &root.path().join("f"), &settings).unwrap();
            assert_eq!(
                floor.pool_options.max_conversations_per_process as u64,
                pool_size
            );
        }
    }
}
