//! What a conversation's harness says of the tasks its turns left running in the background,
//! and what the thread makes of it. The harness's word (`STATE_WAITING_FOR_TASKS` at a turn's
//! end) outlives its tasks when its process is restarted: the conversation file it resumes
//! still lists the commands of the process that exited, and every later turn of that
//! conversation ends waiting for them, for good. A thread that took that word alone would never
//! hibernate nor go to the replica that asks for it. So the word holds the thread only while
//! its process still runs a command, checked at each turn's end and every
//! [`CHECK_EVERY`] after; a conversation that scheduled a task (which no process shows)
//! takes the harness's word.

use std::time::Duration;

use tokio::time::Instant;

/// How often the thread checks that its process still runs the commands its harness waits
/// for (a `/proc` read, or a question to its sandbox).
pub(crate) const CHECK_EVERY: Duration = Duration::from_secs(10);

/// Tools whose tasks no process shows: a conversation that called one believes its harness.
const TASKS_NO_PROCESS_SHOWS: [&str; 1] = ["schedule"];

/// A conversation's tasks in the background.
#[derive(Debug, Default)]
pub(crate) struct BackgroundTasks {
    /// The harness said its last turn left tasks running; when they are checked next against
    /// the process's commands.
    waiting: Option<Instant>,
    /// The conversation called a tool of [`TASKS_NO_PROCESS_SHOWS`] since it was opened: the
    /// harness's word is never checked.
    unverifiable: bool,
}

impl BackgroundTasks {
    /// Whether the thread holds its conversation for them.
    pub(crate) fn running(&self) -> bool {
        self.waiting.is_some()
    }

    /// A turn ended; `reported`: the harness waits for tasks it left running. Checked at once.
    pub(crate) fn turn_ended(&mut self, reported: bool, now: Instant) {
        self.waiting = reported.then_some(now);
    }

    /// The conversation called `tool`.
    pub(crate) fn tool_called(&mut self, tool: &str) {
        self.unverifiable |= TASKS_NO_PROCESS_SHOWS.contains(&tool);
    }

    /// When the process's commands are to be checked next, if they are.
    pub(crate) fn check_at(&self) -> Option<Instant> {
        self.waiting.filter(|_| !self.unverifiable)
    }

    /// What a check found; `true` when it ended the wait (no command runs: the harness waits
    /// for tasks of a process that exited).
    pub(crate) fn checked(&mut self, runs_commands: bool, now: Instant) -> bool {
        if self.check_at().is_none() {
            return false;
        }
        if runs_commands {
            self.waiting = Some(now + CHECK_EVERY);
            false
        } else {
            self.waiting = None;
            true
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_wait_for_tasks_holds_while_the_process_runs_commands_and_ends_when_none_runs() {
        let now = Instant::now();
        let mut tasks = BackgroundTasks::default();
        assert!(!tasks.running());
        tasks.turn_ended(true, now);
        assert!(tasks.running());
        assert_eq!(tasks.check_at(), Some(now), "checked at once");
        assert!(!tasks.checked(true, now));
        assert_eq!(tasks.check_at(), Some(now + CHECK_EVERY));
        assert!(tasks.running(), "a command runs: the thread waits");
        assert!(tasks.checked(false, now), "none runs: the wait ends");
        assert!(!tasks.running());
        assert_eq!(tasks.check_at(), None);
        assert!(!tasks.checked(false, now), "nothing left to end");
    }

    #[test]
    fn a_turn_that_ends_with_no_tasks_ends_the_wait() {
        let now = Instant::now();
        let mut tasks = BackgroundTasks::default();
        tasks.turn_ended(true, now);
        tasks.turn_ended(false, now);
        assert!(!tasks.running());
        assert_eq!(tasks.check_at(), None);
    }

    #[test]
    fn a_conversation_that_scheduled_a_task_believes_its_harness() {
        let now = Instant::now();
        for scheduled_first in [true, false] {
            let mut tasks = BackgroundTasks::default();
            if scheduled_first {
                tasks.tool_called("schedule");
                tasks.turn_ended(true, now);
            } else {
                tasks.turn_ended(true, now);
                tasks.tool_called("run_command");
                assert!(tasks.check_at().is_some(), "a command is checked");
                tasks.tool_called("schedule");
            }
            assert!(tasks.running());
            assert_eq!(tasks.check_at(), None, "never checked");
            assert!(!tasks.checked(false, now), "a check does not end it");
            assert!(tasks.running());
            tasks.turn_ended(false, now);
            assert!(!tasks.running(), "the harness's word ends it");
        }
    }
}
