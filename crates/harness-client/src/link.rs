//! One WebSocket to the harness: connecting, initializing, and the reader and writer tasks that
//! turn frames into [`ConversationEvent`]s and dispatch callbacks.

use std::collections::HashSet;
use std::panic::AssertUnwindSafe;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures_util::{FutureExt as _, SinkExt as _, StreamExt as _};
use harness_proto::lh::{
    self, CallHookResponse, HarnessConfig, InitializeConversationEvent,
    InitializeConversationResponse, InputEvent, OutputEvent, PolicyDecisionResponse,
    ToolConfirmation, ToolResponse, UserQuestionsResponse, call_hook_request, call_hook_response,
    input_event, output_event, pre_tool_result, pre_turn_result, stop_result, user_question_answer,
    user_questions_response,
};
use harness_proto::step::{Step, StepKey, StepStatus, UserRequest};
use tokio::net::TcpStream;
use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinSet;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::client::IntoClientRequest as _;
use tokio_tungstenite::tungstenite::protocol::WebSocketConfig;
use tokio_tungstenite::{MaybeTlsStream, WebSocketStream};
use tracing::Instrument as _;

use crate::callbacks::{
    Answer, CallContext, Callbacks, HookRequest, HookResponse, PolicyOutcome, PolicyRequest,
    Question, QuestionAnswer, QuestionRequest, ToolCallRequest, ToolOutcome,
};
use crate::error::{HarnessError, Result};
use crate::events::{CloseReason, ConversationEvent, TrajectoryState, TurnTracker, Usage};
use crate::process::HarnessProcess;

type Socket = WebSocketStream<MaybeTlsStream<TcpStream>>;

/// Which way a frame went.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FrameDirection {
    /// Host → harness (`InitializeConversationEvent`, `InputEvent`).
    ToHarness,
    /// Harness → host (`OutputEvent`).
    FromHarness,
}

/// Sees every WebSocket text frame of a conversation, e.g. to record fixtures or debug.
pub type FrameTap = Arc<dyn Fn(FrameDirection, &str) + Send + Sync>;

/// Connection tuning. Defaults follow the Python SDK, with larger message limits.
#[derive(Clone)]
pub struct ConnectOptions {
    /// Connection attempts (with 0.1 s · 2ⁿ backoff) before giving up.
    pub connect_attempts: u32,
    /// How long the harness may take to answer the init frame.
    pub init_timeout: Duration,
    /// Largest accepted message (a resume's history arrives in one frame).
    pub max_message_size: usize,
    /// How long to keep retrying an init the harness drops because the conversation id is still
    /// attached to a socket that was just closed (it releases it asynchronously).
    pub reattach_window: Duration,
    /// Called with every frame sent or received.
    pub tap: Option<FrameTap>,
}

impl std::fmt::Debug for ConnectOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ConnectOptions")
            .field("connect_attempts", &self.connect_attempts)
            .field("init_timeout", &self.init_timeout)
            .field("max_message_size", &self.max_message_size)
            .field("reattach_window", &self.reattach_window)
            .field("tap", &self.tap.is_some())
            .finish()
    }
}

impl Default for ConnectOptions {
    fn default() -> Self {
        Self {
            connect_attempts: 5,
            init_timeout: Duration::from_secs(60),
            max_message_size: 512 << 20,
            reattach_window: Duration::from_secs(3),
            tap: None,
        }
    }
}

/// What the harness said when the conversation was initialized.
#[derive(Debug, Clone, PartialEq)]
pub struct InitInfo {
    /// The conversation (cascade) id; also the root trajectory id.
    pub conversation_id: String,
    /// On resume: the final snapshot of every earlier step (not replayed as step events).
    pub history: Vec<Step>,
    /// On resume: the usage so far.
    pub cumulative_usage: Option<lh::UsageMetadata>,
    /// Whether the harness's sandbox is available.
    pub sandbox_available: bool,
}

/// A frame for the writer task; the optional sender learns whether it reached the socket.
pub(crate) enum Outbound {
    Event(
        InputEvent,
        Option<oneshot::Sender<std::result::Result<(), String>>>,
    ),
    Close,
}

/// The live halves of one connection.
pub(crate) struct Link {
    pub(crate) outbound: mpsc::UnboundedSender<Outbound>,
    pub(crate) events: mpsc::UnboundedReceiver<ConversationEvent>,
    pub(crate) closed: Arc<Mutex<Option<CloseReason>>>,
    pub(crate) tracker: Arc<Mutex<TurnTracker>>,
    pub(crate) reader: tokio::task::JoinHandle<()>,
}

/// Opens a socket, initializes the conversation and starts the reader and writer.
pub(crate) async fn open(
    process: &HarnessProcess,
    config: &HarnessConfig,
    callbacks: Arc<dyn Callbacks>,
    options: &ConnectOptions,
) -> Result<(Link, InitInfo)> {
    let deadline = tokio::time::Instant::now() + options.reattach_window;
    loop {
        match try_open(process, config, callbacks.clone(), options).await {
            // The harness releases a closed socket's conversation id asynchronously; a re-attach
            // right after a close is refused with "already in use" for a few milliseconds.
            Err(HarnessError::InitFailed { reason })
                if reason.contains("already in use") && tokio::time::Instant::now() < deadline =>
            {
                tracing::debug!(%reason, "conversation id still attached; retrying the init");
                tokio::time::sleep(Duration::from_millis(25)).await;
            }
            other => return other,
        }
    }
}

async fn try_open(
    process: &HarnessProcess,
    config: &HarnessConfig,
    callbacks: Arc<dyn Callbacks>,
    options: &ConnectOptions,
) -> Result<(Link, InitInfo)> {
    if let Some(info) = process.exit_info() {
        return Err(HarnessError::Closed(CloseReason::ProcessExited(info)));
    }
    if !process.is_usable() {
        return Err(HarnessError::Closed(CloseReason::ClosedByHost));
    }
    // Subscribe before connecting: an init failure is only explained on stderr.
    let mut stderr = process.inner.stderr.subscribe();
    let mut socket = connect(process, options).await?;
    let init = InitializeConversationEvent {
        config: Some(config.clone()),
    };
    let text = harness_proto::to_json(&init);
    tracing::trace!(frame = %text, "to harness");
    if let Some(tap) = &options.tap {
        tap(FrameDirection::ToHarness, &text);
    }
    socket
        .send(Message::text(text))
        .await
        .map_err(|e| HarnessError::InitFailed {
            reason: format!("sending the config failed: {e}"),
        })?;
    let mut response = match tokio::time::timeout(
        options.init_timeout,
        first_event(&mut socket, options.tap.as_ref()),
    )
    .await
    {
        Err(_) => {
            return Err(HarnessError::InitFailed {
                reason: format!("no answer to the config within {:?}", options.init_timeout),
            });
        }
        Ok(Ok(response)) => response,
        Ok(Err(dropped)) => {
            if let Some(info) = process.exit_info() {
                return Err(HarnessError::Closed(CloseReason::ProcessExited(info)));
            }
            return Err(HarnessError::InitFailed {
                reason: explain_init_failure(&mut stderr, &dropped).await,
            });
        }
    };
    let conversation_id = response.cascade_id().to_owned();
    let init = InitInfo {
        history: std::mem::take(&mut response.history)
            .into_iter()
            .map(Step::from)
            .collect(),
        cumulative_usage: response.cumulative_usage.clone(),
        sandbox_available: response
            .sandbox_status
            .as_ref()
            .is_some_and(|s| s.available()),
        conversation_id: conversation_id.clone(),
    };
    Ok((
        start(
            process,
            socket,
            conversation_id,
            callbacks,
            options.tap.clone(),
        ),
        init,
    ))
}

async fn connect(process: &HarnessProcess, options: &ConnectOptions) -> Result<Socket> {
    let url = format!("ws://127.0.0.1:{}/", process.port());
    let ws_config = WebSocketConfig::default()
        .max_message_size(Some(options.max_message_size))
        .max_frame_size(Some(options.max_message_size));
    // The key comes from the harness's stdout: a malformed one is an error, not a panic.
    let key = process
        .inner
        .api_key
        .parse::<tokio_tungstenite::tungstenite::http::HeaderValue>()
        .map_err(|e| HarnessError::Connect {
            port: process.port(),
            attempts: 0,
            last_error: format!("the harness's key is not a valid header value: {e}"),
        })?;
    let mut last_error = String::new();
    for attempt in 0..options.connect_attempts.max(1) {
        if attempt > 0 {
            tokio::time::sleep(Duration::from_millis(100 << (attempt - 1).min(6))).await;
        }
        let mut request = url
            .as_str()
            .into_client_request()
            .expect("a ws:// URL on loopback is valid");
        request.headers_mut().insert("x-goog-api-key", key.clone());
        match tokio_tungstenite::connect_async_with_config(request, Some(ws_config), true).await {
            Ok((socket, _)) => return Ok(socket),
            Err(e) => last_error = e.to_string(),
        }
        if let Some(info) = process.exit_info() {
            return Err(HarnessError::Closed(CloseReason::ProcessExited(info)));
        }
    }
    Err(HarnessError::Connect {
        port: process.port(),
        attempts: options.connect_attempts.max(1),
        last_error,
    })
}

/// Waits for the init response; `Err` describes how the connection ended instead.
async fn first_event(
    socket: &mut Socket,
    tap: Option<&FrameTap>,
) -> std::result::Result<InitializeConversationResponse, String> {
    while let Some(frame) = socket.next().await {
        let text = match frame {
            Ok(Message::Text(text)) => text.to_string(),
            Ok(Message::Binary(bytes)) => String::from_utf8_lossy(&bytes).into_owned(),
            Ok(Message::Close(close)) => {
                return Err(format!("the harness closed the connection ({close:?})"));
            }
            Ok(_) => continue,
            Err(e) => return Err(format!("the connection dropped ({e})")),
        };
        if let Some(tap) = tap {
            tap(FrameDirection::FromHarness, &text);
        }
        match harness_proto::from_json::<OutputEvent>(&text) {
            Ok(OutputEvent {
                event: Some(output_event::Event::InitializeConversationResponse(r)),
                ..
            }) => {
                return Ok(r);
            }
            Ok(other) => tracing::warn!(?other, "unexpected frame before the init response"),
            Err(e) => tracing::warn!(error = %e, "undecodable frame before the init response"),
        }
    }
    Err("the connection dropped".into())
}

/// The stderr lines that explain a dropped init (the harness prints e.g.
/// `Failed to create agent: conversation "…" not found in "…" (cannot resume)`).
async fn explain_init_failure(
    stderr: &mut tokio::sync::broadcast::Receiver<String>,
    dropped: &str,
) -> String {
    let mut reasons = Vec::new();
    let deadline = tokio::time::Instant::now() + Duration::from_millis(300);
    loop {
        match tokio::time::timeout_at(deadline, stderr.recv()).await {
            Ok(Ok(line)) => {
                let lower = line.to_ascii_lowercase();
                if [
                    "fail",
                    "already",
                    "invalid",
                    "not found",
                    "cannot",
                    "error:",
                ]
                .iter()
                .any(|k| lower.contains(k))
                    && !line.starts_with("ERROR: logging before")
                {
                    reasons.push(line);
                    // One explanatory line is the norm; take what arrives with it.
                    if reasons.len() >= 3 {
                        break;
                    }
                }
            }
            Ok(Err(tokio::sync::broadcast::error::RecvError::Lagged(_))) => continue,
            Ok(Err(_)) | Err(_) => break,
        }
    }
    if reasons.is_empty() {
        format!("{dropped}, without an explanation on stderr")
    } else {
        reasons.join("; ")
    }
}

fn start(
    process: &HarnessProcess,
    socket: Socket,
    conversation_id: String,
    callbacks: Arc<dyn Callbacks>,
    tap: Option<FrameTap>,
) -> Link {
    let (sink, stream) = socket.split();
    let (outbound_tx, outbound_rx) = mpsc::unbounded_channel();
    let (events_tx, events_rx) = mpsc::unbounded_channel();
    let closed = Arc::new(Mutex::new(None));
    let tracker = Arc::new(Mutex::new(TurnTracker::new(conversation_id.clone())));
    let span = tracing::info_span!("conversation", conversation_id = %conversation_id, pid = process.pid());
    let writer =
        tokio::spawn(write_frames(sink, outbound_rx, tap.clone()).instrument(span.clone()));
    let reader = Reader {
        _live: LiveGuard::new(process),
        writer,
        process: process.clone(),
        ctx: CallContext {
            conversation_id: conversation_id.clone(),
            trajectory_id: conversation_id,
        },
        callbacks,
        outbound: outbound_tx.clone(),
        events: events_tx,
        closed: closed.clone(),
        tracker: tracker.clone(),
        questions_asked: HashSet::new(),
        tasks: JoinSet::new(),
        tap,
    };
    let reader = tokio::spawn(reader.run(stream).instrument(span));
    Link {
        outbound: outbound_tx,
        events: events_rx,
        closed,
        tracker,
        reader,
    }
}

async fn write_frames(
    mut sink: futures_util::stream::SplitSink<Socket, Message>,
    mut outbound: mpsc::UnboundedReceiver<Outbound>,
    tap: Option<FrameTap>,
) {
    while let Some(item) = outbound.recv().await {
        match item {
            Outbound::Event(event, ack) => {
                let text = harness_proto::to_json(&event);
                tracing::trace!(frame = %text, "to harness");
                if let Some(tap) = &tap {
                    tap(FrameDirection::ToHarness, &text);
                }
                let result = sink
                    .send(Message::text(text))
                    .await
                    .map_err(|e| e.to_string());
                let failed = result.is_err();
                if let Some(ack) = ack {
                    let _ = ack.send(result);
                }
                if failed {
                    break;
                }
            }
            Outbound::Close => {
                let _ = sink.close().await;
                break;
            }
        }
    }
}

struct Reader {
    /// Counts this socket as open on the process until the reader ends (shutdown waits for it).
    _live: LiveGuard,
    /// The writer task, awaited after a host close so the close frame is out before the socket
    /// stops counting as open.
    writer: tokio::task::JoinHandle<()>,
    process: HarnessProcess,
    ctx: CallContext,
    callbacks: Arc<dyn Callbacks>,
    outbound: mpsc::UnboundedSender<Outbound>,
    events: mpsc::UnboundedSender<ConversationEvent>,
    closed: Arc<Mutex<Option<CloseReason>>>,
    tracker: Arc<Mutex<TurnTracker>>,
    /// Waiting steps already handed to the question callback (the harness repeats snapshots).
    questions_asked: HashSet<StepKey>,
    /// In-flight callbacks (finished ones are reaped as new ones start); dropping the reader
    /// aborts them (their answers could not be sent).
    tasks: JoinSet<()>,
    tap: Option<FrameTap>,
}

impl Reader {
    async fn run(mut self, mut stream: futures_util::stream::SplitStream<Socket>) {
        let mut exit = self.process.inner.exit.clone();
        let mut closing = self.process.inner.closing.subscribe();
        let reason = loop {
            if *closing.borrow_and_update() {
                let _ = self.outbound.send(Outbound::Close);
                break CloseReason::ClosedByHost;
            }
            tokio::select! {
                frame = stream.next() => match frame {
                    Some(Ok(Message::Text(text))) => self.on_frame(&text),
                    Some(Ok(Message::Binary(bytes))) => self.on_frame(&String::from_utf8_lossy(&bytes)),
                    Some(Ok(Message::Close(close))) => {
                        break CloseReason::ClosedByHarness {
                            code: close.map(|c| u16::from(c.code)),
                            turn_error: self.tracker.lock().expect("tracker lock").last_error(),
                        };
                    }
                    Some(Ok(_)) => {}
                    Some(Err(e)) => break self.lost(e.to_string()).await,
                    None => break self.lost("the connection ended without a close frame".into()).await,
                },
                changed = exit.changed() => {
                    if let Some(info) = exit.borrow().clone() {
                        break CloseReason::ProcessExited(info);
                    }
                    if changed.is_err() {
                        break CloseReason::ConnectionLost("the process monitor stopped".into());
                    }
                }
                changed = closing.changed() => {
                    if changed.is_err() || *closing.borrow() {
                        let _ = self.outbound.send(Outbound::Close);
                        break CloseReason::ClosedByHost;
                    }
                }
            }
        };
        tracing::debug!(%reason, "conversation connection ended");
        *self.closed.lock().expect("closed lock") = Some(reason.clone());
        let _ = self.events.send(ConversationEvent::Closed(reason.clone()));
        self.tasks.abort_all();
        if reason == CloseReason::ClosedByHost {
            // The writer ends once it has sent the close frame queued above.
            let _ = tokio::time::timeout(Duration::from_secs(2), &mut self.writer).await;
        }
    }

    /// A broken socket: report the process's death if that is the cause (its exit status can
    /// lag the socket by a few milliseconds).
    async fn lost(&self, error: String) -> CloseReason {
        let mut exit = self.process.inner.exit.clone();
        let exited =
            tokio::time::timeout(Duration::from_millis(500), exit.wait_for(Option::is_some))
                .await
                .ok()
                .and_then(|r| r.ok().and_then(|info| info.clone()));
        match exited {
            Some(info) => CloseReason::ProcessExited(info),
            None => CloseReason::ConnectionLost(error),
        }
    }

    fn on_frame(&mut self, text: &str) {
        tracing::trace!(frame = %text, "from harness");
        if let Some(tap) = &self.tap {
            tap(FrameDirection::FromHarness, text);
        }
        let event = match harness_proto::from_json::<OutputEvent>(text) {
            Ok(event) => event,
            Err(e) => {
                tracing::warn!(error = %e, "ignoring an undecodable harness frame");
                return;
            }
        };
        use output_event::Event;
        match event.event {
            Some(Event::StepUpdate(update)) => {
                let step = Step::from(update);
                // The step reaches the event stream before its callback starts, so a host that
                // sees the callback park has every event that preceded it queued.
                let waiting = (step.status == StepStatus::WaitingForUser).then(|| step.clone());
                self.emit(ConversationEvent::Step(step));
                if let Some(step) = waiting {
                    self.on_waiting_step(&step);
                }
            }
            Some(Event::TrajectoryStateUpdate(update)) => {
                let state = TrajectoryState::from(&update);
                let end = self
                    .tracker
                    .lock()
                    .expect("tracker lock")
                    .on_trajectory(&state);
                self.emit(ConversationEvent::Trajectory(state));
                if let Some(end) = end {
                    self.emit(ConversationEvent::TurnEnded(end));
                }
            }
            Some(Event::UsageUpdate(update)) => {
                self.emit(ConversationEvent::Usage(Usage::from(&update)))
            }
            Some(Event::ToolCall(call)) => self.on_tool_call(call),
            Some(Event::CallHookRequest(request)) => self.on_hook(request),
            Some(Event::PolicyDecisionRequest(request)) => self.on_policy(request),
            Some(Event::SessionEndResponse(_)) => tracing::debug!("session end acknowledged"),
            Some(Event::InitializeConversationResponse(_)) => {
                tracing::warn!("ignoring a second init response")
            }
            None => tracing::warn!(frame = %text, "ignoring a harness frame with no known event"),
        }
    }

    fn emit(&self, event: ConversationEvent) {
        // The receiver may be gone (the conversation was dropped); callbacks still get answered.
        let _ = self.events.send(event);
    }

    /// Runs a callback in its own task and sends its answer; a panic becomes an error answer,
    /// so the harness is never left waiting.
    fn spawn_callback<F>(
        &mut self,
        what: String,
        future: F,
        answer: impl FnOnce(Option<F::Output>) -> InputEvent + Send + 'static,
    ) where
        F: std::future::Future + Send + 'static,
        F::Output: Send,
    {
        // Finished callbacks stay in the set until joined; reap them so a long conversation does
        // not accumulate one entry per callback.
        while self.tasks.try_join_next().is_some() {}
        let outbound = self.outbound.clone();
        self.tasks.spawn(
            async move {
                let output = AssertUnwindSafe(future).catch_unwind().await.ok();
                if output.is_none() {
                    tracing::error!(callback = %what, "callback panicked; answering the harness with an error");
                }
                let _ = outbound.send(Outbound::Event(answer(output), None));
            }
            .in_current_span(),
        );
    }

    fn ctx_for(&self, trajectory_id: &str) -> CallContext {
        let trajectory_id = if trajectory_id.is_empty() {
            &self.ctx.conversation_id
        } else {
            trajectory_id
        };
        CallContext {
            conversation_id: self.ctx.conversation_id.clone(),
            trajectory_id: trajectory_id.to_owned(),
        }
    }

    fn on_tool_call(&mut self, call: lh::ToolCall) {
        let ctx = self.ctx_for(call.trajectory_id());
        let id = call.id().to_owned();
        // `argumentsJson` is authoritative; the harness also sends the same arguments as a
        // `genai.Struct`, used when the JSON text is missing or not an object.
        let arguments = match serde_json::from_str(call.arguments_json()) {
            Ok(serde_json::Value::Object(map)) => map,
            _ => match &call.arguments {
                Some(arguments) => crate::values::from_struct(arguments),
                None => {
                    tracing::warn!(call_id = %id, arguments = %call.arguments_json(), "tool call arguments are not a JSON object; passing none");
                    serde_json::Map::new()
                }
            },
        };
        let request = ToolCallRequest {
            id: id.clone(),
            name: call.name().to_owned(),
            arguments,
        };
        tracing::debug!(call_id = %id, tool = %request.name, "tool call");
        let callbacks = self.callbacks.clone();
        let what = format!("tool {}", request.name);
        self.spawn_callback(
            what,
            async move { callbacks.tool_call(&ctx, request).await },
            move |outcome| {
                let response = match outcome
                    .unwrap_or_else(|| ToolOutcome::error("the tool handler panicked"))
                {
                    ToolOutcome::Ok { response, media } => ToolResponse {
                        id: Some(id),
                        response_json: Some(serde_json::Value::Object(response).to_string()),
                        supplemental_media: media
                            .into_iter()
                            .map(|m| lh::Media {
                                mime_type: Some(m.mime_type),
                                description: Some(m.description),
                                data: Some(m.data),
                            })
                            .collect(),
                        ..Default::default()
                    },
                    ToolOutcome::Err(message) => ToolResponse {
                        id: Some(id),
                        error_message: Some(message),
                        ..Default::default()
                    },
                };
                InputEvent {
                    event: Some(input_event::Event::ToolResponse(response)),
                }
            },
        );
    }

    fn on_hook(&mut self, request: lh::CallHookRequest) {
        use call_hook_request::Args;
        let request_id = request.request_id().to_owned();
        let hook_type = request.r#type();
        let trajectory = match &request.args {
            Some(Args::PreToolArgs(a)) => a.trajectory_id().to_owned(),
            Some(Args::PostToolArgs(a)) => a.trajectory_id().to_owned(),
            Some(Args::OnToolErrorArgs(a)) => a.trajectory_id().to_owned(),
            Some(Args::StopArgs(a)) => a.trajectory_id().to_owned(),
            Some(Args::PostTurnArgs(a)) => a.trajectory_id().to_owned(),
            Some(Args::PreTurnArgs(a)) => a.trajectory_id().to_owned(),
            Some(Args::OnCompactionArgs(a)) => a.trajectory_id().to_owned(),
            None => String::new(),
        };
        let typed = match request.args {
            Some(Args::PreTurnArgs(a)) => HookRequest::PreTurn(a),
            Some(Args::PreToolArgs(a)) => HookRequest::PreTool(a),
            Some(Args::PostToolArgs(a)) => HookRequest::PostTool(a),
            Some(Args::OnToolErrorArgs(a)) => HookRequest::OnToolError(a),
            Some(Args::StopArgs(a)) => HookRequest::Stop(a),
            Some(Args::PostTurnArgs(a)) => HookRequest::PostTurn(a),
            Some(Args::OnCompactionArgs(a)) => HookRequest::OnCompaction(a),
            None => match hook_type {
                lh::LifecycleHook::OnSessionStart => HookRequest::OnSessionStart,
                lh::LifecycleHook::OnSessionEnd => HookRequest::OnSessionEnd,
                other => HookRequest::Other(other),
            },
        };
        tracing::debug!(request_id = %request_id, hook = ?hook_type, "hook request");
        let is_pre_turn = matches!(typed, HookRequest::PreTurn(_));
        let ctx = self.ctx_for(&trajectory);
        let callbacks = self.callbacks.clone();
        self.spawn_callback(
            format!("hook {request_id}"),
            async move { callbacks.hook(&ctx, typed).await },
            move |r| {
                let response =
                    r.unwrap_or_else(|| HookResponse::Error("the hook handler panicked".into()));
                let result = match is_pre_turn.then(|| pre_turn_result(&response)).flatten() {
                    Some(result) => result,
                    None => hook_result(response),
                };
                InputEvent {
                    event: Some(input_event::Event::CallHookResponse(CallHookResponse {
                        request_id: Some(request_id),
                        result: Some(result),
                    })),
                }
            },
        );
    }

    fn on_policy(&mut self, request: lh::PolicyDecisionRequest) {
        let request_id = request.request_id().to_owned();
        let tool = request.tool_args.clone().unwrap_or_default();
        let ctx = self.ctx_for(tool.trajectory_id());
        let typed = PolicyRequest {
            rule_id: request.rule_id().to_owned(),
            tool,
            reason: request.reason().to_owned(),
        };
        let callbacks = self.callbacks.clone();
        self.spawn_callback(
            format!("policy {request_id}"),
            async move { callbacks.policy(&ctx, typed).await },
            move |o| {
                use lh::PolicyEvaluationOutcome as P;
                let (outcome, deny_reason) = match o {
                    Some(PolicyOutcome::Allow) => (P::Allow, None),
                    Some(PolicyOutcome::Deny(reason)) => (P::Deny, Some(reason)),
                    Some(PolicyOutcome::NoMatch) => (P::NoMatch, None),
                    None => (
                        P::Deny,
                        Some("the policy handler failed, so the call was blocked".to_owned()),
                    ),
                };
                InputEvent {
                    event: Some(input_event::Event::PolicyDecisionResponse(
                        PolicyDecisionResponse {
                            request_id: Some(request_id),
                            outcome: Some(outcome as i32),
                            deny_reason,
                        },
                    )),
                }
            },
        );
    }

    fn on_waiting_step(&mut self, step: &Step) {
        if !self.questions_asked.insert(step.key.clone()) {
            return;
        }
        let ctx = self.ctx_for(&step.key.trajectory_id);
        let (trajectory_id, step_index) = (step.key.trajectory_id.clone(), step.key.index);
        let callbacks = self.callbacks.clone();
        match &step.request {
            Some(UserRequest::Questions(q)) => {
                let questions = q
                    .questions
                    .iter()
                    .map(|q| {
                        let mc = match &q.question_type {
                            Some(lh::user_question::QuestionType::MultipleChoice(mc)) => mc.clone(),
                            None => Default::default(),
                        };
                        let (text, multi_select) = (mc.question().to_owned(), mc.is_multi_select());
                        Question {
                            text,
                            choices: mc.choices,
                            multi_select,
                        }
                    })
                    .collect::<Vec<_>>();
                let count = questions.len();
                let request = QuestionRequest {
                    trajectory_id: trajectory_id.clone(),
                    step_index,
                    questions,
                };
                self.spawn_callback(
                    format!("question {trajectory_id}:{step_index}"),
                    async move { callbacks.question(&ctx, request).await },
                    move |answer| question_response(trajectory_id, step_index, count, answer),
                );
            }
            Some(UserRequest::ToolConfirmation) => {
                let t = trajectory_id.clone();
                self.spawn_callback(
                    format!("confirmation {trajectory_id}:{step_index}"),
                    async move { callbacks.tool_confirmation(&ctx, &t, step_index).await },
                    move |accepted| InputEvent {
                        event: Some(input_event::Event::ToolConfirmation(ToolConfirmation {
                            trajectory_id: Some(trajectory_id),
                            step_index: Some(step_index),
                            accepted: Some(accepted.unwrap_or(false)),
                        })),
                    },
                );
            }
            None => tracing::warn!(step = %step.key, "a waiting step without a request"),
        }
    }
}

fn hook_result(response: HookResponse) -> call_hook_response::Result {
    use call_hook_response::Result as R;
    match response {
        HookResponse::Empty => R::EmptyResult(lh::EmptyResult {}),
        HookResponse::Allow { modified_args } => R::PreToolResult(lh::PreToolResult {
            decision: Some(pre_tool_result::Decision::Allow as i32),
            reason: None,
            modified_args: modified_args.map(|args| crate::values::to_struct(&args)),
        }),
        HookResponse::Deny(reason) => R::PreToolResult(lh::PreToolResult {
            decision: Some(pre_tool_result::Decision::Deny as i32),
            reason: Some(reason),
            modified_args: None,
        }),
        HookResponse::ToolError(message) => R::OnToolErrorResult(lh::OnToolErrorResult {
            custom_error_message: Some(message),
        }),
        HookResponse::AllowStop => R::StopResult(lh::StopResult {
            decision: Some(stop_result::Decision::AllowStop as i32),
            reason: None,
        }),
        HookResponse::Continue(reason) => R::StopResult(lh::StopResult {
            decision: Some(stop_result::Decision::Continue as i32),
            reason: Some(reason),
        }),
        HookResponse::Error(message) => R::ErrorMessage(message),
    }
}

/// PreTurn answers use their own message; the generic Allow/Deny map to the PreTool shape, so
/// a PreTurn hook's answer is rewritten here.
fn pre_turn_result(response: &HookResponse) -> Option<call_hook_response::Result> {
    use call_hook_response::Result as R;
    let (decision, reason) = match response {
        HookResponse::Allow { .. } => (pre_turn_result::Decision::Allow, None),
        HookResponse::Deny(reason) => (pre_turn_result::Decision::Deny, Some(reason.clone())),
        _ => return None,
    };
    Some(R::PreTurnResult(lh::PreTurnResult {
        decision: Some(decision as i32),
        reason,
    }))
}

fn question_response(
    trajectory_id: String,
    step_index: u32,
    count: usize,
    answer: Option<QuestionAnswer>,
) -> InputEvent {
    use user_questions_response::{QuestionsResponse, Result as R};
    let result = match answer {
        Some(QuestionAnswer::Answers(mut answers)) => {
            answers.resize(count.max(answers.len()), Answer::Unanswered);
            R::Response(QuestionsResponse {
                answers: answers
                    .into_iter()
                    .map(|a| lh::UserQuestionAnswer {
                        answer: Some(match a {
                            Answer::Unanswered => user_question_answer::Answer::Unanswered(true),
                            Answer::Choice { selected, freeform } => {
                                user_question_answer::Answer::MultipleChoiceAnswer(
                                    lh::MultipleChoiceAnswer {
                                        selected_choice_indices: selected
                                            .into_iter()
                                            .map(|i| i32::try_from(i).unwrap_or(i32::MAX))
                                            .collect(),
                                        freeform_response: freeform,
                                    },
                                )
                            }
                        }),
                    })
                    .collect(),
            })
        }
        Some(QuestionAnswer::Cancelled) | None => R::Cancelled(true),
    };
    InputEvent {
        event: Some(input_event::Event::QuestionResponse(
            UserQuestionsResponse {
                trajectory_id: Some(trajectory_id),
                step_index: Some(step_index),
                result: Some(result),
            },
        )),
    }
}

/// Counts an open socket on its process, so shutdown can wait for the sockets to close before
/// closing the harness's stdin.
struct LiveGuard(HarnessProcess);

impl LiveGuard {
    fn new(process: &HarnessProcess) -> Self {
        process.inner.live.send_modify(|n| *n += 1);
        Self(process.clone())
    }
}

impl Drop for LiveGuard {
    fn drop(&mut self) {
        self.0.inner.live.send_modify(|n| *n = n.saturating_sub(1));
    }
}
