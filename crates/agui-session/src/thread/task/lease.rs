//! The thread's lease, when replicas share the save dir: taken by a child task while the
//! commands that need it wait (the mailbox stays open), renewed while the task lives, lost when
//! another replica has it.

use std::sync::Arc;
use std::time::Duration;

use agui_types::RunOutcome;
use tokio::time::Instant;
use tracing::Instrument as _;

use super::super::command::Command;
use super::super::context::ThreadContext;
use super::super::output::{RunChannel, Terminal, negotiate};
use super::Task;
use super::state::{Exit, Flow, Granted, Lease, Renewed};
use crate::choices::ConcurrentRuns;
use crate::error::{RunErrorCode, RunFailure};
use crate::lease::LeaseDenied;

impl Task {
    /// Queues a command that needs the lease, and starts taking it if no child is at it.
    pub(super) fn await_lease(&mut self, command: Command) {
        let Lease::Missing { taking, queue } = &mut self.lease else {
            return;
        };
        queue.push(command);
        if taking.is_none() {
            let (ctx, id) = (self.ctx.clone(), self.id.clone());
            *taking = Some(tokio::spawn(
                wait_for_lease(ctx, id).instrument(self.span.clone()),
            ));
        }
    }

    /// The child taking the lease is done: the commands that waited are served, or refused
    /// with `THREAD_ELSEWHERE`.
    pub(super) async fn lease_taken(&mut self, taken: Result<Granted, LeaseDenied>) -> Flow {
        let queue = match &mut self.lease {
            Lease::Missing { taking, queue } => {
                *taking = None;
                std::mem::take(queue)
            }
            _ => return Flow::Continue,
        };
        match taken {
            Ok(granted) => {
                tracing::info!(
                    valid_for_secs = granted.valid_for.as_secs(),
                    "took the thread's lease"
                );
                self.lease = self.held_for(granted, false);
                self.load().await;
                let mut queue = queue.into_iter();
                while let Some(command) = queue.next() {
                    if let Flow::Exit(exit) = self.command(command).await {
                        // What was queued behind a deletion goes to the thread's next task.
                        self.handed_back.extend(queue);
                        return Flow::Exit(exit);
                    }
                }
                Flow::Continue
            }
            Err(denied) => {
                tracing::info!(%denied, "the thread's lease is not ours");
                let failure = elsewhere(&denied);
                for command in queue {
                    self.refuse(command, &failure);
                }
                // Nothing of the thread is here: the task has nothing to keep.
                Flow::Exit(Exit::Idle)
            }
        }
    }

    /// Ends a command that will not be served: a run or connect with `failure`, a deletion
    /// refused, a stop with nothing to stop.
    pub(super) fn refuse(&mut self, command: Command, failure: &RunFailure) {
        match command {
            Command::Run { input, events, .. } => self.reject(&input, events, failure.clone()),
            Command::Connect { input, events, .. } => {
                let version = negotiate(input.protocol_version.as_deref(), &self.id, &input.run_id);
                self.reject(&input, RunChannel::new(events, version), failure.clone());
            }
            Command::Delete { reply, .. } => {
                let _ = reply.send(false);
            }
            Command::Update { reply, .. } => {
                let _ = reply.send(None);
            }
            Command::Place { reply, .. } => {
                let _ = reply.send(Err(failure.clone()));
            }
            Command::Stop { reply } => {
                let _ = reply.send(false);
            }
            Command::Shutdown { done } => {
                let _ = done.send(());
            }
            Command::Hibernate => {}
        }
    }

    /// A stop while runs wait for the lease: they end `cancelled` (their messages are never
    /// sent). True when there was one.
    pub(super) fn cancel_runs_awaiting_lease(&mut self) -> bool {
        let Lease::Missing { queue, .. } = &mut self.lease else {
            return false;
        };
        let (runs, rest): (Vec<Command>, Vec<Command>) = std::mem::take(queue)
            .into_iter()
            .partition(|c| matches!(c, Command::Run { .. }));
        *queue = rest;
        let cancelled = !runs.is_empty();
        for run in runs {
            if let Command::Run { input, events, .. } = run {
                self.output.subscribe(
                    &input.run_id,
                    events,
                    None,
                    super::super::output::Restate::Nothing,
                );
                self.finish_one(
                    &input.run_id,
                    Terminal::Finished(Some(RunOutcome::Cancelled)),
                );
            }
        }
        if cancelled {
            tracing::info!("stopped runs waiting for the thread's lease");
        }
        cancelled
    }

    /// A lease just granted (its end counted from when the store was asked); `wanted`: another
    /// replica asked for the thread.
    fn held_for(&self, granted: Granted, wanted: bool) -> Lease {
        let Granted {
            asked_at: now,
            valid_for,
        } = granted;
        let every = self
            .ctx
            .leases
            .as_ref()
            .map_or(valid_for / 3, |l| l.renew_every());
        Lease::Held {
            renew_at: now + every.min(valid_for / 2),
            valid_until: now + valid_for,
            wanted,
            renewing: None,
        }
    }

    /// Starts renewing the lease when it is due, in a child: the store's file work (a shared
    /// volume may stall) never holds up the loop, which meanwhile answers stops and connects
    /// and watches the lease's lifetime ([`Timer::LeaseExpiry`](super::timers::Timer)).
    pub(super) fn renew_lease(&mut self, now: Instant) {
        let Lease::Held {
            renew_at,
            renewing: renewing @ None,
            ..
        } = &mut self.lease
        else {
            return;
        };
        if now < *renew_at {
            return;
        }
        let (ctx, id) = (self.ctx.clone(), self.id.clone());
        *renewing = Some(tokio::spawn(
            async move {
                let asked_at = Instant::now();
                let result = ctx
                    .acquire_lease(&id)
                    .await
                    .unwrap_or(Err(LeaseDenied::NotKept))
                    .map(|valid_for| Granted {
                        asked_at,
                        valid_for,
                    });
                let wanted = result.is_ok() && ctx.lease_wanted(&id).await;
                Renewed { result, wanted }
            }
            .instrument(self.span.clone()),
        ));
    }

    /// A renewal is done: the lease lasts longer, or the task ends when it was lost.
    pub(super) fn lease_renewed(&mut self, renewed: Renewed) -> Flow {
        let Lease::Held {
            valid_until,
            wanted,
            ..
        } = self.lease
        else {
            return Flow::Continue;
        };
        // A renewal that passes does not clear the mark: a few bytes freed elsewhere let a small
        // write through while the harness's own still fail; the free space decides.
        if let Err(LeaseDenied::StoreFailed { kind, .. }) = &renewed.result
            && *kind == std::io::ErrorKind::StorageFull
        {
            self.ctx.records.saw_storage(true);
        }
        match renewed.result {
            Ok(granted) => {
                if renewed.wanted && !wanted {
                    tracing::info!(
                        "another replica asked for the thread; handing it over once it is idle"
                    );
                }
                self.lease = self.held_for(granted, renewed.wanted);
                Flow::Continue
            }
            Err(LeaseDenied::NotKept) => {
                // No lease store (never the case with a lease held): nothing to renew.
                Flow::Continue
            }
            Err(denied) if denied.is_transient() && Instant::now() < valid_until => {
                tracing::warn!(%denied, "could not renew the thread's lease; retrying");
                self.lease = Lease::Held {
                    renew_at: Instant::now() + Duration::from_secs(1),
                    valid_until,
                    wanted,
                    renewing: None,
                };
                Flow::Continue
            }
            Err(denied) => Flow::Exit(Exit::LeaseLost(denied)),
        }
    }

    /// The lease's lifetime ran out unrenewed: its renewal is still at the store, or this
    /// replica was frozen past it. Another replica may have taken the thread, so this one stops
    /// driving it without asking the store first.
    pub(super) fn lease_expired(&mut self) -> Flow {
        Flow::Exit(Exit::LeaseLost(LeaseDenied::StoreFailed {
            kind: std::io::ErrorKind::TimedOut,
            detail: "the lease ran out before it was renewed (the lease store is slow or stuck, or this replica was paused)".into(),
        }))
    }
}

/// Takes the lease of `thread_id`, waiting for one held elsewhere as a run waits for a busy
/// thread (`busy_thread_wait`), and asking its holder for it meanwhile: a live holder hands an
/// idle thread over at its next renewal, and a dead replica's lease expires within its
/// lifetime, so the thread's next runs only take longer.
async fn wait_for_lease(
    ctx: Arc<ThreadContext>,
    thread_id: String,
) -> Result<Granted, LeaseDenied> {
    let wait = match ctx.options.concurrent_runs {
        ConcurrentRuns::Wait(limit) => limit,
        ConcurrentRuns::Refuse => Duration::ZERO,
    };
    let deadline = Instant::now() + wait;
    loop {
        let asked_at = Instant::now();
        let denied = match ctx.acquire_lease(&thread_id).await {
            Some(Ok(valid_for)) => {
                return Ok(Granted {
                    asked_at,
                    valid_for,
                });
            }
            Some(Err(denied)) => denied,
            None => return Err(LeaseDenied::NotKept),
        };
        let pause = match &denied {
            LeaseDenied::Held { retry_after, .. } => {
                // The holder hands the thread over at its next renewal if it is idle.
                ctx.want_lease(&thread_id).await;
                (*retry_after).clamp(Duration::from_millis(100), Duration::from_secs(1))
            }
            LeaseDenied::Contended | LeaseDenied::StoreFailed { .. } => Duration::from_secs(1),
            LeaseDenied::NotKept => return Err(denied),
        };
        if Instant::now() + pause > deadline {
            return Err(denied);
        }
        tracing::debug!(%denied, "waiting for the thread's lease");
        tokio::time::sleep(pause).await;
    }
}

/// The failure of a run on a thread whose lease is not ours.
fn elsewhere(denied: &LeaseDenied) -> RunFailure {
    if let LeaseDenied::StoreFailed { kind, .. } = denied
        && *kind == std::io::ErrorKind::StorageFull
    {
        return RunFailure::new(
            RunErrorCode::StorageFull,
            "The server's storage is full, so this thread cannot be taken up here; your message was not sent. Try again in a moment.",
        )
        .with_detail(denied);
    }
    let message = match denied {
        LeaseDenied::Held { retry_after, .. } => format!(
            "Another replica of this server is running this thread; retry in {} s.",
            retry_after.as_secs().max(1)
        ),
        LeaseDenied::Contended | LeaseDenied::StoreFailed { .. } | LeaseDenied::NotKept => {
            "This server could not check which replica runs this thread; retry shortly.".to_owned()
        }
    };
    RunFailure::new(RunErrorCode::ThreadElsewhere, message).with_detail(denied)
}
