//! One AG-UI run: from `RUN_STARTED` to exactly one terminal event.
//!
//! A run applies the client's answers, sends the newest unforwarded user message (after the
//! turn in flight, if any, has ended), and streams the turn until it ends or something parks
//! on the client and the harness can do nothing more without it (see `activity`). The turn's
//! state (translator, parked requests) stays on the session, so a later run continues where
//! this one stopped.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use agui_translate::StepFailure;
use agui_types::{Event, RunAgentInput, RunOutcome, TokenUsage};
use harness_client::{CloseReason, ConversationEvent, ModelEndpoint};
use harness_proto::lh::UsageMetadata;
use tokio::sync::mpsc;
use tokio::time::Instant;

use crate::agent::AgentInner;
use crate::answers;
use crate::bridge::Bridge;
use crate::callbacks::SessionCallbacks;
use crate::contract::Contract;
use crate::error::{RunErrorCode, RunFailure};
use crate::options::ConcurrentRuns;
use crate::placement::Placement;
use crate::prompt::{self, Prompt, PromptLimits};
use crate::session::{Session, SessionState};
use crate::turn::Turn;

/// Why the reading loop stopped without failing.
enum Ending {
    /// The turn ended (or there was nothing to do).
    Finished,
    /// Something waits for the client.
    Parked,
    /// The client went away.
    Detached,
}

pub(crate) async fn execute(
    agent: Arc<AgentInner>,
    input: RunAgentInput,
    out: mpsc::Sender<Event>,
) {
    let mut run = Run::new(agent, &input, out);
    run.emit(Event::run_started(&input.thread_id, &input.run_id))
        .await;
    check_protocol_version(input.protocol_version.as_deref());
    let started = Instant::now();
    let result = run.body(&input).await;
    let elapsed_ms = started.elapsed().as_millis() as u64;
    // A failure's detail goes to the log only, under a reference its message names.
    let result = result.map_err(|failure| failure.published(elapsed_ms));
    if result.is_ok() {
        tracing::info!(elapsed_ms, "run finished");
    }
    let terminal = run.terminal(result);
    run.emit(terminal).await;
}

struct Run {
    agent: Arc<AgentInner>,
    thread_id: String,
    run_id: String,
    out: mpsc::Sender<Event>,
    attached: bool,
    usage_start: Option<UsageMetadata>,
    usage_now: Option<UsageMetadata>,
    /// The last failure a step reported (gives a turn error its HTTP code).
    last_failure: Option<StepFailure>,
    bridge: Option<Arc<Bridge>>,
    #[cfg(debug_assertions)]
    verifier: agui_types::StreamVerifier,
}

impl Run {
    fn new(agent: Arc<AgentInner>, input: &RunAgentInput, out: mpsc::Sender<Event>) -> Self {
        Self {
            agent,
            thread_id: input.thread_id.clone(),
            run_id: input.run_id.clone(),
            out,
            attached: true,
            usage_start: None,
            usage_now: None,
            last_failure: None,
            bridge: None,
            #[cfg(debug_assertions)]
            verifier: agui_types::StreamVerifier::new(),
        }
    }

    /// Sends an event to the client (dropped once the client is gone; the run goes on).
    async fn emit(&mut self, event: Event) {
        #[cfg(debug_assertions)]
        if let Err(violation) = self.verifier.check(&event) {
            tracing::error!(%violation, "this run emitted an event the AG-UI client would reject");
        }
        if self.attached && self.out.send(event).await.is_err() {
            tracing::info!("the client went away; the turn goes on without it");
            self.attached = false;
        }
    }

    async fn emit_all(&mut self, events: Vec<Event>) {
        for event in events {
            self.emit(event).await;
        }
    }

    /// Delivers what callbacks queued. A tool call is attached to its trajectory's open reply
    /// (`parentMessageId`) after that trajectory's reasoning is closed, as the translator does
    /// for the calls it emits.
    async fn flush_bridge(&mut self, bridge: &Bridge, mut turn: Option<&mut Turn>) {
        for queued in bridge.drain_events() {
            let mut event = queued.event;
            if let (Some(trajectory), Event::ToolCallStart(start), Some(turn)) =
                (&queued.trajectory, &mut event, turn.as_deref_mut())
            {
                let (before, parent) = turn.external_tool_call(trajectory);
                self.emit_all(before).await;
                if start.parent_message_id.is_none() {
                    start.parent_message_id = parent;
                }
            }
            self.emit(event).await;
        }
    }

    async fn body(&mut self, input: &RunAgentInput) -> Result<Ending, RunFailure> {
        loop {
            if self.agent.closing.load(Ordering::SeqCst) {
                return Err(shutting_down());
            }
            let session = self.agent.session(&self.thread_id).await;
            let mut state = match self.agent.options.concurrent_runs {
                ConcurrentRuns::Refuse => session.state.try_lock().map_err(|_| busy())?,
                ConcurrentRuns::Wait(limit) => tokio::time::timeout(limit, session.state.lock())
                    .await
                    .map_err(|_| busy())?,
            };
            if session.is_retired() {
                // Closed (swept) while this run waited for it: the thread goes on in its
                // current session, resumed from the record the closing persisted.
                tracing::debug!(
                    "the session closed while this run waited; taking the thread's current one"
                );
                continue;
            }
            if self.agent.closing.load(Ordering::SeqCst) {
                return Err(shutting_down());
            }
            session.touch();
            self.bridge = Some(session.bridge.clone());
            self.usage_start = state.usage.clone();
            let outcome = self.drive(&session, &mut state, input).await;
            // Close-out, on every path: open blocks close before the terminal event, queued
            // callback events are delivered, and what the client owes is persisted.
            if let Some(turn) = state.turn.as_mut() {
                let events = turn.close_run();
                self.emit_all(events).await;
            }
            self.flush_bridge(&session.bridge, state.turn.as_mut())
                .await;
            let record = state.record(session.bridge.pending_tool_calls());
            drop(state);
            self.agent.persist(&self.thread_id, record);
            session.touch();
            return outcome;
        }
    }

    async fn drive(
        &mut self,
        session: &Arc<Session>,
        state: &mut SessionState,
        input: &RunAgentInput,
    ) -> Result<Ending, RunFailure> {
        let bridge = session.bridge.clone();
        bridge.set_context(input.context.clone());
        bridge.adopt_client_state(input.state.as_ref());
        let applied = answers::apply(&bridge, input, &state.restart_pending, |id| {
            state.is_forwarded(id)
        });
        let limits = PromptLimits {
            max_attachment_bytes: self.agent.options.max_attachment_bytes,
        };
        let mut prompt =
            prompt::newest_unforwarded_with(&input.messages, |id| state.is_forwarded(id), &limits);
        if !applied.late_results.is_empty() {
            prompt = Some(with_late_results(
                prompt,
                &applied.late_results,
                &applied.consumed,
            ));
        }
        if let Some(prompt) = &prompt {
            for note in &prompt.notes {
                tracing::warn!(message_id = %prompt.message_id, "{note}");
            }
        }
        if prompt.is_some() && applied.resolved == 0 {
            let abandoned = bridge.abandon_all();
            if abandoned > 0 {
                tracing::info!(
                    abandoned,
                    "new user message while requests were parked; abandoning them"
                );
            }
        }
        // Delivered first: what callbacks produced while no run was attached.
        self.flush_bridge(&bridge, state.turn.as_mut()).await;
        if prompt.is_none() && state.turn.is_none() {
            return Ok(Ending::Finished);
        }
        let contract = Contract::new(&input.tools, &self.agent.options, &self.agent.tools);
        let had_turn = state.turn.is_some();
        self.ensure_conversation(session, state, contract).await?;
        if had_turn && state.turn.is_none() && prompt.is_none() {
            // The answer this run carries was for a turn that went with the connection.
            return Err(RunFailure::new(
                RunErrorCode::HarnessLost,
                "The connection to the Antigravity harness was lost while the turn waited, so it could not go on; the conversation is kept. Send a message to continue.",
            ));
        }
        // What arrived while no run was attached comes first: the end of a turn the client left,
        // a turn the harness started itself, or a failure that landed meanwhile (reported here;
        // the new message then waits for the next run).
        while let Some(event) = state.conversation.as_mut().and_then(|c| c.try_next_event()) {
            if let Some(ending) = self.on_event(state, &bridge, Some(event)).await? {
                return Ok(ending);
            }
        }
        if prompt.is_none() && state.turn.is_none() {
            return Ok(Ending::Finished);
        }
        let bare = prompt.is_none() && applied.resolved == 0;
        let mut shutdown = self.agent.shutdown.subscribe();
        loop {
            if state.turn.is_none() {
                let Some(next) = prompt.take() else {
                    return Ok(Ending::Finished);
                };
                self.send_prompt(session, state, next, &applied.consumed)
                    .await?;
            }
            if bridge.is_parked() {
                if bare {
                    // Nothing answered and nothing new: say again what is waiting.
                    return Ok(Ending::Parked);
                }
                // The harness queued everything it sent before the callback that parked: the
                // run takes it all, then ends if the harness can do nothing more without the
                // client (see `activity`).
                while let Some(event) = state.conversation.as_mut().and_then(|c| c.try_next_event())
                {
                    if let Some(ending) = self.on_event(state, &bridge, Some(event)).await? {
                        return Ok(ending);
                    }
                }
                if self.settled(state, &bridge).await {
                    return Ok(Ending::Parked);
                }
            }
            let conversation = state
                .conversation
                .as_mut()
                .expect("a turn in flight has a conversation");
            tokio::select! {
                biased;
                _ = shut_down(&mut shutdown) => {
                    return Err(RunFailure::new(RunErrorCode::Cancelled, "The server is shutting down; the turn was interrupted."));
                }
                _ = self.out.closed(), if self.attached => {
                    self.attached = false;
                    tracing::info!("the client went away; the turn goes on without it");
                    return Ok(Ending::Detached);
                }
                _ = bridge.changed() => self.flush_bridge(&bridge, state.turn.as_mut()).await,
                event = conversation.next_event() => {
                    session.touch();
                    if let Some(ending) = self.on_event(state, &bridge, event).await? {
                        return Ok(ending);
                    }
                }
            }
        }
    }

    /// Whether the turn waits only for the client. If so, the frontend calls of the parked
    /// replies that the harness has not called back for yet are announced (it asks for a
    /// reply's calls one at a time), so the client answers them together.
    async fn settled(&mut self, state: &mut SessionState, bridge: &Bridge) -> bool {
        let blocked = bridge.blocked_trajectories();
        let Some(turn) = state.turn.as_ref() else {
            return !blocked.is_empty();
        };
        if !turn.activity().settled(&blocked) {
            return false;
        }
        let frontend: Vec<&str> = state
            .contract
            .as_ref()
            .map(|c| c.frontend.iter().map(|t| t.name.as_str()).collect())
            .unwrap_or_default();
        let deduplicate = self.agent.options.deduplicate_tool_calls;
        for (trajectory, call) in turn.activity().open_calls_in(&blocked) {
            if frontend.contains(&call.name.as_str()) {
                bridge.announce_tool(
                    &call.harness_id,
                    &call.name,
                    &call.arguments,
                    trajectory,
                    deduplicate,
                );
            }
        }
        self.flush_bridge(bridge, state.turn.as_mut()).await;
        true
    }

    /// Handles one conversation event; `Some` ends the loop.
    async fn on_event(
        &mut self,
        state: &mut SessionState,
        bridge: &Bridge,
        event: Option<ConversationEvent>,
    ) -> Result<Option<Ending>, RunFailure> {
        match event {
            Some(ConversationEvent::Step(step)) => {
                if let Some(turn) = state.turn.as_mut() {
                    let (events, failures) = turn.step(&step);
                    self.emit_all(events).await;
                    for failure in failures {
                        tracing::info!(http_code = failure.http_code, message = %failure.message, "the harness reported a failure step");
                        self.last_failure = Some(failure);
                    }
                }
                self.flush_bridge(bridge, state.turn.as_mut()).await;
                Ok(None)
            }
            Some(ConversationEvent::Trajectory(change)) => {
                // The harness can start a turn of its own (a backgrounded tool finishing, a
                // trigger): translate it like ours.
                let root = change.trajectory_id == state.conversation_id
                    && change.parent_trajectory_id.is_none();
                if state.turn.is_none()
                    && root
                    && change.status == harness_client::TrajectoryStatus::Running
                {
                    tracing::info!("the harness started a turn of its own");
                    self.start_turn(state, bridge);
                }
                if let Some(turn) = state.turn.as_mut() {
                    let events = turn.trajectory(&change);
                    self.emit_all(events).await;
                }
                Ok(None)
            }
            Some(ConversationEvent::Usage(usage)) => {
                if let Some(turn) = state.turn.as_mut() {
                    turn.usage(&usage);
                }
                state.usage = Some(usage.total.clone());
                self.usage_now = Some(usage.total);
                Ok(None)
            }
            Some(ConversationEvent::TurnEnded(end)) => {
                // Queued calls first, inside the turn's replies; then everything closes.
                self.flush_bridge(bridge, state.turn.as_mut()).await;
                if let Some(mut turn) = state.turn.take() {
                    let events = turn.close_run();
                    self.emit_all(events).await;
                }
                let exhausted = bridge.budget_exhausted();
                bridge.new_turn();
                if exhausted {
                    let max = self
                        .agent
                        .options
                        .max_tool_calls_per_turn
                        .unwrap_or_default();
                    return Err(RunFailure::new(
                        RunErrorCode::MaxToolCallsExceeded,
                        format!(
                            "The turn was stopped after {max} tool calls (max_tool_calls_per_turn)."
                        ),
                    ));
                }
                if let Some(error) = end.error {
                    return Err(self.turn_failure(&error));
                }
                if end.cancelled || end.halted {
                    return Err(RunFailure::new(
                        RunErrorCode::Cancelled,
                        "The turn was cancelled.",
                    ));
                }
                Ok(None)
            }
            Some(ConversationEvent::Closed(reason)) => Err(self.connection_closed(state, reason)),
            None => Err(self.connection_closed(
                state,
                CloseReason::ConnectionLost("the event stream ended".into()),
            )),
        }
    }

    /// The harness's turn error: its kind and the model's HTTP status for the client, the
    /// whole text (which names the model's URL) for the log.
    fn turn_failure(&self, error: &str) -> RunFailure {
        let code = self
            .last_failure
            .as_ref()
            .map(|f| f.http_code)
            .filter(|c| (100..600).contains(c));
        let kind = error_kind(error);
        let message = match (kind, code) {
            (Some(kind), Some(code)) => format!("The agent failed: {kind} (HTTP {code})."),
            (Some(kind), None) => format!("The agent failed: {kind}."),
            (None, Some(code)) => format!("The agent failed (HTTP {code})."),
            (None, None) => "The agent failed.".to_owned(),
        };
        RunFailure::new(RunErrorCode::AgentError, message).with_detail(error)
    }

    fn connection_closed(&mut self, state: &mut SessionState, reason: CloseReason) -> RunFailure {
        state.turn = None;
        match reason {
            CloseReason::ProcessExited(info) => {
                if state.conversation.take().is_some() {
                    self.agent.release_conversation();
                }
                state.harness_lost = Some(info.status.clone());
                RunFailure::new(
                    RunErrorCode::HarnessLost,
                    "The Antigravity harness stopped unexpectedly; the next run starts a new one.",
                )
                .with_detail(info)
            }
            CloseReason::ClosedByHarness { turn_error, .. } => self.turn_failure(
                turn_error
                    .as_deref()
                    .unwrap_or("the harness closed the conversation"),
            ),
            CloseReason::ConnectionLost(error) => RunFailure::new(
                RunErrorCode::HarnessLost,
                "The connection to the Antigravity harness broke.",
            )
            .with_detail(error),
            CloseReason::ClosedByHost => RunFailure::new(
                RunErrorCode::Cancelled,
                "The Antigravity session was closed while the run was in progress.",
            ),
        }
    }

    /// Makes sure the session has a usable conversation with the run's tool contract.
    async fn ensure_conversation(
        &mut self,
        session: &Arc<Session>,
        state: &mut SessionState,
        contract: Contract,
    ) -> Result<(), RunFailure> {
        if let Some(why) = state.harness_lost.take() {
            tracing::warn!(reason = %why, "the harness of this thread is gone; rebuilding the session. Conversation history from before the failure is likely lost");
        }
        if let Some(conversation) = state.conversation.as_mut()
            && !conversation.is_open()
        {
            match conversation.reconnect().await {
                Ok(info) => tracing::info!(
                    steps = info.history.len(),
                    "re-attached to the conversation"
                ),
                Err(e) => {
                    tracing::warn!(error = %e, "could not re-attach; starting over on a new connection");
                    state.conversation = None;
                    self.agent.release_conversation();
                    // Its harness calls went with the connection: that turn can never end.
                    if state.turn.take().is_some() {
                        tracing::warn!("the turn in flight was lost with the connection");
                    }
                }
            }
        }
        let changed = state
            .contract
            .as_ref()
            .is_some_and(|c| c.signature != contract.signature);
        if state.conversation.is_some() && changed {
            if state.turn.is_some() || session.bridge.is_parked() {
                tracing::warn!(
                    "the client's tools changed while a turn is in flight; keeping the current tools until it ends"
                );
                return Ok(());
            }
            tracing::info!(
                "the client's tools changed; rebuilding the conversation (history is kept)"
            );
            if let Some(conversation) = state.conversation.take() {
                conversation.close().await;
                self.agent.release_conversation();
            }
        }
        if state.conversation.is_some() {
            return Ok(());
        }
        let options = &self.agent.options;
        let placement = Placement::new(
            &options.save_dir,
            &state.workspace,
            self.agent.backend.process_per_thread(),
        );
        placement
            .prepare(&options.save_dir, &state.conversation_id)
            .map_err(|e| {
                RunFailure::new(
                    RunErrorCode::AgentError,
                    "Could not prepare the thread's directories.",
                )
                .with_detail(format_args!(
                    "could not prepare the thread's directories (workspace {}): {e}",
                    state.workspace.display()
                ))
            })?;
        let config = contract
            .harness_config(
                options,
                &self.agent.tools,
                &state.workspace,
                &state.conversation_id,
            )
            .map_err(|e| {
                RunFailure::new(
                    RunErrorCode::AgentError,
                    "The agent's configuration could not be applied.",
                )
                .with_detail(e)
            })?;
        let callbacks = Arc::new(SessionCallbacks {
            bridge: session.bridge.clone(),
            tools: self.agent.tools.clone(),
            policy: contract.callback_policy(options),
        });
        self.agent.reserve_conversation(&session.thread_id).await?;
        let conversation = match self.agent.backend.open(&placement, config, callbacks).await {
            Ok(conversation) => conversation,
            Err(e) => {
                self.agent.release_conversation();
                return Err(RunFailure::new(
                    RunErrorCode::AgentError,
                    "Could not start the Antigravity conversation.",
                )
                .with_detail(e));
            }
        };
        let resumed = conversation.init_info().history.len();
        tracing::info!(conversation_id = %conversation.id(), resumed_steps = resumed, "conversation open");
        session.bridge.set_canceller(Some(conversation.canceller()));
        state.usage = state
            .usage
            .take()
            .or_else(|| conversation.init_info().cumulative_usage.clone());
        if self.usage_start.is_none() {
            self.usage_start = state.usage.clone();
        }
        state.contract = Some(contract);
        state.conversation = Some(conversation);
        Ok(())
    }

    /// Sends a prompt, starting a turn. The prompt's message, and the tool messages it carries
    /// the results of (`answered`), are recorded as forwarded only once the send succeeded.
    async fn send_prompt(
        &mut self,
        session: &Arc<Session>,
        state: &mut SessionState,
        prompt: Prompt,
        answered: &[String],
    ) -> Result<(), RunFailure> {
        session.bridge.new_turn();
        self.start_turn(state, &session.bridge);
        let conversation = state.conversation.as_mut().expect("ensured before sending");
        if let Err(e) = conversation.send(prompt.input).await {
            state.turn = None;
            return Err(RunFailure::new(
                RunErrorCode::HarnessLost,
                "Could not send the message to the harness.",
            )
            .with_detail(e));
        }
        tracing::info!(message_id = %prompt.message_id, "user message sent");
        state.record_forwarded(prompt.message_id);
        for id in answered {
            state.record_forwarded(id.clone());
        }
        let record = state.record(session.bridge.pending_tool_calls());
        self.agent.persist(&self.thread_id, record);
        Ok(())
    }

    /// A fresh translation state for a turn that starts now.
    fn start_turn(&self, state: &mut SessionState, bridge: &Bridge) {
        let names = state
            .contract
            .as_ref()
            .map(|c| c.session_tool_names(&self.agent.tools))
            .unwrap_or_default();
        state.turn = Some(Turn::new(crate::turn::translator(
            &self.agent.options,
            names,
            bridge.tool_call_ids(),
        )));
    }

    fn terminal(&self, result: Result<Ending, RunFailure>) -> Event {
        let usage = self.usage();
        match result {
            Err(failure) => agui_types::RunError {
                message: failure.message,
                code: Some(failure.code.as_str().to_owned()),
                usage,
                ..Default::default()
            }
            .into(),
            Ok(_) => {
                let bridge = self.bridge.as_ref();
                let interrupts = bridge.map(|b| b.interrupts()).unwrap_or_default();
                let pending: Vec<String> = bridge
                    .map(|b| b.pending_tool_calls())
                    .unwrap_or_default()
                    .into_iter()
                    .map(|p| p.tool_call_id)
                    .collect();
                let mut finished = agui_types::RunFinished::new(&self.thread_id, &self.run_id);
                finished.usage = usage;
                if !interrupts.is_empty() {
                    finished.outcome = Some(RunOutcome::Interrupt { interrupts });
                } else if !pending.is_empty() {
                    finished.outcome = Some(RunOutcome::Success {
                        pending_tool_call_ids: pending,
                    });
                }
                finished.into()
            }
        }
    }

    /// This run's own model usage (the harness reports cumulative totals).
    fn usage(&self) -> Vec<TokenUsage> {
        let Some(now) = &self.usage_now else {
            return Vec::new();
        };
        let before = self.usage_start.clone().unwrap_or_default();
        let delta = |a: Option<u64>, b: Option<u64>| a.unwrap_or(0).saturating_sub(b.unwrap_or(0));
        let output = delta(now.candidates_token_count, before.candidates_token_count);
        let reasoning = delta(now.thoughts_token_count, before.thoughts_token_count);
        let provider = match self.agent.options.endpoint {
            ModelEndpoint::Gemini { .. } | ModelEndpoint::Vertex { .. } => {
                Some("google".to_owned())
            }
            ModelEndpoint::OpenAiCompatible { .. } => None,
        };
        vec![TokenUsage {
            provider,
            model: Some(self.agent.options.model.clone()),
            input_tokens: Some(delta(now.prompt_token_count, before.prompt_token_count)),
            output_tokens: Some(output + reasoning),
            total_tokens: Some(delta(now.total_token_count, before.total_token_count)),
            reasoning_tokens: Some(reasoning),
            cached_input_tokens: Some(delta(
                now.cached_content_token_count,
                before.cached_content_token_count,
            )),
            ..Default::default()
        }]
    }
}

/// The kind of a harness error, when its text starts with one in plain words (`model
/// unreachable: …` gives `model unreachable`); what follows may name hosts and is not shown.
fn error_kind(error: &str) -> Option<&str> {
    let (kind, _) = error.split_once(':')?;
    let kind = kind.trim();
    (!kind.is_empty()
        && kind.len() <= 40
        && kind.chars().all(|c| c.is_ascii_alphabetic() || c == ' '))
    .then_some(kind)
}

/// Resolves once the agent shuts down, also when that happened before the receiver was made
/// (`changed()` would miss it).
async fn shut_down(receiver: &mut tokio::sync::watch::Receiver<bool>) {
    let _ = receiver.wait_for(|closing| *closing).await.map(drop);
}

fn shutting_down() -> RunFailure {
    RunFailure::new(RunErrorCode::Cancelled, "The server is shutting down.")
}

fn busy() -> RunFailure {
    RunFailure::new(
        RunErrorCode::ThreadBusy,
        "Another run on this thread is still in progress; retry when it has finished.",
    )
}

/// Logs a client declaring a protocol version this producer does not speak.
fn check_protocol_version(version: Option<&str>) {
    let Some(version) = version else { return };
    let parsed: Option<Vec<u64>> = version.split('.').map(|p| p.parse().ok()).collect();
    match parsed.as_deref() {
        Some([1, 0]) | Some([1]) => {}
        Some(parts) if parts > &[1, 0][..] => {
            tracing::warn!(
                version,
                "the client's AG-UI protocol version is newer than this adapter's 1.0; serving the run as 1.0"
            )
        }
        Some(_) => {}
        None => tracing::warn!(
            version,
            "unreadable AG-UI protocol version; serving the run as 1.0"
        ),
    }
}

/// Adds notes about tool results that arrived after a restart to the prompt (or makes them the
/// prompt), so the model learns what the client did.
fn with_late_results(prompt: Option<Prompt>, notes: &[String], consumed: &[String]) -> Prompt {
    let text = harness_client::input::text_part(&notes.join("\n"));
    match prompt {
        Some(mut prompt) => {
            prompt.input.parts.insert(0, text);
            prompt
        }
        None => Prompt {
            message_id: consumed.first().cloned().unwrap_or_default(),
            input: harness_proto::lh::UserInput { parts: vec![text] },
            notes: Vec::new(),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::error_kind;

    #[test]
    fn only_a_plain_leading_kind_of_a_harness_error_is_shown() {
        assert_eq!(
            error_kind("model unreachable: Post \"http://10.0.0.1/v1\": dial tcp"),
            Some("model unreachable")
        );
        for hidden in [
            "Error 400, Message: bad request",
            "open /srv/agui/save/x.db: permission denied",
            "no colon at all",
            ": empty kind",
        ] {
            assert_eq!(error_kind(hidden), None, "{hidden}");
        }
    }
}
