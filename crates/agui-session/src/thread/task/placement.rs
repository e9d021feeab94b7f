//! Where a thread works: its place checked against its owner when it opens, or a new one (in
//! its owner's tree, claiming a spare's if there is one) with what it had elsewhere moved in.

use super::Task;
use super::state::Moving;
use crate::error::{RunErrorCode, RunFailure};
use crate::migrate::{self, Sources};
use crate::owner::Owner;
use crate::places::{Place, Placement};
use crate::prompt::{self, Prompt};
use crate::trees::{NewPlace, TreeError};
use crate::workspace;

impl Task {
    /// Gives the thread its directories for `owner` (a new thread becomes theirs) without
    /// opening a conversation, for its files: its place, or `None` when it is someone else's.
    pub(super) async fn place_for(&mut self, owner: &Owner) -> Result<Option<Place>, RunFailure> {
        if let Some(current) = &self.record.owner
            && current != owner
            && !current.is_local()
        {
            tracing::info!(%owner, "refused to place a thread of another owner");
            return Ok(None);
        }
        self.admit(owner)?;
        // A spare's process this claimed goes back to the pool's care: no conversation opens.
        let (_, hold) = self.place_thread().await?;
        drop(hold);
        Ok(self.record.place.clone())
    }

    /// Saves the prompt's attachments too large to send inline in the thread's workspace
    /// (placed: its conversation is open) and tells the model where they are.
    pub(super) async fn save_uploads(&mut self, prompt: &mut Prompt) {
        if prompt.uploads.is_empty() {
            return;
        }
        let uploads = std::mem::take(&mut prompt.uploads);
        let (Some(place), owner) = (
            self.record.place.clone(),
            self.record.owner.clone().unwrap_or_default(),
        ) else {
            prompt::resolve_uploads(&mut prompt.input, &uploads, &[]);
            return;
        };
        let (trees, id) = (self.ctx.trees.clone(), self.id.clone());
        let max_bytes = self.ctx.options.workspace_max_bytes;
        let saving = off_runtime(move || {
            let saved = match workspace::ThreadWorkspace::open(
                &trees, &owner, &id, &place, max_bytes,
            ) {
                Ok(ws) => workspace::save_uploads(ws.dir(), ws.tree_roots(), max_bytes, &uploads),
                Err(e) => {
                    tracing::warn!(error = %e, "could not open the workspace to save attachments");
                    Vec::new()
                }
            };
            (uploads, saved)
        });
        match saving.await {
            Ok((uploads, saved)) => {
                for (upload, saved) in uploads.iter().zip(&saved) {
                    match saved {
                        Ok(path) => {
                            tracing::info!(%path, bytes = upload.data.len(), "saved an attachment too large to send inline in the workspace")
                        }
                        Err(why) => {
                            tracing::warn!(name = %upload.name, why, "an attachment too large to send inline was not saved")
                        }
                    }
                }
                prompt::resolve_uploads(&mut prompt.input, &uploads, &saved);
            }
            Err(failure) => {
                tracing::warn!(detail = ?failure.detail, "saving attachments failed");
            }
        }
    }

    /// The thread's directories: its place checked against its owner, or a new place (in its
    /// owner's tree, claiming a spare's if there is one) with what it had elsewhere moved in.
    /// Returns the hold on a claimed spare's process, to drop once the conversation is open.
    pub(super) async fn place_thread(
        &mut self,
    ) -> Result<(Placement, Option<Box<dyn Send + Sync>>), RunFailure> {
        let owner = self.record.owner.clone().unwrap_or_default();
        let trees = self.ctx.trees.clone();
        if let Some(place) = self.record.place.clone() {
            let (owner, id) = (owner.clone(), self.id.clone());
            let placement = off_runtime(move || trees.placement(&owner, &id, &place)).await?;
            return placement
                .map(|p| (p, None))
                .map_err(|e| self.placement_failure(e));
        }
        let limit = self.ctx.options.max_remembered_threads;
        if !self.harnessed.is_known() && self.ctx.records.len() >= limit {
            return Err(RunFailure::new(
                RunErrorCode::ThreadLimit,
                format!("This agent keeps at most {limit} threads; delete some to start new ones."),
            ));
        }
        let NewPlace { place, hold } = trees
            .new_place(&owner, &self.id)
            .await
            .map_err(|e| self.placement_failure(e))?;
        // A spare claimed, or a new tree asked for without one: either may call for more.
        self.ctx.refill_spares();
        let (owner2, id) = (owner.clone(), self.id.clone());
        let (trees2, place2) = (trees.clone(), place.clone());
        let placement = off_runtime(move || trees2.placement(&owner2, &id, &place2))
            .await?
            .map_err(|e| self.placement_failure(e))?;
        if let Some(moving) = self.moving.clone() {
            let from = match moving {
                Moving::Legacy(workspace) => {
                    Sources::legacy(&self.ctx.options.save_dir, &workspace)
                }
                Moving::From(old, old_owner) => {
                    let (trees, id) = (trees.clone(), self.id.clone());
                    match off_runtime(move || trees.placement(&old_owner, &id, &old)).await? {
                        Ok(old) => Sources::placed(&old),
                        Err(e) => return Err(self.placement_failure(e)),
                    }
                }
            };
            let (to, conversation) = (placement.clone(), self.record.conversation_id.clone());
            off_runtime(move || migrate::move_into(&from, &to, &conversation))
                .await?
                .map_err(|e| {
                    RunFailure::new(
                        RunErrorCode::AgentError,
                        "Could not move the thread's files into its place.",
                    )
                    .with_detail(e)
                })?;
            self.moving = None;
        } else if let Some(template) = self.ctx.options.workspace_template.clone() {
            let (trees, to) = (trees.clone(), placement.clone());
            let copied = off_runtime(move || {
                let dir = trees.open_workspace(&to).map_err(|e| e.to_string())?;
                workspace::copy_template(&template, &dir).map_err(|e| e.to_string())
            })
            .await?;
            match copied {
                Ok(copied) => {
                    tracing::info!(
                        files = copied.files,
                        dirs = copied.dirs,
                        skipped = copied.skipped,
                        "copied the workspace template into the new thread's workspace"
                    );
                }
                // The thread works without it; the operator is told.
                Err(error) => {
                    tracing::error!(%error, "could not copy the workspace template into the new thread's workspace");
                }
            }
        }
        tracing::info!(tree = %place.tree, slot = %place.slot, %owner, spare = hold.is_some(), "the thread has its place");
        self.record.place = Some(place);
        self.persist();
        Ok((placement, hold))
    }

    /// A placement refused or failed: logged with what was found, reported without it.
    fn placement_failure(&self, error: TreeError) -> RunFailure {
        if let TreeError::Mismatch { .. } = &error {
            tracing::error!(%error, "refused to open a thread in a directory tree that is not its owner's");
        }
        RunFailure::new(
            RunErrorCode::AgentError,
            "Could not prepare the thread's directories.",
        )
        .with_detail(error)
    }
}

/// Runs blocking file work off the task's thread.
pub(super) async fn off_runtime<T: Send + 'static>(
    job: impl FnOnce() -> T + Send + 'static,
) -> Result<T, RunFailure> {
    tokio::task::spawn_blocking(job).await.map_err(|e| {
        RunFailure::new(
            RunErrorCode::AgentError,
            "Could not prepare the thread's directories.",
        )
        .with_detail(e)
    })
}
