//! The thread task's timers: everything it waits for besides its messages. One list
//! ([`Task::timers`]) gives both when the loop wakes next and what is due when it does, so the
//! two can never disagree (a timer the wake-up left out stalls the thread; one it kept after
//! its action stopped applying wakes the loop over and over).

use std::time::Duration;

use tokio::time::Instant;

use super::state::{Exit, Flow, Lease, Verdict};
use super::{DISK_CHECK_EVERY, STOP_GRACE, Task, busy};
use crate::error::{RunErrorCode, RunFailure};

/// A timer of the thread task, in the order due timers act (a lease that cannot be renewed
/// ends the task before anything else; an idle thread is closed before it would hibernate).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(super) enum Timer {
    /// The lease's lifetime ran out unrenewed (the store is stuck, or the whole replica was
    /// frozen past it): the task stops at once, before anything else, as another replica may
    /// have taken the thread.
    LeaseExpiry,
    /// The lease is renewed.
    LeaseRenewal,
    /// A run queued behind the thread's current one has waited `busy_thread_wait`.
    QueuedRun,
    /// A halted turn did not end within [`STOP_GRACE`]: its process is killed.
    StopGrace,
    /// The workspace is measured against `workspace_max_mb` while a turn runs.
    DiskCheck,
    /// The turn made no progress for `turn_stall_timeout`.
    Stall,
    /// Between turns, the harness waits for tasks in the background: whether its process still
    /// runs a command is checked (see [`BackgroundTasks`](crate::thread::background_tasks)).
    BackgroundTasks,
    /// Unwatched, a turn or a parked call waited `parked_timeout` for its client.
    Abandon,
    /// Unwatched and idle for `session_timeout`: the task ends.
    Idle,
    /// Unwatched and idle for `hibernate_after`: the conversation is let go (with leases, the
    /// task ends and gives its lease up).
    Hibernate,
}

/// When nothing is due: the loop still wakes once a day.
const NOTHING_DUE: Duration = Duration::from_secs(24 * 60 * 60);

impl Task {
    /// Every timer that applies now, with when it is due. A timer is listed only while its
    /// action would do something, so a past deadline is acted on once, never spun on.
    pub(super) fn timers(&mut self) -> Vec<(Timer, Instant)> {
        let options = self.ctx.options.clone();
        let mut timers = Vec::new();
        if let Lease::Held {
            renew_at,
            valid_until,
            renewing,
            ..
        } = &self.lease
        {
            timers.push((Timer::LeaseExpiry, *valid_until));
            if renewing.is_none() {
                timers.push((Timer::LeaseRenewal, *renew_at));
            }
        }
        if let Some(first) = self.waiting.iter().map(|w| w.deadline).min() {
            timers.push((Timer::QueuedRun, first));
        }
        if let Some(turn) = self.conversation.turn() {
            match turn.halted_at() {
                Some(since) => timers.push((Timer::StopGrace, since + STOP_GRACE)),
                None if options.workspace_max_bytes.is_some() => {
                    timers.push((Timer::DiskCheck, self.disk.checked + DISK_CHECK_EVERY));
                }
                None => {}
            }
        }
        if self.conversation.turn().is_none()
            && let Some(at) = self
                .conversation
                .as_open()
                .and_then(|open| open.background_tasks.check_at())
        {
            timers.push((Timer::BackgroundTasks, at));
        }
        if let Some(stall_at) = self.stall_deadline()
            && !self.waits_for_client()
        {
            timers.push((Timer::Stall, stall_at));
        }
        if !self.is_watched() {
            if self.conversation.turn().is_some() || self.parking.is_parked() {
                timers.push((Timer::Abandon, self.last_activity + options.parked_timeout));
            } else {
                timers.push((Timer::Idle, self.last_activity + options.session_timeout));
                let hibernates =
                    !matches!(self.lease, Lease::NotNeeded) || self.conversation.is_open();
                if hibernates && !self.conversation.runs_background_tasks() {
                    timers.push((
                        Timer::Hibernate,
                        self.last_activity + options.hibernate_after,
                    ));
                }
            }
        }
        timers
    }

    /// Checks that the process of a conversation whose harness waits for tasks in the
    /// background still runs a command; the wait ends when none runs.
    async fn check_background_tasks(&mut self) {
        let Some(open) = self.conversation.as_open() else {
            return;
        };
        let runs = open.handle.runs_commands().await;
        if open.background_tasks.checked(runs, Instant::now()) {
            tracing::info!(
                "the harness waits for tasks in the background that its process does not run (those of a process that exited, listed in the conversation it resumed); the thread waits no more"
            );
        }
    }

    /// When the loop wakes next: the first timer, or the end of a parked call's wait for its
    /// step, after which the run settles without it (the loop settles after every wake; no
    /// action is due then, so it is no timer).
    pub(super) fn next_deadline(&mut self) -> Instant {
        self.timers()
            .into_iter()
            .map(|(_, at)| at)
            .chain(self.call_steps_awaited())
            .min()
            .unwrap_or_else(|| Instant::now() + NOTHING_DUE)
    }

    /// Acts on every timer that is due, in [`Timer`]'s order.
    pub(super) async fn tick(&mut self) -> Flow {
        let now = Instant::now();
        let mut due: Vec<Timer> = self
            .timers()
            .into_iter()
            .filter(|(_, at)| *at <= now)
            .map(|(timer, _)| timer)
            .collect();
        due.sort();
        for timer in due {
            if let Flow::Exit(exit) = self.fire(timer, now).await {
                return Flow::Exit(exit);
            }
        }
        Flow::Continue
    }

    /// What `timer` does when it is due.
    async fn fire(&mut self, timer: Timer, now: Instant) -> Flow {
        let options = self.ctx.options.clone();
        match timer {
            Timer::LeaseExpiry => return self.lease_expired(),
            Timer::LeaseRenewal => self.renew_lease(now),
            Timer::QueuedRun => {
                while let Some(i) = self.waiting.iter().position(|w| w.deadline <= now) {
                    let Some(waiting) = self.waiting.remove(i) else {
                        break;
                    };
                    self.reject(&waiting.input, waiting.events, busy());
                }
            }
            Timer::StopGrace => {
                if let Some(open) = self.conversation.as_open()
                    && let Some(turn) = open.turn.as_mut()
                {
                    tracing::warn!(
                        "the harness did not stop the turn in time; killing its process"
                    );
                    open.handle.kill_process();
                    turn.halting();
                }
            }
            Timer::DiskCheck => self.check_disk(),
            Timer::Stall => {
                tracing::warn!(
                    stalled_secs = options.turn_stall_timeout.as_secs(),
                    "the harness made no progress on the turn; halting it"
                );
                self.owe_watchers(Verdict::Failed(RunFailure::new(
                    RunErrorCode::TurnStalled,
                    format!(
                        "The agent made no progress for {} s, so the turn was stopped (turn_stall_timeout_secs). The conversation is kept; send a message to continue.",
                        options.turn_stall_timeout.as_secs()
                    ),
                )));
                self.halt();
            }
            Timer::BackgroundTasks => self.check_background_tasks().await,
            Timer::Abandon => {
                tracing::info!(
                    parked = self.parking.is_parked(),
                    "giving up on a thread waiting for its client"
                );
                return Flow::Exit(Exit::Abandoned);
            }
            Timer::Idle => {
                tracing::info!("closing an idle thread");
                return Flow::Exit(Exit::Idle);
            }
            Timer::Hibernate => {
                if !matches!(self.lease, Lease::NotNeeded) {
                    tracing::debug!("hibernating an idle thread and giving its lease up");
                    return Flow::Exit(Exit::Idle);
                }
                tracing::debug!("hibernating an idle thread");
                self.conversation.close_in_background();
                self.persist();
            }
        }
        Flow::Continue
    }
}
