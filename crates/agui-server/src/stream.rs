//! The response body of a run: encoded events, keep-alives, and metrics.

use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use agui_session::RunStream;
use agui_types::{Encoding, Event};
use bytes::Bytes;
use futures_util::Stream;
use tokio::time::{Instant, Interval};

use crate::metrics::Metrics;

/// Streams a run's events in `encoding`, with SSE keep-alive comments while the agent works.
/// Guarantees a terminal event: if the run's task ended without one (it never should), the
/// body ends with a `RUN_ERROR` rather than leaving the client waiting. Generic over the event
/// source only so tests can drive it without an agent.
pub(crate) struct EventBody<S = RunStream> {
    run: S,
    encoding: Encoding,
    /// The keep-alive timer and the bytes it sends (SSE only).
    keep_alive: Option<(Interval, &'static [u8])>,
    metrics: Arc<Metrics>,
    agent: String,
    started: Instant,
    events: usize,
    finished: bool,
}

impl<S> EventBody<S> {
    pub(crate) fn new(
        run: S,
        encoding: Encoding,
        keep_alive: Duration,
        metrics: Arc<Metrics>,
        agent: String,
    ) -> Self {
        let keep_alive = encoding.keep_alive().map(|comment| {
            let mut interval = tokio::time::interval_at(Instant::now() + keep_alive, keep_alive);
            interval.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            (interval, comment)
        });
        Self {
            run,
            encoding,
            keep_alive,
            metrics,
            agent,
            started: Instant::now(),
            events: 0,
            finished: false,
        }
    }

    fn observe(&mut self, event: &Event) {
        self.events += 1;
        if self.events == 2 {
            self.metrics
                .first_event(&self.agent, self.started.elapsed());
        }
        match event {
            Event::RunFinished(_) => {
                self.finished = true;
                self.metrics
                    .run_finished(&self.agent, self.started.elapsed(), None);
            }
            Event::RunError(e) => {
                self.finished = true;
                self.metrics.run_finished(
                    &self.agent,
                    self.started.elapsed(),
                    Some(e.code.as_deref().unwrap_or("UNKNOWN")),
                );
            }
            _ => {}
        }
    }
}

impl<S> Drop for EventBody<S> {
    fn drop(&mut self) {
        // The client left mid-run; the run itself goes on in the session.
        if !self.finished {
            self.metrics.client_left(&self.agent);
        }
    }
}

impl<S: Stream<Item = Event> + Unpin> Stream for EventBody<S> {
    type Item = Result<Bytes, std::convert::Infallible>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = &mut *self;
        if this.finished {
            return Poll::Ready(None);
        }
        match Pin::new(&mut this.run).poll_next(cx) {
            Poll::Ready(Some(event)) => {
                this.observe(&event);
                if let Some((interval, _)) = &mut this.keep_alive {
                    interval.reset();
                }
                Poll::Ready(Some(Ok(this.encoding.encode(&event))))
            }
            Poll::Ready(None) => {
                tracing::error!("a run ended without a terminal event; closing it with RUN_ERROR");
                let event =
                    Event::run_error("The run ended unexpectedly.", Some("AGENT_ERROR".into()));
                this.observe(&event);
                Poll::Ready(Some(Ok(this.encoding.encode(&event))))
            }
            Poll::Pending => {
                if let Some((interval, comment)) = &mut this.keep_alive
                    && interval.poll_tick(cx).is_ready()
                {
                    return Poll::Ready(Some(Ok(Bytes::from_static(comment))));
                }
                Poll::Pending
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use futures_util::StreamExt as _;
    use tokio::sync::mpsc;

    use super::*;

    const KEEP_ALIVE: Duration = Duration::from_secs(15);

    /// A body over events sent on the returned channel, and its metrics.
    fn body(
        encoding: Encoding,
    ) -> (
        EventBody<impl Stream<Item = Event> + Unpin>,
        mpsc::UnboundedSender<Event>,
        Arc<Metrics>,
    ) {
        let metrics = Arc::new(Metrics::new());
        let (body, tx, _) = body_in(encoding, metrics.clone());
        (body, tx, metrics)
    }

    /// A body recording into `metrics`.
    fn body_in(
        encoding: Encoding,
        metrics: Arc<Metrics>,
    ) -> (
        EventBody<impl Stream<Item = Event> + Unpin>,
        mpsc::UnboundedSender<Event>,
        Arc<Metrics>,
    ) {
        let (tx, mut rx) = mpsc::unbounded_channel();
        let events = futures_util::stream::poll_fn(move |cx| rx.poll_recv(cx));
        let body = EventBody::new(events, encoding, KEEP_ALIVE, metrics.clone(), "a".into());
        (body, tx, metrics)
    }

    fn decoded(
        encoding: Encoding,
        chunk: Option<Result<Bytes, std::convert::Infallible>>,
    ) -> Event {
        let Some(Ok(bytes)) = chunk else {
            panic!("an event was expected, got {chunk:?}")
        };
        let mut events = encoding.decode_all(&bytes).expect("an encoded event");
        assert_eq!(events.len(), 1, "one event per chunk");
        events.remove(0)
    }

    #[tokio::test(start_paused = true)]
    async fn silences_get_sse_keep_alives_and_the_terminal_event_ends_the_body() {
        let (mut body, tx, metrics) = body(Encoding::Sse);
        tx.send(Event::run_started("t", "r")).unwrap();
        assert!(matches!(
            decoded(Encoding::Sse, body.next().await),
            Event::RunStarted(_)
        ));
        let quiet_since = Instant::now();
        let chunk = tokio::time::timeout(KEEP_ALIVE * 2, body.next())
            .await
            .expect("a keep-alive within the interval");
        assert_eq!(
            chunk,
            Some(Ok(Bytes::from_static(b": keep-alive\n\n"))),
            "a comment while the agent is quiet"
        );
        assert!(
            quiet_since.elapsed() >= KEEP_ALIVE,
            "not before the interval"
        );
        tx.send(Event::run_finished("t", "r")).unwrap();
        tx.send(Event::text_message_start("late")).unwrap();
        assert!(matches!(
            decoded(Encoding::Sse, body.next().await),
            Event::RunFinished(_)
        ));
        assert_eq!(body.next().await, None, "nothing after the terminal event");
        let text = metrics.render(&[]);
        assert!(text.contains("agui_runs_total{agent=\"a\"} 1"), "{text}");
        assert!(
            text.contains("agui_time_to_first_event_seconds_count{agent=\"a\"} 1"),
            "{text}"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn protobuf_bodies_get_no_keep_alive() {
        let (mut body, tx, _) = body(Encoding::Protobuf);
        tx.send(Event::run_started("t", "r")).unwrap();
        assert!(matches!(
            decoded(Encoding::Protobuf, body.next().await),
            Event::RunStarted(_)
        ));
        // The paused clock jumps to the deadline: an hour of silence produces nothing.
        let silence = tokio::time::timeout(KEEP_ALIVE * 240, body.next()).await;
        assert!(silence.is_err(), "{silence:?}");
    }

    #[tokio::test(start_paused = true)]
    async fn a_run_that_ends_without_a_terminal_event_gets_run_error() {
        let (mut body, tx, metrics) = body(Encoding::Sse);
        tx.send(Event::run_started("t", "r")).unwrap();
        drop(tx);
        assert!(matches!(
            decoded(Encoding::Sse, body.next().await),
            Event::RunStarted(_)
        ));
        let Event::RunError(error) = decoded(Encoding::Sse, body.next().await) else {
            panic!("RUN_ERROR expected")
        };
        assert_eq!(error.code.as_deref(), Some("AGENT_ERROR"));
        assert_eq!(body.next().await, None);
        let text = metrics.render(&[]);
        assert!(
            text.contains("agui_run_errors_total{agent=\"a\",code=\"AGENT_ERROR\"} 1"),
            "{text}"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_client_that_leaves_mid_run_is_counted() {
        let (mut body, tx, metrics) = body(Encoding::Sse);
        tx.send(Event::run_started("t", "r")).unwrap();
        body.next().await;
        drop(body);
        let (mut finished, tx2, _) = body_in(Encoding::Sse, metrics.clone());
        tx2.send(Event::run_finished("t", "r")).unwrap();
        finished.next().await;
        drop(finished);
        let text = metrics.render(&[]);
        assert!(
            text.contains("agui_client_disconnects_total{agent=\"a\"} 1"),
            "only the unfinished body counts: {text}"
        );
        drop(tx);
    }
}
