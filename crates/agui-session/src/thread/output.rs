//! Where a thread's events go: to every subscribed run stream, and into the thread's message
//! log and open-block record (what a stream joining later is restated from).
//!
//! A run is a subscription: it gets `RUN_STARTED`, then the thread's events from the moment it
//! subscribed, then its own terminal event. Each subscriber has a bounded buffer; one that
//! falls behind by more than it holds is detached (its stream ends, truncated, as when the
//! client leaves) while the thread goes on — a later run or connect restates what it missed.
//!
//! While no stream is attached, the events are also kept (a backlog, bounded like a buffer):
//! the next run whose client holds everything from before them gets them as they were — a
//! turn the harness went on with, a frontend call made meanwhile, which the client must see
//! as events to run it. A client that missed more, or a backlog that overflowed, gets the
//! thread restated as a snapshot instead.

use std::future::Future;
use std::sync::Arc;

use agui_types::{Event, MessageLog, OpenBlocks, RunOutcome, TokenUsage};
use harness_proto::lh::UsageMetadata;
use tokio::sync::mpsc;
use tokio::sync::mpsc::error::TrySendError;
use tracing::Instrument as _;

use super::shared::Shared;
use crate::error::RunFailure;

/// One run stream.
pub(crate) struct Subscriber {
    /// The run id its `RUN_STARTED` and terminal event carry.
    pub(crate) run_id: String,
    tx: mpsc::Sender<Event>,
    /// The conversation's cumulative usage when it subscribed (its terminal event reports
    /// what was spent since).
    usage_start: Option<UsageMetadata>,
    started: std::time::Instant,
    /// The stream is declared as AG-UI 1.0: what 1.1 added is dropped from its events.
    downgraded: bool,
    #[cfg(debug_assertions)]
    verifier: agui_types::StreamVerifier,
}

/// A run's event channel as a subscription starts: where its events go, the protocol version
/// it speaks, and whether its `RUN_STARTED` is already on it.
pub(crate) struct RunChannel {
    tx: mpsc::Sender<Event>,
    protocol_version: &'static str,
    started_sent: bool,
}

impl RunChannel {
    /// A channel whose `RUN_STARTED` is sent when it subscribes (a connect).
    pub(crate) fn new(tx: mpsc::Sender<Event>, protocol_version: &'static str) -> Self {
        Self {
            tx,
            protocol_version,
            started_sent: false,
        }
    }

    /// Sends the run's `RUN_STARTED` now, before the thread's task takes the run: the client
    /// sees its run accepted at once, whatever the thread is doing meanwhile (loading its
    /// record, serving another run).
    pub(crate) fn announce(
        tx: mpsc::Sender<Event>,
        thread_id: &str,
        run_id: &str,
        protocol_version: &'static str,
    ) -> Self {
        // A fresh channel has room (its capacity is at least one); a client already gone
        // is noticed when the run subscribes.
        let _ = tx.try_send(run_started(thread_id, run_id, protocol_version));
        Self {
            tx,
            protocol_version,
            started_sent: true,
        }
    }

    /// The channel's sender.
    pub(crate) fn sender(&self) -> &mpsc::Sender<Event> {
        &self.tx
    }

    /// Whether the client is gone.
    pub(crate) fn is_closed(&self) -> bool {
        self.tx.is_closed()
    }
}

/// The `RUN_STARTED` of a run, declaring the protocol version its stream speaks.
fn run_started(thread_id: &str, run_id: &str, protocol_version: &str) -> Event {
    let mut started = agui_types::RunStarted::new(thread_id, run_id);
    started.protocol_version = Some(protocol_version.to_owned());
    Event::RunStarted(started)
}

/// The protocol version a run's stream speaks for the client's declared one (our own, or 1.0
/// for a 1.0 client: nothing but `encryptedValueType` differs); a client declaring a newer or
/// unreadable version is served, and the developer warned, as the versioning rules ask.
pub(crate) fn negotiate(version: Option<&str>, thread_id: &str, run_id: &str) -> &'static str {
    let negotiated = agui_types::negotiate(version);
    if let Some(warning) = negotiated.warning {
        tracing::warn!(
            thread_id,
            run_id,
            version,
            ours = agui_types::PROTOCOL_VERSION,
            "{warning}"
        );
    }
    negotiated.speaks
}

/// How a subscriber's run ends.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Terminal {
    /// `RUN_FINISHED`, with this outcome (none: success).
    Finished(Option<RunOutcome>),
    /// `RUN_ERROR`.
    Failed(RunFailure),
}

/// Why a subscriber was dropped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Detach {
    /// Its client went away.
    Left,
    /// It fell behind by more than its buffer.
    FellBehind,
}

/// The subscribers, the message log and the open blocks of one thread.
pub(crate) struct Output {
    thread_id: String,
    subscribers: Vec<Subscriber>,
    log: MessageLog,
    open: OpenBlocks,
    shared: Arc<Shared>,
    /// Subscribers dropped since the last call to [`Output::take_detached`].
    detached: Vec<(String, Detach)>,
    /// The events sent while no stream was attached.
    backlog: Option<Backlog>,
    /// Most events a backlog keeps (beyond it, the next run gets a snapshot).
    backlog_limit: usize,
}

/// Events emitted while no run stream was attached.
struct Backlog {
    /// The messages before them: a client holding these can take the events as they came.
    before: MessageLog,
    /// The start events of the blocks open when the backlog began, then the events; `None`
    /// once the limit was passed.
    events: Option<Vec<Event>>,
}

impl Output {
    pub(crate) fn new(thread_id: String, shared: Arc<Shared>, backlog_limit: usize) -> Self {
        Self {
            thread_id,
            subscribers: Vec::new(),
            log: MessageLog::new(),
            open: OpenBlocks::new(),
            shared,
            detached: Vec::new(),
            backlog: None,
            backlog_limit,
        }
    }

    /// Whether events happened while no client watched (kept for the next one).
    pub(crate) fn has_backlog(&self) -> bool {
        self.backlog.is_some()
    }

    /// Whether a client holding `messages` can take the backlog as events (it holds every
    /// message from before it, apart from client-only ones). With no backlog: whether it holds
    /// every message of the log.
    pub(crate) fn client_is_current(&self, messages: &[agui_types::Message]) -> bool {
        let reference = match &self.backlog {
            Some(Backlog {
                before,
                events: Some(_),
            }) => before,
            Some(Backlog { events: None, .. }) => return false,
            None => &self.log,
        };
        reference.messages().iter().all(|m| {
            matches!(
                m,
                agui_types::Message::Activity(_) | agui_types::Message::Reasoning(_)
            ) || messages.iter().any(|c| c.id() == m.id())
        })
    }

    /// Makes `history` (the harness's record of the conversation, rebuilt when the thread is
    /// read back) the thread's messages: it owns their order and content. What clients sent
    /// since the thread was read back and the history lacks (a message not sent yet) is merged
    /// in where the client put it.
    pub(crate) fn adopt_history(&mut self, mut history: MessageLog) {
        history.merge(self.log.messages());
        self.log = history;
    }

    /// The thread's messages, to merge a client's list into.
    pub(crate) fn log_mut(&mut self) -> &mut MessageLog {
        &mut self.log
    }

    /// Whether any run stream is attached.
    pub(crate) fn has_subscribers(&self) -> bool {
        !self.subscribers.is_empty()
    }

    /// Whether the subscriber of `run_id` is attached.
    pub(crate) fn is_attached(&self, run_id: &str) -> bool {
        self.subscribers.iter().any(|s| s.run_id == run_id)
    }

    /// Subscribers dropped since the last call, with why.
    pub(crate) fn take_detached(&mut self) -> Vec<(String, Detach)> {
        std::mem::take(&mut self.detached)
    }

    /// Starts a run stream: `RUN_STARTED` (unless the channel has it already), then, when
    /// `restate`, the thread as it stands — a `MESSAGES_SNAPSHOT`, the shared state when
    /// `with_state`, and the start events of the blocks still open — so the thread's later
    /// events are valid on it. Returns false if the client is already gone.
    pub(crate) fn subscribe(
        &mut self,
        run_id: &str,
        channel: RunChannel,
        usage_start: Option<UsageMetadata>,
        restate: Restate,
    ) -> bool {
        let mut subscriber = Subscriber {
            run_id: run_id.to_owned(),
            tx: channel.tx,
            usage_start,
            started: std::time::Instant::now(),
            downgraded: channel.protocol_version == agui_types::PROTOCOL_VERSION_1_0,
            #[cfg(debug_assertions)]
            verifier: agui_types::StreamVerifier::new(),
        };
        let mut first = Vec::new();
        if !channel.started_sent {
            first.push(run_started(
                &self.thread_id,
                run_id,
                channel.protocol_version,
            ));
        }
        // The verifier checks the stream as the client sees it, which starts with it.
        #[cfg(debug_assertions)]
        if channel.started_sent
            && let Err(violation) = subscriber.verifier.check(&run_started(
                &self.thread_id,
                run_id,
                channel.protocol_version,
            ))
        {
            tracing::error!(run_id, %violation, "a run's RUN_STARTED was rejected");
        }
        let backlog = self.backlog.take();
        if restate != Restate::Nothing {
            first.push(self.log.snapshot());
            if restate == Restate::WithState {
                first.push(Event::state_snapshot(self.shared.state()));
                self.shared.delivered();
            }
            first.extend(self.open.reopen());
        } else if let Some(Backlog {
            events: Some(events),
            ..
        }) = backlog
        {
            if events.iter().any(|e| matches!(e, Event::StateSnapshot(_))) {
                self.shared.delivered();
            }
            first.extend(events);
        }
        for event in first {
            if send(&mut subscriber, event).is_err() {
                return false;
            }
        }
        self.subscribers.push(subscriber);
        true
    }

    /// Sends an event to every subscriber and records it. A subscriber whose client left or
    /// whose buffer is full is dropped.
    pub(crate) fn emit(&mut self, event: Event) {
        if self.subscribers.is_empty() {
            self.keep(&event);
        }
        self.log.apply(&event);
        self.open.apply(&event);
        if matches!(event, Event::StateSnapshot(_)) && !self.subscribers.is_empty() {
            self.shared.delivered();
        }
        let mut i = 0;
        while i < self.subscribers.len() {
            match send(&mut self.subscribers[i], event.clone()) {
                Ok(()) => i += 1,
                Err(why) => {
                    let gone = self.subscribers.remove(i);
                    match why {
                        Detach::Left => {
                            tracing::info!(run_id = %gone.run_id, "the client went away; the thread goes on without it")
                        }
                        Detach::FellBehind => {
                            tracing::warn!(run_id = %gone.run_id, "a client fell behind by more than its buffer; detaching it (its stream ends; the thread goes on)")
                        }
                    }
                    self.detached.push((gone.run_id, why));
                }
            }
        }
    }

    /// Keeps an event sent while no stream is attached.
    fn keep(&mut self, event: &Event) {
        let backlog = self.backlog.get_or_insert_with(|| Backlog {
            before: self.log.clone(),
            events: Some(self.open.reopen()),
        });
        if let Some(events) = &mut backlog.events {
            if events.len() >= self.backlog_limit {
                tracing::debug!(
                    "the backlog of a thread nobody watches overflowed; the next run gets a snapshot"
                );
                backlog.events = None;
            } else {
                events.push(event.clone());
            }
        }
    }

    /// Drops subscribers whose client is gone, without sending anything.
    pub(crate) fn prune(&mut self) {
        let (kept, gone): (Vec<_>, Vec<_>) = std::mem::take(&mut self.subscribers)
            .into_iter()
            .partition(|s| !s.tx.is_closed());
        self.subscribers = kept;
        for subscriber in gone {
            tracing::info!(run_id = %subscriber.run_id, "the client went away; the thread goes on without it");
            self.detached.push((subscriber.run_id, Detach::Left));
        }
    }

    /// Ends every subscribed run with `terminal` (usage: what the conversation spent since each
    /// subscribed, given its cumulative usage `now`), once `settled` resolves if given: the
    /// terminal events wait in a task of their own, never holding the thread's task up.
    pub(crate) fn finish_all(
        &mut self,
        terminal: &Terminal,
        now: Option<&UsageMetadata>,
        model: &ModelLabel,
        settled: Option<impl Future<Output = ()> + Send + 'static>,
    ) {
        let subscribers = std::mem::take(&mut self.subscribers);
        self.open = OpenBlocks::new();
        let Some(settled) = settled.filter(|_| !subscribers.is_empty()) else {
            for subscriber in subscribers {
                self.finish(subscriber, terminal, now, model);
            }
            return;
        };
        let ends: Vec<(Subscriber, Event)> = subscribers
            .into_iter()
            .map(|subscriber| {
                let event = self.terminal_event(&subscriber, terminal, now, model);
                (subscriber, event)
            })
            .collect();
        tracing::debug!("the run's end waits for the thread's record to be written");
        tokio::spawn(
            async move {
                settled.await;
                for (mut subscriber, event) in ends {
                    let _ = send(&mut subscriber, event);
                }
            }
            .in_current_span(),
        );
    }

    /// Ends the run of `run_id` alone with `terminal`.
    pub(crate) fn finish_one(
        &mut self,
        run_id: &str,
        terminal: &Terminal,
        now: Option<&UsageMetadata>,
        model: &ModelLabel,
    ) {
        if let Some(i) = self.subscribers.iter().position(|s| s.run_id == run_id) {
            let subscriber = self.subscribers.remove(i);
            self.finish(subscriber, terminal, now, model);
        }
    }

    fn finish(
        &self,
        mut subscriber: Subscriber,
        terminal: &Terminal,
        now: Option<&UsageMetadata>,
        model: &ModelLabel,
    ) {
        let event = self.terminal_event(&subscriber, terminal, now, model);
        let _ = send(&mut subscriber, event);
    }

    /// The event that ends `subscriber`'s run with `terminal`.
    fn terminal_event(
        &self,
        subscriber: &Subscriber,
        terminal: &Terminal,
        now: Option<&UsageMetadata>,
        model: &ModelLabel,
    ) -> Event {
        let usage = usage_since(subscriber.usage_start.as_ref(), now, model);
        let event = match terminal {
            Terminal::Finished(outcome) => {
                let mut finished =
                    agui_types::RunFinished::new(&self.thread_id, &subscriber.run_id);
                finished.outcome = outcome.clone();
                finished.usage = usage;
                Event::RunFinished(finished)
            }
            Terminal::Failed(failure) => {
                // A failure's detail goes to the log only, under a reference its message names.
                let elapsed_ms =
                    u64::try_from(subscriber.started.elapsed().as_millis()).unwrap_or(u64::MAX);
                let failure = failure.clone().published(elapsed_ms);
                agui_types::RunError {
                    message: failure.message,
                    code: Some(failure.code.as_str().to_owned()),
                    usage,
                    ..Default::default()
                }
                .into()
            }
        };
        if matches!(event, Event::RunFinished(_)) {
            tracing::info!(run_id = %subscriber.run_id, "run finished");
        }
        event
    }
}

/// What a new subscriber is told about the thread before its live events.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Restate {
    /// Nothing: the client holds the thread as it stands.
    Nothing,
    /// The messages (and the blocks still open).
    Messages,
    /// The messages, the shared state and the open blocks (connect).
    WithState,
}

/// The provider and model a run's usage is reported under.
#[derive(Debug, Clone)]
pub(crate) struct ModelLabel {
    pub(crate) provider: Option<String>,
    pub(crate) model: String,
}

fn send(subscriber: &mut Subscriber, mut event: Event) -> Result<(), Detach> {
    if subscriber.downgraded && event.downgrade_to_1_0() {
        // A lossy downgrade must be reported to the developer (`basic/versioning.mdx`).
        tracing::warn!(run_id = %subscriber.run_id, "the client speaks AG-UI 1.0: encryptedValueType (1.1) was left out of an event");
    }
    #[cfg(debug_assertions)]
    if let Err(violation) = subscriber.verifier.check(&event) {
        tracing::error!(run_id = %subscriber.run_id, %violation, "this run emitted an event the AG-UI client would reject");
    }
    match subscriber.tx.try_send(event) {
        Ok(()) => Ok(()),
        Err(TrySendError::Closed(_)) => Err(Detach::Left),
        Err(TrySendError::Full(_)) => Err(Detach::FellBehind),
    }
}

/// What the conversation spent between `start` and `now` (the harness reports cumulative
/// totals), as one usage entry; none when no usage was reported.
fn usage_since(
    start: Option<&UsageMetadata>,
    now: Option<&UsageMetadata>,
    model: &ModelLabel,
) -> Vec<TokenUsage> {
    let Some(now) = now else {
        return Vec::new();
    };
    let before = start.cloned().unwrap_or_default();
    let delta = |a: Option<u64>, b: Option<u64>| a.unwrap_or(0).saturating_sub(b.unwrap_or(0));
    let output = delta(now.candidates_token_count, before.candidates_token_count);
    let reasoning = delta(now.thoughts_token_count, before.thoughts_token_count);
    vec![TokenUsage {
        provider: model.provider.clone(),
        model: Some(model.model.clone()),
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
