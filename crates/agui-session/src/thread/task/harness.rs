//! The harness side of a thread: its events (translated and sent to every subscribed run),
//! the requests of its callbacks, and opening, resuming or re-attaching its conversation.

use agui_types::Event;
use harness_client::{CloseReason, ConversationEvent, HarnessError, TurnEnd};
use harness_proto::step::StepSource;
use tokio::time::Instant;

use super::super::callbacks::{ThreadCallbacks, tool_call_events};
use super::super::conversation::Conversation;
use super::super::parking::FrontendCallback;
use super::super::{Request, history};
use super::Task;
use crate::contract::Contract;
use crate::error::{RunErrorCode, RunFailure};
use crate::turn::Turn;

impl Task {
    /// Handles one event of the harness.
    pub(super) async fn harness_event(&mut self, event: Option<ConversationEvent>) {
        self.last_progress = Instant::now();
        self.touch();
        match event {
            Some(ConversationEvent::Step(step)) => {
                if step.source == StepSource::User
                    && step.key.trajectory_id == self.conversation_id
                    && let Some(message_id) = self.pending_echo.take()
                {
                    self.user_steps.insert(step.key.index, message_id);
                }
                let Some(turn) = self.conversation.turn_mut() else {
                    return;
                };
                let (events, failures) = turn.step(&step);
                for event in events {
                    self.output.emit(event);
                }
                for failure in failures {
                    tracing::info!(http_code = failure.http_code, message = %failure.message, "the harness reported a failure step");
                    self.last_failure = Some(failure);
                }
            }
            Some(ConversationEvent::Trajectory(change)) => {
                // The harness can start a turn of its own (a backgrounded tool finishing, a
                // trigger): it is translated like ours.
                let root = change.trajectory_id == self.conversation_id
                    && change.parent_trajectory_id.is_none();
                if root
                    && change.status == harness_client::TrajectoryStatus::Running
                    && self.conversation.is_open()
                    && self.conversation.turn().is_none()
                {
                    tracing::info!("the harness started a turn of its own");
                    self.start_turn();
                }
                if let Some(turn) = self.conversation.turn_mut() {
                    for event in turn.trajectory(&change) {
                        self.output.emit(event);
                    }
                }
            }
            Some(ConversationEvent::Usage(usage)) => {
                if let Some(turn) = self.conversation.turn_mut() {
                    turn.usage(&usage);
                }
                self.usage = Some(usage.total);
            }
            Some(ConversationEvent::TurnEnded(end)) => self.turn_ended(end),
            Some(ConversationEvent::Closed(reason)) => self.connection_closed(reason),
            None => {
                self.connection_closed(CloseReason::ConnectionLost("the event stream ended".into()))
            }
        }
    }

    /// Takes every event the harness already sent, without waiting.
    pub(super) async fn drain_harness(&mut self) {
        loop {
            if self.down {
                return;
            }
            let Some(event) = self
                .conversation
                .as_open()
                .and_then(|open| open.handle.try_next_event())
            else {
                return;
            };
            Box::pin(self.harness_event(Some(event))).await;
        }
    }

    fn turn_ended(&mut self, end: TurnEnd) {
        let Some(open) = self.conversation.as_open() else {
            return;
        };
        let Some(mut turn) = open.turn.take() else {
            return;
        };
        for event in turn.close_turn() {
            self.output.emit(event);
        }
        let exhausted = self.parking.budget_exhausted();
        self.parking.new_turn();
        let stopped = self.stopping.is_some();
        let failure = if exhausted {
            let max = self
                .agent
                .options
                .max_tool_calls_per_turn
                .unwrap_or_default();
            Some(RunFailure::new(
                RunErrorCode::MaxToolCallsExceeded,
                format!("The turn was stopped after {max} tool calls (max_tool_calls_per_turn)."),
            ))
        } else if let Some(error) = &end.error {
            Some(self.turn_failure(error))
        } else if (end.cancelled || end.halted) && !stopped {
            Some(RunFailure::new(
                RunErrorCode::Cancelled,
                "The turn was cancelled.",
            ))
        } else {
            None
        };
        if let Some(failure) = failure {
            self.fail_turn(failure);
        }
        if self.run.is_none() {
            // No run will persist the thread when it settles: say the turn is over now.
            self.persist();
        }
    }

    /// A turn failed: the runs watching it end with the failure; with none watching, the next
    /// run reports it.
    fn fail_turn(&mut self, failure: RunFailure) {
        if self.stopping.is_some() && self.turn_failure.is_none() {
            // A stop that ended in a failure is still a stop.
            return;
        }
        if let Some(run) = self.run.as_mut() {
            run.prompt = None;
        }
        if self.run.is_some() || self.output.has_subscribers() {
            self.turn_failure.get_or_insert(failure);
        } else {
            tracing::warn!(code = failure.code.as_str(), message = %failure.message, "a turn failed while no run watched; the next run reports it");
            self.unreported = Some(failure);
        }
    }

    /// The harness's turn error: its kind and the model's HTTP status for the client, the
    /// whole text (which names the model's URL) for the log.
    pub(super) fn turn_failure(&self, error: &str) -> RunFailure {
        let code = self
            .last_failure
            .as_ref()
            .map(|f| f.http_code)
            .filter(|c| (100..600).contains(c));
        let message = match (error_kind(error), code) {
            (Some(kind), Some(code)) => format!("The agent failed: {kind} (HTTP {code})."),
            (Some(kind), None) => format!("The agent failed: {kind}."),
            (None, Some(code)) => format!("The agent failed (HTTP {code})."),
            (None, None) => "The agent failed.".to_owned(),
        };
        RunFailure::new(RunErrorCode::AgentError, message).with_detail(error)
    }

    fn connection_closed(&mut self, reason: CloseReason) {
        tracing::info!(%reason, "the conversation's connection ended");
        let had_turn = self.conversation.turn().is_some();
        if let Some(open) = self.conversation.as_open() {
            open.turn = None;
        }
        self.parking.close_all();
        let failure = match &reason {
            CloseReason::ProcessExited(info) => {
                self.harness_lost = Some(info.status.clone());
                self.conversation.forget();
                self.down = false;
                RunFailure::new(
                    RunErrorCode::HarnessLost,
                    "The Antigravity harness stopped unexpectedly; the next run starts a new one.",
                )
                .with_detail(info)
            }
            CloseReason::ClosedByHarness { turn_error, .. } => {
                // A model error closes the socket; the conversation is re-attached next time.
                self.down = true;
                self.turn_failure(
                    turn_error
                        .as_deref()
                        .unwrap_or("the harness closed the conversation"),
                )
            }
            CloseReason::ConnectionLost(error) => {
                self.down = true;
                RunFailure::new(
                    RunErrorCode::HarnessLost,
                    "The connection to the Antigravity harness broke.",
                )
                .with_detail(error)
            }
            CloseReason::ClosedByHost => {
                self.conversation.forget();
                self.down = false;
                RunFailure::new(
                    RunErrorCode::Cancelled,
                    "The Antigravity session was closed while the run was in progress.",
                )
            }
        };
        if !had_turn && self.run.is_none() {
            return;
        }
        if self.stopping.is_some() && self.turn_failure.is_none() {
            // The stop's halt was ignored and the process was killed: the runs end cancelled.
            return;
        }
        if !had_turn {
            // A run was waiting to send its prompt on this connection; it is re-attached.
            return;
        }
        let failure = if self.run.is_none() && !self.output.has_subscribers() {
            RunFailure::new(
                RunErrorCode::HarnessLost,
                "The connection to the Antigravity harness was lost while the turn waited, so it could not go on; the conversation is kept. Send a message to continue.",
            )
        } else {
            failure
        };
        self.fail_turn(failure);
    }

    /// Handles a request of the harness side.
    pub(super) fn request(&mut self, request: Request) {
        match request {
            Request::Emit { trajectory, events } => self.emit_in(trajectory.as_deref(), events),
            Request::FrontendTool {
                harness_id,
                name,
                arguments,
                trajectory,
                reply,
            } => {
                let link = &self.link;
                let handled = self.parking.frontend_callback(
                    &harness_id,
                    || link.tool_call_id(&harness_id),
                    &name,
                    &arguments,
                    &trajectory,
                    self.agent.options.deduplicate_tool_calls,
                    reply,
                );
                match handled {
                    FrontendCallback::Parked {
                        tool_call_id,
                        announce: true,
                    } => {
                        tracing::debug!(tool = %name, tool_call_id = %tool_call_id, "frontend tool parked");
                        let events = tool_call_events(&tool_call_id, &name, &arguments);
                        self.emit_in(Some(&trajectory), events.into());
                    }
                    FrontendCallback::Parked { .. } => {}
                    FrontendCallback::Repeat => {
                        tracing::debug!(tool = %name, "repeated frontend tool call; answered from the turn's first call");
                    }
                }
            }
            Request::Interrupt {
                mut interrupt,
                kind,
                trajectory,
                reply,
            } => {
                // Raised inside a subagent: the interrupt names its invocation.
                if interrupt.subagent_run_id.is_none() {
                    interrupt.subagent_run_id = self
                        .conversation
                        .turn()
                        .and_then(|turn| turn.attribution(&trajectory));
                }
                tracing::debug!(interrupt_id = %interrupt.id, reason = %interrupt.reason, ?kind, "parking an interrupt");
                self.parking
                    .park_interrupt(interrupt, kind, trajectory, reply);
            }
            Request::CountToolCall { max, reply } => {
                let (within, first_excess) = self.parking.count_tool_call(max);
                if first_excess {
                    tracing::warn!(max, "the turn ran out of tool calls; stopping it");
                    if let Some(open) = self.conversation.as_open()
                        && !(open.handle.canceller())()
                    {
                        tracing::warn!("could not cancel the turn that ran out of tool calls");
                    }
                }
                let _ = reply.send(within);
            }
        }
    }

    /// Sends events a callback of `trajectory` produced. A tool call is attached to the
    /// trajectory's open reply (`parentMessageId`) after that trajectory's reasoning is
    /// closed, as the translator does for the calls it emits.
    pub(super) fn emit_in(&mut self, trajectory: Option<&str>, events: Vec<Event>) {
        // A subagent's calls carry its `subagentRunId`, as the translator's do.
        let attribution = trajectory.and_then(|t| {
            self.conversation
                .turn()
                .and_then(|turn| turn.attribution(t))
        });
        for mut event in events {
            if attribution.is_some() {
                event.set_subagent_run_id(attribution.clone());
            }
            if let (Some(trajectory), Event::ToolCallStart(start)) = (trajectory, &mut event)
                && let Some(turn) = self.conversation.turn_mut()
            {
                let (before, parent) = turn.external_tool_call(trajectory);
                if start.parent_message_id.is_none() {
                    start.parent_message_id = parent;
                }
                for earlier in before {
                    self.output.emit(earlier);
                }
            }
            self.output.emit(event);
        }
    }

    /// A fresh translation state for a turn that starts now.
    pub(super) fn start_turn(&mut self) {
        let names = match self.conversation.as_open() {
            Some(open) => open.contract.session_tool_names(&self.agent.tools),
            None => return,
        };
        let translator = crate::turn::translator(
            &self.agent.options,
            names,
            self.link.tool_call_ids.clone(),
            &self.conversation_id,
        );
        self.last_progress = Instant::now();
        if let Some(open) = self.conversation.as_open() {
            open.turn = Some(Turn::new(translator));
        }
    }

    /// Makes sure the thread has a usable conversation with `contract`'s tools: re-attaching a
    /// connection the harness closed, rebuilding it when the client's tools changed (history
    /// kept), or opening it — resuming the conversation the harness has, or creating it.
    pub(super) async fn ensure_conversation(
        &mut self,
        contract: Contract,
    ) -> Result<(), RunFailure> {
        if let Some(why) = self.harness_lost.take() {
            tracing::warn!(reason = %why, "the harness of this thread is gone; opening the conversation on a new one");
        }
        if self.down {
            self.down = false;
            if let Some(open) = self.conversation.as_open() {
                match open.handle.reconnect().await {
                    Ok(info) => tracing::info!(
                        steps = info.history.len(),
                        "re-attached to the conversation"
                    ),
                    Err(e) => {
                        tracing::warn!(error = %e, "could not re-attach; starting over on a new connection");
                        self.conversation.forget();
                    }
                }
            }
        }
        if let Some(open) = self.conversation.as_open()
            && open.contract.signature != contract.signature
        {
            if open.turn.is_some() || self.parking.is_parked() {
                tracing::warn!(
                    "the client's tools changed while a turn is in flight; keeping the current tools until it ends"
                );
                return Ok(());
            }
            tracing::info!(
                "the client's tools changed; rebuilding the conversation (history is kept)"
            );
            self.conversation.close().await;
        }
        if self.conversation.is_open() {
            return Ok(());
        }
        self.open_conversation(contract).await
    }

    async fn open_conversation(&mut self, contract: Contract) -> Result<(), RunFailure> {
        let (placement, spare) = self.place_thread().await?;
        let options = &self.agent.options;
        let config = contract
            .conversation_config(
                options,
                &self.agent.tools,
                &placement.workspace,
                &placement.app_data_dir,
                &self.conversation_id,
                self.known,
            )
            .build()
            .map_err(|e| {
                RunFailure::new(
                    RunErrorCode::AgentError,
                    "The agent's configuration could not be applied.",
                )
                .with_detail(e)
            })?;
        let callbacks = std::sync::Arc::new(ThreadCallbacks {
            link: self.link.clone(),
            tools: self.agent.tools.clone(),
            policy: contract.callback_policy(options),
        });
        let slot = self.agent.reserve_live(&self.id).await?;
        let handle = match self
            .agent
            .backend
            .0
            .open(&placement, config, callbacks)
            .await
        {
            Ok(handle) => handle,
            Err(HarnessError::InitFailed { reason })
                if self.known && lost_conversation(&reason) =>
            {
                return Err(self.conversation_lost(&reason));
            }
            Err(e) => {
                return Err(RunFailure::new(
                    RunErrorCode::AgentError,
                    "Could not start the Antigravity conversation.",
                )
                .with_detail(e));
            }
        };
        // The spare's process now serves this conversation: it may go back to the pool's care.
        drop(spare);
        let info = handle.init_info();
        tracing::info!(conversation_id = %handle.id(), resumed_steps = info.history.len(), "conversation open");
        if self.known && info.history.is_empty() && !self.forwarded.is_empty() {
            // Resumed, yet with none of the turns the thread sent: the harness lost it.
            return Err(self.conversation_lost("it came back with no history"));
        }
        if !self.history_loaded {
            let translation = crate::turn::translator_options(options, contract.silent.clone());
            let rebuilt = history::rebuild(
                &self.conversation_id,
                &info.history,
                translation,
                &self.user_steps,
            );
            self.output.log_mut().merge(rebuilt.messages());
            self.history_loaded = true;
        }
        if self.usage.is_none() {
            self.usage = info.cumulative_usage.clone();
        }
        self.conversation = Conversation::open(handle, contract, slot);
        self.down = false;
        Ok(())
    }

    /// The conversation the thread knew could not be resumed: said loudly, and the thread
    /// starts a new one (the model no longer knows the earlier turns, and the user is told).
    fn conversation_lost(&mut self, why: &str) -> RunFailure {
        tracing::error!(conversation_id = %self.conversation_id, why, "the harness lost this thread's conversation; starting a new one");
        self.conversation_id = uuid::Uuid::new_v4().simple().to_string();
        self.known = false;
        self.user_steps.clear();
        self.history_loaded = true;
        self.persist();
        RunFailure::new(
            RunErrorCode::ConversationLost,
            "The agent's record of this conversation was lost (its saved state is missing or unreadable), so it no longer knows the earlier messages. The next message starts a new conversation.",
        )
        .with_detail(why)
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

/// Whether an init failure says the conversation to resume does not exist (or is unreadable).
fn lost_conversation(reason: &str) -> bool {
    let reason = reason.to_ascii_lowercase();
    reason.contains("not found")
        || reason.contains("cannot resume")
        || reason.contains("corrupt")
        || reason.contains("malformed")
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
