//! A run that changes the thread's past (an edit or a regenerate, `divergence.rs`): seen
//! before anything of the run is applied, and never ignored. The thread forks: a new harness
//! conversation starts from the old one's own trajectory cut just before the diverging user
//! message (`harness_client::trajectory`), the run sends that message (edited, or the same one
//! for a regenerate), and the old conversation is kept as a branch (`thread/branches.rs`).
//! Where the thread cannot fork, the run ends with `RUN_ERROR CANNOT_FORK` saying why.

use agui_types::{Message, RunAgentInput};
use harness_client::trajectory::SavedTrajectory;

use super::Task;
use super::placement::off_runtime;
use super::state::Harnessed;
use crate::divergence::{self, Asked, Divergence, Known};
use crate::error::{RunErrorCode, RunFailure};
use crate::prompt::{self, Prompt, PromptLimits};
use crate::rewind;
use crate::store::branches::{self, Branch};
use crate::thread::conversation::{Conversation, LetGo};
use crate::threads::model::SwitchRefused;
use serde_json::{Value, json};

/// The largest saved conversation a fork reads (the harness's database and its log, each).
const MAX_SAVED_BYTES: u64 = 1 << 30;

/// The largest file a rewind restores.
const MAX_REWIND_BYTES: u64 = 64 << 20;

/// What a fork leaves the run.
pub(super) struct Forked {
    /// The message to send in the new conversation.
    pub(super) prompt: Prompt,
    /// The `antigravity:rewind` report, when the files were rewound.
    pub(super) rewound: Option<Value>,
}

/// Whether the run asks for the files to be rewound: `forwardedProps.rewindFiles`, else the
/// agent's default.
fn wants_rewind(input: &RunAgentInput, default: bool) -> bool {
    input
        .forwarded_props
        .as_ref()
        .and_then(|p| p.get("rewindFiles"))
        .and_then(Value::as_bool)
        .unwrap_or(default)
}

/// What the run's client says its messages mean: `forwardedProps.regenerate`.
fn asked(input: &RunAgentInput) -> Result<Asked, RunFailure> {
    match input
        .forwarded_props
        .as_ref()
        .and_then(|p| p.get("regenerate"))
    {
        None | Some(Value::Null) | Some(Value::Bool(false)) => Ok(Asked::Nothing),
        Some(Value::Bool(true)) => Ok(Asked::Regenerate),
        Some(other) => Err(RunFailure::new(
            RunErrorCode::InvalidInput,
            format!("forwardedProps.regenerate must be true or false, not {other}"),
        )),
    }
}

impl Task {
    /// How `input`'s messages change the thread's past, if they do; a run marked as a
    /// regenerate that cannot be one fails.
    pub(super) fn divergence(
        &mut self,
        input: &RunAgentInput,
    ) -> Result<Option<Divergence>, RunFailure> {
        let mut asked = asked(input)?;
        if asked == Asked::Regenerate
            && self.record.forked_by_run.as_deref() == Some(input.run_id.as_str())
        {
            // The same run again (its stream was cut): it forked already, and is restated.
            tracing::info!("a regenerate's run sent again; it forked already");
            asked = Asked::Nothing;
        }
        let forwarded = &self.record.forwarded;
        let is_forwarded = |id: &str| forwarded.contains(id);
        let unwatched = self.output.has_backlog();
        let divergence = divergence::detect(
            Known {
                log: self.output.log_mut().messages(),
                sent: &self.record.sent,
                forwarded: &is_forwarded,
                turn_in_flight: self.conversation.turn().is_some(),
                unwatched,
            },
            &input.messages,
            asked,
        )
        .map_err(|refused| {
            RunFailure::new(
                RunErrorCode::InvalidInput,
                format!("forwardedProps.regenerate: {}.", refused.why),
            )
        })?;
        let Some(divergence) = divergence else {
            return Ok(None);
        };
        tracing::info!(
            kind = divergence.kind(),
            message_id = %divergence.message_id(),
            marked = asked == Asked::Regenerate,
            "the run's messages change the thread's past"
        );
        Ok(Some(divergence))
    }

    /// Forks the thread before the diverging message: the prompt the run sends in the new
    /// conversation (and what a rewind of the files did, when asked), or why the thread cannot
    /// fork.
    pub(super) async fn fork(
        &mut self,
        divergence: &Divergence,
        input: &RunAgentInput,
    ) -> Result<Forked, RunFailure> {
        let refuse = |why: &str| cannot_fork(divergence, why);
        // A parked call keeps its turn in flight: the more specific reason is said first.
        if self.parking.is_parked() || !self.record.pending_frontend_tools.is_empty() {
            return Err(refuse(
                "The thread waits for the client (a tool result, an approval or an answer): answer or stop it first.",
            ));
        }
        if self.conversation.turn().is_some() {
            return Err(refuse(
                "A turn is in flight (with its subagents, if any): stop it first, then edit or regenerate.",
            ));
        }
        if matches!(self.conversation, Conversation::Opening(_)) {
            return Err(refuse(
                "The thread's conversation is being opened; retry in a moment.",
            ));
        }
        let message_id = divergence.message_id();
        let user = input.messages.iter().find_map(|m| match m {
            Message::User(user) if user.id == message_id => Some(user),
            _ => None,
        });
        let limits = PromptLimits {
            max_attachment_bytes: self.ctx.options.max_attachment_bytes,
        };
        let Some(prompt) = user.and_then(|user| prompt::prompt_of(user, &limits)) else {
            return Err(refuse("The message is empty: there is nothing to send."));
        };
        let Some(step) = self.record.user_steps.step_of(message_id) else {
            return Err(refuse(
                "The server no longer knows where this message is in the agent's history (it is too old, or its turn was never recorded).",
            ));
        };
        let new_id = uuid::Uuid::new_v4().simple().to_string();
        let initial = if step == 0 {
            None
        } else {
            Some(self.cut_trajectory(step, &new_id).await.map_err(|why| {
                tracing::warn!(error = %why, "could not read the conversation to fork it");
                refuse("The agent's record of this conversation could not be read.")
                    .with_detail(why)
            })?)
        };
        // The old conversation is closed (the harness keeps it) and becomes a branch.
        self.conversation.let_go(LetGo::Close).await;
        let old = std::mem::replace(&mut self.record.conversation_id, new_id.clone());
        branches::keep(
            &mut self.record.branches,
            Branch {
                conversation_id: old.clone(),
                user_steps: self.record.user_steps.clone(),
                lost_turns: self.record.lost_turns.clone(),
                sent: self.record.sent.clone(),
                echoed: self.record.echoed.clone(),
                left_at: message_id.to_owned(),
                left_when: crate::threads::model::now_unix(),
                message_count: self.record.message_count,
            },
        );
        self.record.user_steps.keep_below(step);
        self.record.lost_turns.keep_below(step);
        self.record.awaiting_echo = None;
        self.record.awaited_turn_lost = false;
        self.record.forked_by_run = Some(input.run_id.clone());
        self.opened = false;
        self.fork_from = initial;
        if step == 0 {
            // Nothing is kept: a new conversation like a new thread's.
            self.harnessed = Harnessed::New;
        }
        let log = self.output.log_mut().messages();
        let after = log
            .iter()
            .position(|m| m.id() == message_id)
            .map(|at| rewind::after(&log[at..]));
        self.output.log_mut().truncate_from(message_id);
        self.persist();
        tracing::info!(
            kind = divergence.kind(),
            %message_id,
            kept_steps = step,
            from = %old,
            to = %new_id,
            "the thread forked"
        );
        let rewound = if wants_rewind(input, self.ctx.options.rewind_files) {
            Some(self.rewind_files(after).await)
        } else {
            None
        };
        Ok(Forked { prompt, rewound })
    }

    /// Undoes what the file tools changed after the fork point (`after`: `None` when the
    /// thread's messages were not read back, so nothing is known of them); the report of
    /// the `antigravity:rewind` event.
    async fn rewind_files(&mut self, after: Option<rewind::After>) -> Value {
        let Some(after) = after else {
            return json!({
                "restored": [], "notRestored": [], "commandsAfter": 0,
                "unknown": "the thread's messages were not read back yet (the server restarted): what changed after the point is not known, nothing was rewound",
            });
        };
        let placement = match self.place_thread().await {
            Ok((placement, _hold)) => placement,
            Err(failure) => {
                return json!({"restored": [], "notRestored": [], "commandsAfter": after.commands,
                    "unknown": failure.message});
            }
        };
        let trees = self.ctx.trees.clone();
        let commands = after.commands;
        let report = off_runtime(move || {
            let root = placement.workspace.path();
            let mut restored = Vec::new();
            let mut not_restored = Vec::new();
            let dir = match trees.open_workspace(&placement) {
                Ok(dir) => dir,
                Err(e) => {
                    return (restored, vec![json!({"path": "", "why": e.to_string()})]);
                }
            };
            for (path, diffs) in rewind::by_path(&after.changes) {
                let Ok(rel) = std::path::Path::new(&path).strip_prefix(&root) else {
                    not_restored.push(json!({"path": path, "why": "it is outside the workspace"}));
                    continue;
                };
                let current = match dir.read(rel, MAX_REWIND_BYTES) {
                    Ok(bytes) => Some(bytes),
                    Err(harness_sandbox::SandboxError::Io { source, .. })
                        if source.kind() == std::io::ErrorKind::NotFound =>
                    {
                        None
                    }
                    Err(e) => {
                        not_restored.push(json!({"path": path, "why": e.to_string()}));
                        continue;
                    }
                };
                let done = match rewind::undo(current.as_deref(), &diffs) {
                    Ok(rewind::Restore::Write(content)) => {
                        dir.write(rel, &content).map(|()| "restored")
                    }
                    Ok(rewind::Restore::Remove) => dir.remove_file(rel).map(|_| "removed"),
                    Err(why) => {
                        not_restored.push(json!({"path": path, "why": why}));
                        continue;
                    }
                };
                match done {
                    Ok(what) => restored.push(json!({"path": path, "action": what})),
                    Err(e) => not_restored.push(json!({"path": path, "why": e.to_string()})),
                }
            }
            (restored, not_restored)
        })
        .await;
        let (restored, not_restored) = report.unwrap_or_else(|failure| {
            (
                Vec::new(),
                vec![json!({"path": "", "why": failure.message})],
            )
        });
        tracing::info!(
            restored = restored.len(),
            not_restored = not_restored.len(),
            commands_after = commands,
            "rewound the files of the fork"
        );
        json!({"restored": restored, "notRestored": not_restored, "commandsAfter": commands})
    }

    /// The current conversation's saved trajectory, its first `steps` kept, as the
    /// `initial_trajectory` of the conversation `new_id`.
    async fn cut_trajectory(&mut self, steps: u32, new_id: &str) -> Result<Vec<u8>, String> {
        let (placement, _hold) = self
            .place_thread()
            .await
            .map_err(|failure| failure.message)?;
        let trees = self.ctx.trees.clone();
        let name = format!("{}.db", self.record.conversation_id);
        let new_id = new_id.to_owned();
        off_runtime(move || {
            let db = trees
                .read_storage(&placement, &name, MAX_SAVED_BYTES)
                .map_err(|e| e.to_string())?
                .ok_or_else(|| format!("{name} does not exist"))?;
            let wal = trees
                .read_storage(&placement, &format!("{name}-wal"), MAX_SAVED_BYTES)
                .map_err(|e| e.to_string())?;
            let saved = SavedTrajectory::read(&db, wal.as_deref()).map_err(|e| e.to_string())?;
            saved.cut(steps, &new_id).map_err(|e| e.to_string())
        })
        .await
        .map_err(|failure| failure.message)?
    }
}

/// The event that reports a rewind: `CUSTOM` `antigravity:rewind` with `restored` (`[{path,
/// action: "restored" | "removed"}]`), `notRestored` (`[{path, why}]`) and `commandsAfter` (the
/// commands that ran after the point, whose changes are not rewound).
pub(super) fn rewind_event(report: Value) -> agui_types::Event {
    agui_types::Event::Custom(agui_types::Custom {
        name: REWIND_EVENT.into(),
        value: report,
        ..agui_types::Custom::default()
    })
}

/// The name of the event that reports a rewind.
pub(crate) const REWIND_EVENT: &str = "antigravity:rewind";

/// The failure of a run whose divergence the thread cannot follow, saying why.
pub(super) fn cannot_fork(divergence: &Divergence, why: &str) -> RunFailure {
    let what = match divergence {
        Divergence::Edited { message_id } => format!("message {message_id} was edited"),
        Divergence::Regenerate { message_id } => {
            format!("the answer to message {message_id} was removed (a regenerate)")
        }
    };
    RunFailure::new(
        RunErrorCode::CannotFork,
        format!("The run's history differs from the thread's: {what}. {why}"),
    )
}

impl Task {
    /// Applies an owner's change: the branch first (it may be refused), then title and
    /// archiving.
    pub(super) async fn update(
        &mut self,
        patch: crate::threads::ThreadPatch,
    ) -> Result<crate::store::ThreadRecord, SwitchRefused> {
        if let Some(branch) = &patch.branch {
            self.switch_branch(branch).await?;
        }
        if let Some(title) = patch.title {
            self.record.title = title;
        }
        if let Some(archived) = patch.archived {
            self.record.archived = archived;
        }
        self.persist();
        Ok(self.record.clone())
    }

    /// A run that names a branch (`forwardedProps.branch`) continues that one: the thread
    /// switches to it first, as a `PATCH` does, or the run is refused (an unknown branch, a busy
    /// thread).
    pub(super) async fn switch_for_run(&mut self, id: &str) -> Result<(), RunFailure> {
        self.switch_branch(id)
            .await
            .map_err(|refused| match refused {
                SwitchRefused::NoSuchBranch(id) => RunFailure::new(
                    RunErrorCode::InvalidInput,
                    format!("The thread has no branch {id} (forwardedProps.branch)."),
                ),
                SwitchRefused::Busy(why) => RunFailure::new(RunErrorCode::ThreadBusy, why),
            })
    }

    /// Makes the branch `id` the thread's current one; the current one becomes a branch. Its
    /// messages come back from the harness's record of it when the thread next opens (a
    /// connect restates them).
    async fn switch_branch(&mut self, id: &str) -> Result<(), SwitchRefused> {
        if id == self.record.conversation_id {
            return Ok(());
        }
        let Some(at) = self
            .record
            .branches
            .iter()
            .position(|b| b.conversation_id == id)
        else {
            return Err(SwitchRefused::NoSuchBranch(id.to_owned()));
        };
        if self.conversation.turn().is_some()
            || self.parking.is_parked()
            || !self.record.pending_frontend_tools.is_empty()
            || matches!(self.conversation, Conversation::Opening(_))
            || self.run.is_some()
        {
            return Err(SwitchRefused::Busy(
                "the thread is busy (a run, a turn or something waiting for the client): stop it first, then switch".into(),
            ));
        }
        self.conversation.let_go(LetGo::Close).await;
        let target = self.record.branches.remove(at);
        // Where the thread left the target is where the branch it leaves now (a descendant of
        // that point, through edits and regenerates) parts from it too.
        let left_at = target.left_at.clone();
        let left = Branch {
            conversation_id: std::mem::replace(
                &mut self.record.conversation_id,
                target.conversation_id,
            ),
            user_steps: std::mem::replace(&mut self.record.user_steps, target.user_steps),
            lost_turns: std::mem::replace(&mut self.record.lost_turns, target.lost_turns),
            sent: std::mem::replace(&mut self.record.sent, target.sent),
            echoed: std::mem::replace(&mut self.record.echoed, target.echoed),
            left_at,
            left_when: crate::threads::model::now_unix(),
            message_count: std::mem::replace(&mut self.record.message_count, target.message_count),
        };
        branches::keep(&mut self.record.branches, left);
        self.record.awaiting_echo = None;
        self.record.awaited_turn_lost = false;
        self.fork_from = None;
        self.opened = false;
        // Its messages are read back from the harness on the next open.
        self.harnessed = Harnessed::KnownUnread;
        *self.output.log_mut() = agui_types::MessageLog::new();
        self.persist();
        tracing::info!(branch = %id, "the thread switched branches");
        Ok(())
    }
}
