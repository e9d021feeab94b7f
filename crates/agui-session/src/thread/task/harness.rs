//! The harness side of a thread: its events (translated and sent to every subscribed run),
//! turns that end or fail, a connection that closes, and the requests of its callbacks.

use agui_translate::StepFailure;
use agui_types::Event;
use harness_client::{CloseReason, ConversationEvent, TurnEnd};
use harness_proto::step::StepSource;

use super::super::callbacks::tool_call_events;
use super::super::conversation::Link;
use super::super::link::Request;
use super::super::parking::{CallRequest, FrontendCallback};
use super::Task;
use super::state::{Owed, Verdict};
use crate::error::{RunErrorCode, RunFailure};
use crate::turn::Turn;

impl Task {
    /// Handles one event of the harness.
    pub(super) async fn harness_event(&mut self, event: Option<ConversationEvent>) {
        self.touch();
        if let Some(turn) = self.conversation.turn_mut() {
            turn.progressed();
            self.sample_storage_room();
        }
        match event {
            Some(ConversationEvent::Step(step)) => {
                if step.source == StepSource::User
                    && step.key.trajectory_id == self.record.conversation_id
                    && let Some(message_id) = self.record.awaiting_echo.take()
                {
                    crate::thread::echo_alignment::record_echo(
                        &mut self.record.echoed,
                        &message_id,
                        &step.text,
                    );
                    self.record.user_steps.insert(step.key.index, message_id);
                }
                // Every snapshot (one string comparison): a `schedule` call's step may not be
                // final by the time its turn ends waiting for the task.
                if let Some(tool) = step.tool()
                    && let Some(open) = self.conversation.as_open()
                {
                    open.background_tasks.tool_called(&tool.name);
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
                }
            }
            Some(ConversationEvent::Trajectory(change)) => {
                // The harness can start a turn of its own (a backgrounded tool finishing, a
                // trigger): it is translated like ours.
                let root = change.trajectory_id == self.record.conversation_id
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
            if !self.conversation.is_attached() {
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
        if open.background_tasks.running() != end.background_tasks {
            tracing::info!(
                background_tasks = end.background_tasks,
                "{}",
                if end.background_tasks {
                    "the turn ended with tasks running in the background; the harness answers their end in a turn of its own"
                } else {
                    "the harness runs no task in the background any more"
                }
            );
        }
        open.background_tasks
            .turn_ended(end.background_tasks, tokio::time::Instant::now());
        let Some(mut turn) = open.turn.take() else {
            return;
        };
        if (end.error.is_some() || turn.halted_at().is_some()) && !end.background_tasks {
            // The harness closes the connection a few milliseconds after a turn error, and
            // after a halt when an answer to a callback the halt cancelled reaches it: a prompt
            // sent in between would be lost. The next one goes on a fresh connection.
            open.link = Link::Down;
        }
        for event in turn.close_turn() {
            self.output.emit(event);
        }
        if let Some(place) = &self.record.place {
            // The list shows the workspace's size as the turn left it.
            self.ctx.trees.measure_slot(place);
        }
        let exhausted = self.parking.budget_exhausted();
        self.parking.new_turn();
        let halted = turn.halted_at().is_some();
        let failure = if exhausted {
            let max = self.ctx.options.max_tool_calls_per_turn.unwrap_or_default();
            Some(RunFailure::new(
                RunErrorCode::MaxToolCallsExceeded,
                format!("The turn was stopped after {max} tool calls (max_tool_calls_per_turn)."),
            ))
        } else if let Some(error) = &end.error {
            Some(turn_failure(error, turn.last_failure()))
        } else if self.disk_cap_stopped_commands() {
            let cap = self.ctx.options.workspace_max_bytes.unwrap_or_default();
            Some(super::workspace_full(cap, None))
        } else if self.turn_maybe_unsaved() {
            // Not a finding of the volume's state now (it may have room again): marking it full
            // here made every other turn in flight fail too.
            tracing::error!("the turn may not have been saved: the harness's storage was full");
            Some(super::turn_unsaved())
        } else if (end.cancelled || end.halted) && !halted {
            Some(RunFailure::new(
                RunErrorCode::Cancelled,
                "The turn was cancelled.",
            ))
        } else {
            None
        };
        if let Some(failure) = failure {
            self.fail_turn(failure, halted);
        }
        if self.run.is_none() {
            // No run will persist the thread when it settles: say the turn is over now.
            self.persist();
        }
    }

    /// A turn failed: the runs watching it end with the failure; with none watching, the next
    /// run reports it. A turn the thread was halting ends as its halt said (a stop that ended
    /// in a failure is still a stop).
    fn fail_turn(&mut self, failure: RunFailure, halted: bool) {
        if halted && !matches!(self.owed, Some(Owed::Watchers(Verdict::Failed(_)))) {
            return;
        }
        if let Some(run) = self.run.as_mut() {
            run.prompt = None;
        }
        if self.run.is_some() || self.output.has_subscribers() {
            self.owe_watchers(Verdict::Failed(failure));
        } else {
            tracing::warn!(code = failure.code.as_str(), message = %failure.message, "a turn failed while no run watched; the next run reports it");
            self.owed = Some(Owed::NextRun(failure));
        }
    }

    fn connection_closed(&mut self, reason: CloseReason) {
        tracing::info!(%reason, "the conversation's connection ended");
        let turn = self
            .conversation
            .as_open()
            .and_then(|open| open.turn.take());
        self.parking.close_all();
        let failure = match &reason {
            CloseReason::ProcessExited(info) => {
                self.conversation.forget(Some(info.status.clone()));
                RunFailure::new(
                    RunErrorCode::HarnessLost,
                    "The Antigravity harness stopped unexpectedly; the next run starts a new one.",
                )
                .with_detail(info)
            }
            CloseReason::ClosedByHarness { turn_error, .. } => {
                // A model error closes the socket; the conversation is re-attached next time.
                self.mark_down();
                turn_failure(
                    turn_error
                        .as_deref()
                        .unwrap_or("the harness closed the conversation"),
                    turn.as_ref().and_then(|t| t.last_failure()),
                )
            }
            CloseReason::ConnectionLost(error) => {
                self.mark_down();
                RunFailure::new(
                    RunErrorCode::HarnessLost,
                    "The connection to the Antigravity harness broke.",
                )
                .with_detail(error)
            }
            CloseReason::ClosedByHost => {
                self.conversation.forget(None);
                RunFailure::new(
                    RunErrorCode::Cancelled,
                    "The Antigravity session was closed while the run was in progress.",
                )
            }
        };
        let Some(mut turn) = turn else {
            // No turn was lost; a run waiting to send its prompt re-attaches.
            return;
        };
        // The turn goes with the connection: what it left open (a tool call, a command, a
        // message) is closed now, since the run's end no longer finds it.
        for event in turn.close_turn() {
            self.output.emit(event);
        }
        let failure = if self.run.is_none() && !self.output.has_subscribers() {
            RunFailure::new(
                RunErrorCode::HarnessLost,
                "The connection to the Antigravity harness was lost while the turn waited, so it could not go on; the conversation is kept. Send a message to continue.",
            )
        } else {
            failure
        };
        // A halted turn whose process was killed ends as its halt said.
        self.fail_turn(failure, turn.halted_at().is_some());
    }

    /// The open conversation's connection is down (re-attached on the next run).
    fn mark_down(&mut self) {
        if let Some(open) = self.conversation.as_open() {
            open.link = Link::Down;
        }
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
                let call = CallRequest {
                    harness_id: &harness_id,
                    name: &name,
                    arguments: &arguments,
                    trajectory: &trajectory,
                };
                let handled = self.parking.frontend_callback(
                    call,
                    || link.tool_call_id(&harness_id),
                    self.ctx.options.deduplicate_tool_calls,
                    reply,
                );
                if let FrontendCallback::Parked { .. } = handled
                    && let Some(turn) = self.conversation.turn_mut()
                {
                    turn.called_back(&harness_id, &trajectory);
                }
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
            Some(open) => open.contract.session_tool_names(&self.ctx.tools),
            None => return,
        };
        let translator = crate::turn::translator(
            &self.ctx.options,
            names,
            self.link.tool_call_ids.clone(),
            &self.record.conversation_id,
        );
        if let Some(open) = self.conversation.as_open() {
            open.turn = Some(Turn::new(translator));
        }
    }
}

/// The harness's turn error: its kind and the model's HTTP status (from the turn's last
/// failure step) for the client, the whole text (which names the model's URL) for the log.
fn turn_failure(error: &str, last_step_failure: Option<&StepFailure>) -> RunFailure {
    let code = last_step_failure
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
