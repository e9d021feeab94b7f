//! The tasks that own an initialized socket: the writer sends queued frames (and the close
//! frame); the reader turns harness frames into [`ConversationEvent`]s, tracks turn ends, hands
//! requests to the [`Dispatcher`], and decides why the link ended — the harness closed it, the
//! process died (its exit can lag the socket by milliseconds) or the host is shutting down.

use parking_lot::Mutex;
use std::sync::Arc;
use std::time::Duration;

use futures_util::stream::{SplitSink, SplitStream};
use futures_util::{SinkExt as _, StreamExt as _};
use harness_proto::lh::{OutputEvent, output_event};
use harness_proto::step::{Step, StepStatus};
use tokio::net::TcpStream;
use tokio::sync::mpsc;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::{MaybeTlsStream, WebSocketStream};
use tracing::Instrument as _;

use super::dispatch::Dispatcher;
use super::{FrameDirection, FrameTap, Link, Outbound, observe};
use crate::callbacks::Callbacks;
use crate::events::{CloseReason, ConversationEvent, TrajectoryState, Usage};
use crate::process::{HarnessProcess, LiveGuard};
use crate::turn_end::{HeldEnd, TurnSignal, TurnTracker, is_system_message};

pub(super) type Socket = WebSocketStream<MaybeTlsStream<TcpStream>>;

/// Starts the reader and writer of an initialized socket.
pub(super) fn start(
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
        _live: process.count_live(),
        writer,
        process: process.clone(),
        dispatcher: Dispatcher::new(conversation_id, callbacks, outbound_tx.clone()),
        outbound: outbound_tx.clone(),
        events: events_tx,
        closed: closed.clone(),
        tracker: tracker.clone(),
        held_end: HeldEnd::default(),
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
    mut sink: SplitSink<Socket, Message>,
    mut outbound: mpsc::UnboundedReceiver<Outbound>,
    tap: Option<FrameTap>,
) {
    while let Some(item) = outbound.recv().await {
        match item {
            Outbound::Event(event, ack) => {
                let text = harness_proto::to_json(&event);
                observe(tap.as_ref(), FrameDirection::ToHarness, &text);
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
    dispatcher: Dispatcher,
    outbound: mpsc::UnboundedSender<Outbound>,
    events: mpsc::UnboundedSender<ConversationEvent>,
    closed: Arc<Mutex<Option<CloseReason>>>,
    tracker: Arc<Mutex<TurnTracker>>,
    /// An idle root the harness is expected to wake again: the turn's end, sent at the deadline
    /// unless the root runs first.
    held_end: HeldEnd,
    tap: Option<FrameTap>,
}

impl Reader {
    async fn run(mut self, mut stream: SplitStream<Socket>) {
        let mut exit = self.process.exit_watch();
        let mut closing = self.process.closing_watch();
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
                            turn_error: self.tracker.lock().last_error(),
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
                () = held_deadline(self.held_end.deadline()), if self.held_end.deadline().is_some() => {
                    tracing::debug!("the root was not woken again; the turn is over");
                    self.release_held_end();
                }
            }
        };
        // The turn did end at that idle: its end precedes the connection's.
        self.release_held_end();
        tracing::debug!(%reason, "conversation connection ended");
        *self.closed.lock() = Some(reason.clone());
        let _ = self.events.send(ConversationEvent::Closed(reason.clone()));
        self.dispatcher.abort_all();
        if reason == CloseReason::ClosedByHost {
            // The writer ends once it has sent the close frame queued above.
            let _ = tokio::time::timeout(Duration::from_secs(2), &mut self.writer).await;
        }
    }

    /// A broken socket: report the process's death if that is the cause (its exit status can
    /// lag the socket by a few milliseconds).
    async fn lost(&self, error: String) -> CloseReason {
        let mut exit = self.process.exit_watch();
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
        observe(self.tap.as_ref(), FrameDirection::FromHarness, text);
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
                if is_system_message(&step) {
                    self.tracker.lock().on_step(&step);
                }
                // The step reaches the event stream before its callback starts, so a host that
                // sees the callback park has every event that preceded it queued.
                let waiting = (step.status == StepStatus::WaitingForUser).then(|| step.clone());
                self.emit(ConversationEvent::Step(step));
                if let Some(step) = waiting {
                    self.dispatcher.waiting_step(&step);
                }
            }
            Some(Event::TrajectoryStateUpdate(update)) => {
                let state = TrajectoryState::from(&update);
                let signal = self.tracker.lock().on_trajectory(&state);
                self.emit(ConversationEvent::Trajectory(state));
                if let Some(signal) = signal {
                    match &signal {
                        TurnSignal::IdleAwaitingWake { within, .. } => tracing::debug!(
                            within_ms = within.as_millis() as u64,
                            "the root is idle, but a subagent's idle message is to wake it again"
                        ),
                        TurnSignal::Running if self.held_end.deadline().is_some() => {
                            tracing::debug!("the harness woke the root again; the turn goes on");
                        }
                        _ => {}
                    }
                    if let Some(end) = self.held_end.on_signal(signal, tokio::time::Instant::now())
                    {
                        self.emit(ConversationEvent::TurnEnded(end));
                    }
                }
            }
            Some(Event::UsageUpdate(update)) => {
                self.emit(ConversationEvent::Usage(Usage::from(&update)))
            }
            Some(Event::ToolCall(call)) => self.dispatcher.tool_call(&call),
            Some(Event::CallHookRequest(request)) => self.dispatcher.hook(request),
            Some(Event::PolicyDecisionRequest(request)) => self.dispatcher.policy(request),
            Some(Event::SessionEndResponse(_)) => tracing::debug!("session end acknowledged"),
            Some(Event::InitializeConversationResponse(_)) => {
                tracing::warn!("ignoring a second init response")
            }
            None => tracing::warn!(frame = %text, "ignoring a harness frame with no known event"),
        }
    }

    /// Sends the held end of the turn, if any.
    fn release_held_end(&mut self) {
        if let Some(mut end) = self.held_end.release() {
            end.halted |= self.tracker.lock().take_halted();
            self.emit(ConversationEvent::TurnEnded(end));
        }
    }

    fn emit(&self, event: ConversationEvent) {
        // The receiver may be gone (the conversation was dropped); callbacks still get answered.
        let _ = self.events.send(event);
    }
}

/// Completes at the held end's deadline (never without one: the branch is disabled then).
async fn held_deadline(deadline: Option<tokio::time::Instant>) {
    match deadline {
        Some(deadline) => tokio::time::sleep_until(deadline).await,
        None => std::future::pending().await,
    }
}
