//! Runs on a thread: starting one (answers, state, the prompt), restating the thread for a
//! connect, stopping the turn, and ending every subscribed run when the turn ends or waits for
//! the client.

use crate::owner::Owner;
use agui_types::{Event, RunAgentInput, RunOutcome};
use tokio::sync::mpsc;
use tokio::time::Instant;
use tracing::Instrument as _;

use super::super::conversation::Conversation;
use super::super::output::{Restate, RunChannel, Terminal, negotiate};
use super::super::parking::CallRequest;
use super::Task;
use super::opening::Readiness;
use super::state::{ActiveRun, Harnessed, Moving, Owed, Verdict, WaitingConnect, WaitingRun};
use crate::answers;
use crate::choices::ConcurrentRuns;
use crate::contract::Contract;
use crate::error::{RunErrorCode, RunFailure};
use crate::prompt::{self, Prompt, PromptLimits};

/// How a run ends when it does not fail.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Ending {
    /// The turn ended (or there was nothing to do).
    Finished,
    /// Something waits for the client.
    Parked,
    /// The turn was stopped.
    Stopped,
}

impl Task {
    /// Whether the thread may serve `owner`'s run, connect or deletion now (it holds its
    /// lease already): not while the server shuts down, and only for its owner.
    pub(super) fn admit(&mut self, owner: &Owner) -> Result<(), RunFailure> {
        if self.ctx.is_closing() {
            return Err(super::shutting_down());
        }
        self.adopt_owner(owner)
    }

    /// Takes `owner` as the thread's owner if it has none; a thread of the local owner (made
    /// before callers had identities) passes to the first identity that uses it, its
    /// directories with it. Any other owner is refused.
    fn adopt_owner(&mut self, owner: &Owner) -> Result<(), RunFailure> {
        match &self.record.owner {
            None => {
                self.record.owner = Some(owner.clone());
                Ok(())
            }
            Some(current) if current == owner => Ok(()),
            Some(current) if current.is_local() => {
                tracing::info!(%owner, "a thread of the local owner now belongs to an identity; its directories move to that identity's tree");
                if let Some(place) = self.record.place.take() {
                    self.moving = Some(Moving::From(place, current.clone()));
                }
                self.record.owner = Some(owner.clone());
                Ok(())
            }
            Some(current) => Err(RunFailure::new(
                RunErrorCode::InvalidInput,
                "This thread belongs to someone else.",
            )
            .with_detail(format_args!(
                "the thread belongs to {current}; {owner} asked for it"
            ))),
        }
    }

    /// A run arrives: served now, queued behind the thread's current run, or refused.
    pub(super) async fn start_run(
        &mut self,
        input: RunAgentInput,
        events: RunChannel,
        owner: Owner,
    ) {
        if let Err(failure) = self.admit(&owner) {
            self.reject(&input, events, failure);
            return;
        }
        if let Some(active) = &self.run {
            if self.output.is_attached(&active.run_id) {
                match self.ctx.options.concurrent_runs {
                    ConcurrentRuns::Refuse => self.reject(&input, events, super::busy()),
                    ConcurrentRuns::Wait(limit) => self.waiting.push_back(WaitingRun {
                        input,
                        events,
                        deadline: Instant::now() + limit,
                    }),
                }
                return;
            }
            // The driving run's client left: this run takes the thread over (its own prompt,
            // if any, goes after the turn in flight).
            tracing::info!(previous = %active.run_id, "a new run takes over a thread whose client left");
            if let Some(previous) = self.run.take()
                && let Some(prompt) = previous.prompt
            {
                tracing::warn!(message_id = %prompt.message_id, "the previous run's message was not sent yet; the new run decides what is sent");
            }
        }
        self.begin_run(input, events).await;
    }

    async fn begin_run(&mut self, input: RunAgentInput, events: RunChannel) {
        let span = tracing::info_span!(parent: &self.span, "run", run_id = %input.run_id);
        self.begin_run_in(input, events, span.clone())
            .instrument(span)
            .await;
    }

    async fn begin_run_in(
        &mut self,
        input: RunAgentInput,
        events: RunChannel,
        span: tracing::Span,
    ) {
        if self.ctx.records.storage_full().await {
            // What the turn does (the agent's record of it included) could not be kept: a
            // client told so sends it again later, rather than losing an answer it saw.
            self.reject(
                &input,
                events,
                RunFailure::new(
                    RunErrorCode::StorageFull,
                    "The server's storage is full, so nothing done now could be kept; your message was not sent. Try again in a moment.",
                ),
            );
            return;
        }
        let mut forked = None;
        let mut rewound = None;
        if let Some(branch) = requested_branch(&input)
            && let Err(failure) = self.switch_for_run(&branch).await
        {
            self.reject(&input, events, failure);
            return;
        }
        let divergence = match self.divergence(&input) {
            Ok(divergence) => divergence,
            Err(failure) => {
                self.reject(&input, events, failure);
                return;
            }
        };
        if let Some(divergence) = divergence {
            match self.fork(&divergence, &input).await {
                Ok(fork) => {
                    forked = Some(fork.prompt);
                    rewound = fork.rewound;
                }
                Err(failure) => {
                    self.reject(&input, events, failure);
                    return;
                }
            }
        }
        self.link
            .shared
            .adopt(input.state.as_ref(), input.context.clone());
        let deduplicate = self.ctx.options.deduplicate_tool_calls;
        let forwarded = &self.record.forwarded;
        let applied = answers::apply(
            &mut self.parking,
            &input,
            &self.record.pending_frontend_tools,
            |id| forwarded.contains(id),
            deduplicate,
        );
        // A call left pending by an earlier server gets one result: once answered it is
        // forgotten, so a second message for it (from a rebuilt history) is not delivered again.
        self.record
            .pending_frontend_tools
            .retain(|p| !applied.answered_calls.contains(&p.tool_call_id));
        let limits = PromptLimits {
            max_attachment_bytes: self.ctx.options.max_attachment_bytes,
        };
        let mut prompt = forked.or_else(|| {
            prompt::newest_unforwarded_with(
                &input.messages,
                |id| self.record.forwarded.contains(id),
                &limits,
            )
        });
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
        if prompt.is_some() && applied.resolved == 0 && applied.late_results.is_empty() {
            // A new message instead of an answer: a call an earlier server left pending is
            // given up with the parked ones.
            self.record.pending_frontend_tools.clear();
        }
        let mut released = applied.resolved;
        if prompt.is_some() && applied.resolved == 0 {
            let abandoned = self.parking.abandon_all();
            if abandoned > 0 {
                tracing::info!(
                    abandoned,
                    "new user message while requests were parked; abandoning them"
                );
            }
            released += abandoned;
        }
        if released > 0
            && let Some(turn) = self.conversation.turn_mut()
        {
            // The turn waited for the client, which the stall timeout does not count: its
            // clock starts again now that the harness has something to go on with.
            turn.progressed();
        }
        let turn_in_flight = self.conversation.turn().is_some();
        let client_missed = !self.output.client_is_current(&input.messages);
        self.output.log_mut().merge(&input.messages);
        // A run that continues an earlier turn restates the thread first only when its stream
        // may carry the result of a call an earlier run started (the official client wants the
        // call in the same stream as its result): a call still unanswered once the client's
        // answers are in. A client that missed part of the thread is restated too; one that
        // only missed what happened while nobody watched gets those events as they came.
        let carries_earlier_results = turn_in_flight
            && applied.resolved > 0
            && !self.output.log_mut().unanswered_tool_calls().is_empty();
        let restate = if carries_earlier_results || client_missed {
            Restate::Messages
        } else {
            Restate::Nothing
        };
        let usage = self.usage.clone();
        let sender = events.sender().clone();
        if !self.output.subscribe(&input.run_id, events, usage, restate) {
            tracing::info!("the client left before the run started");
        }
        if let Some(report) = rewound {
            self.output.emit(super::fork::rewind_event(report));
        }
        if let Some(Owed::NextRun(failure)) = self.owed.take_if(|o| matches!(o, Owed::NextRun(_))) {
            // What went wrong while nobody watched is said first; the new message waits for
            // the next run.
            self.finish(Err(failure)).await;
            return;
        }
        let contract = Contract::new(&input.tools, &self.ctx.options, &self.ctx.tools);
        let bare = prompt.is_none() && applied.resolved == 0;
        self.run = Some(ActiveRun {
            run_id: input.run_id.clone(),
            span,
            events: sender,
            prompt,
            consumed: applied.consumed,
            contract,
            bare,
        });
    }

    /// A connect: the thread restated on `events` — its messages, its state, the blocks still
    /// open — then its live turn, if any, to the end; parked, it ends as the run that parked it
    /// did; idle, at once. A thread read back from its record has its messages in the harness:
    /// the connect waits for the conversation to open (a child does it; the thread answers
    /// everything else meanwhile).
    pub(super) async fn connect(
        &mut self,
        input: RunAgentInput,
        events: mpsc::Sender<Event>,
        owner: Owner,
    ) {
        let version = negotiate(input.protocol_version.as_deref(), &self.id, &input.run_id);
        let events = RunChannel::new(events, version);
        if let Err(failure) = self.admit(&owner) {
            self.reject(&input, events, failure);
            return;
        }
        if self.harnessed == Harnessed::KnownUnread {
            let contract = Contract::new(&input.tools, &self.ctx.options, &self.ctx.tools);
            match self.conversation_ready(&contract).await {
                Readiness::Ready => {}
                Readiness::Pending => {
                    self.history_waiters.push(WaitingConnect { input, events });
                    return;
                }
                Readiness::Failed(failure) => {
                    self.reject(&input, events, failure);
                    return;
                }
            }
        }
        self.serve_connect(input, events);
    }

    /// Restates the thread on a connect's stream and follows its live turn, if any.
    pub(super) fn serve_connect(&mut self, input: RunAgentInput, events: RunChannel) {
        let usage = self.usage.clone();
        self.output
            .subscribe(&input.run_id, events, usage, Restate::WithState);
        if self.conversation.turn().is_some() {
            if self.parking.is_parked() && self.waits_for_client() {
                let outcome = self.parked_outcome();
                self.finish_one(&input.run_id, Terminal::Finished(outcome));
            }
            // Otherwise it follows the turn and ends with it.
            return;
        }
        self.finish_one(&input.run_id, Terminal::Finished(None));
    }

    /// Stops what the thread is doing for its runs: the turn in flight (the harness is asked
    /// to halt, what is parked is released, and every subscribed run ends cancelled once the
    /// harness has stopped); a run whose message waits for the conversation to open (the
    /// message is not sent, the run ends cancelled, and the opening is abandoned unless a
    /// connect waits for it); runs waiting for the lease. False when there was nothing to stop.
    pub(super) fn stop(&mut self) -> bool {
        let mut stopped = self.cancel_runs_awaiting_lease();
        if self.conversation.turn().is_some() {
            tracing::info!("stopping the turn");
            if let Some(run) = self.run.as_mut() {
                run.prompt = None;
            }
            self.parking.close_all();
            self.owe_watchers(Verdict::Stopped);
            self.halt();
            return true;
        }
        if let Some(run) = self.run.as_mut()
            && let Some(prompt) = run.prompt.take()
        {
            tracing::info!(message_id = %prompt.message_id, "stopping a run whose message waited for the conversation; it is not sent");
            self.owe_watchers(Verdict::Stopped);
            if self.history_waiters.is_empty()
                && matches!(self.conversation, Conversation::Opening(_))
            {
                let how = self.let_go_how();
                self.conversation.abandon_opening(how);
            }
            stopped = true;
        }
        stopped
    }

    /// Ends or advances the run in flight after anything happened; a run that waited for the
    /// thread and starts here is advanced too.
    pub(super) async fn settle(&mut self) {
        while self.settle_once().await {}
    }

    /// One step of [`Self::settle`]; true when a waiting run started and needs its own step.
    async fn settle_once(&mut self) -> bool {
        self.handle_detached();
        if self.run.is_none() && !self.output.has_subscribers() {
            // Nobody watches: what was owed to watchers goes with them.
            if matches!(self.owed, Some(Owed::Watchers(_))) {
                self.owed = None;
            }
            return self.start_waiting().await;
        }
        if self.conversation.turn().is_none() {
            // With no turn in flight, a stop (or a failure) owed to the watchers is said now;
            // else the run's message goes, or the run is done.
            let owes_watchers = matches!(self.owed, Some(Owed::Watchers(_)));
            if !owes_watchers && self.run.as_ref().is_some_and(|r| r.prompt.is_some()) {
                self.begin_prompt().await;
                if self.run.as_ref().is_some_and(|r| r.prompt.is_some()) {
                    // Its conversation is being opened.
                    return false;
                }
            } else {
                self.finish(Ok(Ending::Finished)).await;
            }
            return self.start_waiting().await;
        }
        if self.is_halting() || !self.parking.is_parked() {
            return false;
        }
        if self.run.as_ref().is_some_and(|r| r.bare) {
            // Nothing answered and nothing new: say again what is waiting.
            self.finish(Ok(Ending::Parked)).await;
            return self.start_waiting().await;
        }
        // Everything the harness sent before the callback that parked is queued: take it all,
        // then end if the harness can do nothing more without the client.
        self.drain_harness().await;
        if self.conversation.turn().is_some() && self.settled() {
            self.finish(Ok(Ending::Parked)).await;
            return self.start_waiting().await;
        }
        false
    }

    /// Subscribers that left or fell behind: with `on_disconnect = cancel`, the last one
    /// leaving stops the turn.
    fn handle_detached(&mut self) {
        let detached = self.output.take_detached();
        if detached.is_empty()
            || self.output.has_subscribers()
            || self.ctx.options.on_disconnect != crate::choices::OnDisconnect::Cancel
        {
            return;
        }
        let left = detached
            .iter()
            .any(|(_, why)| *why == super::super::output::Detach::Left);
        if left && self.conversation.turn().is_some() && !self.is_halting() {
            tracing::info!("the client left and on_disconnect = cancel: stopping the turn");
            self.stop();
        }
    }

    /// Serves the next run that waited for this thread; true when one started.
    async fn start_waiting(&mut self) -> bool {
        while self.run.is_none()
            && !self.output.has_subscribers()
            && let Some(waiting) = self.waiting.pop_front()
        {
            if waiting.events.is_closed() {
                continue;
            }
            self.begin_run(waiting.input, waiting.events).await;
            return true;
        }
        false
    }

    /// Sends the active run's prompt, opening (or resuming) the conversation first.
    pub(super) async fn begin_prompt(&mut self) {
        let Some(contract) = self.run.as_ref().map(|r| r.contract.clone()) else {
            return;
        };
        match self.conversation_ready(&contract).await {
            Readiness::Ready => {}
            Readiness::Pending => return,
            Readiness::Failed(failure) => {
                self.finish(Err(failure)).await;
                return;
            }
        }
        let Some((mut prompt, consumed)) = self.run.as_mut().and_then(|r| {
            r.prompt
                .take()
                .map(|p| (p, std::mem::take(&mut r.consumed)))
        }) else {
            return;
        };
        self.save_uploads(&mut prompt).await;
        self.parking.new_turn();
        self.start_turn();
        let Some(open) = self.conversation.as_open() else {
            return;
        };
        if let Err(e) = open.handle.send(prompt.input).await {
            open.turn = None;
            self.finish(Err(RunFailure::new(
                RunErrorCode::HarnessLost,
                "Could not send the message to the harness.",
            )
            .with_detail(e)))
                .await;
            return;
        }
        tracing::info!(message_id = %prompt.message_id, "user message sent");
        self.start_disk_watch();
        if self.harnessed == Harnessed::New {
            self.harnessed = Harnessed::Known;
        }
        self.record.forwarded.record(prompt.message_id.clone());
        if let Some(digest) = prompt.digest.take() {
            self.record.sent.record(prompt.message_id.clone(), digest);
        }
        for id in consumed {
            self.record.forwarded.record(id);
        }
        self.record.awaiting_echo = Some(prompt.message_id);
        if self.record.title.is_empty() {
            self.record.title = crate::threads::model::title_from(&prompt.text);
        }
        self.persist();
    }

    /// Ends every subscribed run: open blocks close first, then each gets its terminal event.
    pub(super) async fn finish(&mut self, result: Result<Ending, RunFailure>) {
        // What callbacks queued comes first, inside the turn's replies.
        while let Ok(request) = self.requests.try_recv() {
            self.request(request);
        }
        let interrupts = match &result {
            Ok(Ending::Parked) => self.parking.interrupt_owners(),
            _ => Vec::new(),
        };
        if let Some(turn) = self.conversation.turn_mut() {
            for event in turn.close_run(&interrupts) {
                self.output.emit(event);
            }
        }
        let result = match (result, self.take_watchers_verdict()) {
            (_, Some(Verdict::Failed(failure))) => Err(failure),
            (Ok(_), Some(Verdict::Stopped)) => Ok(Ending::Stopped),
            (result, _) => result,
        };
        let terminal = match result {
            Ok(Ending::Finished) => Terminal::Finished(None),
            Ok(Ending::Parked) => Terminal::Finished(self.parked_outcome()),
            Ok(Ending::Stopped) => Terminal::Finished(Some(RunOutcome::Cancelled)),
            Err(failure) => Terminal::Failed(failure),
        };
        let label = self.model_label();
        self.run = None;
        // The run's end waits for the thread's record to reach the volume: a replica that
        // takes the thread over, or this server restarted, then knows what the client was
        // told (its message answered under its id, the turn over).
        let settled = self
            .persist()
            .and_then(|version| self.ctx.records.settled(&self.id, version));
        self.output
            .finish_all(&terminal, self.usage.as_ref(), &label, settled);
    }

    /// Ends one subscriber's run alone (a connect that has nothing live to follow).
    pub(super) fn finish_one(&mut self, run_id: &str, terminal: Terminal) {
        let label = self.model_label();
        self.output
            .finish_one(run_id, &terminal, self.usage.as_ref(), &label);
    }

    /// Refuses a run: `RUN_STARTED` (unless sent already) then `RUN_ERROR`.
    pub(super) fn reject(
        &mut self,
        input: &RunAgentInput,
        events: RunChannel,
        failure: RunFailure,
    ) {
        self.output
            .subscribe(&input.run_id, events, None, Restate::Nothing);
        self.finish_one(&input.run_id, Terminal::Failed(failure));
    }

    /// The outcome of a run that ends with something waiting for the client.
    fn parked_outcome(&mut self) -> Option<RunOutcome> {
        let interrupts = self.parking.interrupts();
        if !interrupts.is_empty() {
            return Some(RunOutcome::Interrupt { interrupts });
        }
        let pending: Vec<String> = self
            .parking
            .pending_tool_calls()
            .into_iter()
            .map(|p| p.tool_call_id)
            .collect();
        (!pending.is_empty()).then_some(RunOutcome::Success {
            pending_tool_call_ids: pending,
        })
    }

    /// Whether the turn waits only for the client. If so, the frontend calls of the parked
    /// replies that the harness has not called back for yet are announced (it asks for a
    /// reply's calls one at a time), so the client answers them together.
    /// While a parked frontend call whose callback came before its step waits for that step
    /// (see [`crate::activity`]): when the last such wait ends. `None` also for a source whose
    /// callbacks need not follow their steps (the fake harness, unless a test says they do).
    pub(super) fn call_steps_awaited(&self) -> Option<Instant> {
        let open = self.conversation.as_open_ref()?;
        if !open.handle.steps_precede_callbacks() {
            return None;
        }
        open.turn
            .as_ref()?
            .activity()
            .call_steps_awaited(self.parking.called_back_ids(), Instant::now())
    }

    fn settled(&mut self) -> bool {
        let blocked = self.parking.blocked();
        let Some(turn) = self.conversation.turn() else {
            return !blocked.is_empty();
        };
        if !turn.activity().settled(&blocked) || self.call_steps_awaited().is_some() {
            return false;
        }
        let frontend: Vec<String> = self
            .run
            .as_ref()
            .map(|r| r.contract.frontend.iter().map(|t| t.name.clone()).collect())
            .unwrap_or_default();
        let open_calls: Vec<(String, crate::activity::HostCall)> = turn
            .activity()
            .open_calls_in(&blocked)
            .filter(|(_, call)| frontend.contains(&call.name))
            .map(|(trajectory, call)| (trajectory.to_owned(), call.clone()))
            .collect();
        let deduplicate = self.ctx.options.deduplicate_tool_calls;
        for (trajectory, call) in open_calls {
            let link = &self.link;
            let request = CallRequest {
                harness_id: &call.harness_id,
                name: &call.name,
                arguments: &call.arguments,
                trajectory: &trajectory,
            };
            if let Some(id) =
                self.parking
                    .announce(request, || link.tool_call_id(&call.harness_id), deduplicate)
            {
                tracing::debug!(tool = %call.name, tool_call_id = %id, "frontend tool announced ahead of its callback");
                let events =
                    super::super::callbacks::tool_call_events(&id, &call.name, &call.arguments);
                self.emit_in(Some(&trajectory), events.into());
            }
        }
        true
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
            text: String::new(),
            uploads: Vec::new(),
            digest: None,
        },
    }
}

/// The branch a run asks to continue (`forwardedProps.branch`), if any.
fn requested_branch(input: &RunAgentInput) -> Option<String> {
    input
        .forwarded_props
        .as_ref()?
        .get("branch")?
        .as_str()
        .filter(|b| !b.is_empty())
        .map(str::to_owned)
}
