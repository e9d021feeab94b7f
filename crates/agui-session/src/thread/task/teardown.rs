//! The one way a thread's task ends, whatever the reason: the runs it serves or holds end,
//! what is parked is released, the conversation is let go (handed over when another replica
//! may take the thread), the record is written or removed, the lease is given up, the registry
//! forgets the task, and commands that reached it too late go to the thread's next task.

use super::super::command::Command;
use super::super::conversation::LetGo;
use super::Task;
use super::state::{Exit, Lease};
use crate::error::{RunErrorCode, RunFailure};

impl Task {
    /// How the conversation is let go: handed over when the lease says another replica may
    /// take the thread next (or took it), closed otherwise.
    pub(super) fn let_go_how(&self) -> LetGo {
        if matches!(self.lease, Lease::Held { .. } | Lease::Lost) {
            LetGo::HandOver {
                own_process: self.ctx.own_processes(),
            }
        } else {
            LetGo::Close
        }
    }

    /// Ends the task for `exit`.
    pub(super) async fn teardown(mut self, exit: Exit) {
        let failure = match &exit {
            Exit::Idle | Exit::Abandoned => None,
            Exit::Deleted { .. } => Some(RunFailure::new(
                RunErrorCode::Cancelled,
                "The thread was deleted.",
            )),
            Exit::Shutdown { .. } => Some(RunFailure::new(
                RunErrorCode::Cancelled,
                "The server is shutting down; the turn was interrupted.",
            )),
            Exit::LeaseLost(denied) => {
                tracing::error!(%denied, "lost the thread's lease; stopping the thread here");
                // Another replica may be writing the record now: nothing more is written.
                self.lease = Lease::Lost;
                Some(
                    RunFailure::new(
                        RunErrorCode::LeaseLost,
                        "This server lost the right to run this thread (another replica may have taken it over), so the turn was stopped. Send your message again.",
                    )
                    .with_detail(denied),
                )
            }
        };
        if let Some(failure) = &failure {
            // The runs end and the thread is persisted with what the client still owes, so a
            // result arriving after a restart is not lost; only then are the parked requests
            // released.
            if self.run.is_some() || self.output.has_subscribers() {
                self.finish(Err(failure.clone())).await;
            }
            self.end_everything_waiting(failure);
        } else if let Lease::Missing { taking, queue } = &mut self.lease {
            // Nothing failed: what waited for the lease goes to the thread's next task.
            if let Some(child) = taking.take() {
                child.abort();
            }
            self.handed_back.append(queue);
        }
        if matches!(exit, Exit::Shutdown { .. }) {
            // What the client still owes is kept, so a result arriving after a restart is not
            // lost; the turn ends with the shutdown, which its runs were told.
            self.persist_as(false);
        }
        // What the client still owes goes with the thread's record: a frontend tool's result
        // is recognised on whichever replica (or restart) it reaches, and a question or an
        // approval nobody can answer any more is reported there as an interrupted turn.
        // (A thread handed over parked ends `Idle`; the other ends keep their own rules.)
        let owed_calls = match exit {
            Exit::Idle => self.parking.pending_tool_calls(),
            _ => Vec::new(),
        };
        let interrupted = matches!(exit, Exit::Idle)
            && self.parking.parked_interrupts() > 0
            && owed_calls.is_empty();
        for call in owed_calls {
            if !self
                .record
                .pending_frontend_tools
                .iter()
                .any(|p| p.tool_call_id == call.tool_call_id)
            {
                self.record.pending_frontend_tools.push(call);
            }
        }
        let released = self.parking.close_all();
        let how = match exit {
            // Its files go next: no harness may keep its conversation.
            Exit::Deleted { .. } => LetGo::HandOver {
                own_process: self.ctx.own_processes(),
            },
            _ => self.let_go_how(),
        };
        self.conversation.let_go(how).await;
        match exit {
            Exit::Deleted { .. } => self.remove_record_and_files().await,
            Exit::Shutdown { .. } => {}
            // With the conversation let go, no turn is in flight any more (only a server that
            // stops without ending its task leaves the mark).
            Exit::Idle => {
                self.persist_as(interrupted);
            }
            Exit::Abandoned | Exit::LeaseLost(_) => {
                self.persist_as(false);
            }
        }
        if let Lease::Held {
            renewing: Some(child),
            ..
        } = &mut self.lease
        {
            // A renewal still at the store would take the lease back after it is given up.
            let _ = child.await;
        }
        if matches!(self.lease, Lease::Held { .. }) {
            self.ctx.release_lease(&self.id).await;
            tracing::info!("gave the thread's lease up");
        }
        self.ctx.registry.forget(&self.id, self.generation);
        match exit {
            Exit::Deleted { reply } => {
                tracing::info!("the thread was deleted with its files");
                let _ = reply.send(true);
            }
            Exit::Shutdown { done } => {
                tracing::info!(released, "thread closed for shutdown");
                let _ = done.send(());
            }
            Exit::Idle | Exit::Abandoned | Exit::LeaseLost(_) => {}
        }
        self.hand_back_late_commands();
        tracing::debug!("thread task ended");
    }

    /// Ends, with `failure`, every run and connect that waits for something of the thread: a
    /// busy thread, its lease, its history.
    fn end_everything_waiting(&mut self, failure: &RunFailure) {
        for waiting in std::mem::take(&mut self.waiting) {
            self.reject(&waiting.input, waiting.events, failure.clone());
        }
        for waiting in std::mem::take(&mut self.history_waiters) {
            self.reject(&waiting.input, waiting.events, failure.clone());
        }
        if let Lease::Missing { taking, queue } = &mut self.lease {
            if let Some(child) = taking.take() {
                child.abort();
            }
            for command in std::mem::take(queue) {
                self.refuse(command, failure);
            }
        }
    }

    /// Removes the thread's record and files (its conversation is let go already).
    async fn remove_record_and_files(&mut self) {
        let record = crate::store::ThreadRecord {
            workspace: self.legacy_workspace(),
            ..self.record.clone()
        };
        self.ctx.records.remove(&self.id).await;
        let trees = self.ctx.trees.clone();
        let _ = tokio::task::spawn_blocking(move || trees.remove_thread_files(&record)).await;
    }

    /// Commands that reached this task after it decided to end go to the thread's next task
    /// rather than being dropped (which would end their runs with no event at all); a stop
    /// finds nothing to stop, a shutdown finds the thread closed.
    fn hand_back_late_commands(&mut self) {
        self.commands.close();
        let mut late: Vec<Command> = std::mem::take(&mut self.handed_back);
        while let Ok(command) = self.commands.try_recv() {
            late.push(command);
        }
        for command in late {
            match command {
                Command::Run { .. }
                | Command::Connect { .. }
                | Command::Delete { .. }
                | Command::Update { .. }
                | Command::Place { .. } => {
                    self.ctx.registry.hand_back(&self.id, command);
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
    }
}
