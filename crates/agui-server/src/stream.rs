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
/// body ends with a `RUN_ERROR` rather than leaving the client waiting.
pub(crate) struct EventBody {
    run: RunStream,
    encoding: Encoding,
    keep_alive: Option<Interval>,
    metrics: Arc<Metrics>,
    agent: String,
    started: Instant,
    events: usize,
    finished: bool,
}

impl EventBody {
    pub(crate) fn new(
        run: RunStream,
        encoding: Encoding,
        keep_alive: Duration,
        metrics: Arc<Metrics>,
        agent: String,
    ) -> Self {
        let keep_alive = encoding.keep_alive().map(|_| {
            let mut interval = tokio::time::interval_at(Instant::now() + keep_alive, keep_alive);
            interval.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            interval
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

impl Stream for EventBody {
    type Item = Result<Bytes, std::convert::Infallible>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = &mut *self;
        if this.finished {
            return Poll::Ready(None);
        }
        match Pin::new(&mut this.run).poll_next(cx) {
            Poll::Ready(Some(event)) => {
                this.observe(&event);
                if let Some(interval) = &mut this.keep_alive {
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
                if let Some(interval) = &mut this.keep_alive
                    && interval.poll_tick(cx).is_ready()
                {
                    let comment = this.encoding.keep_alive().unwrap_or_default();
                    return Poll::Ready(Some(Ok(Bytes::from_static(comment))));
                }
                Poll::Pending
            }
        }
    }
}
