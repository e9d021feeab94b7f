//! Where a thread works: its place checked against its owner when it opens, or a new one (in
//! its owner's tree, claiming a spare's if there is one) with what it had elsewhere moved in.

use super::Task;
use super::state::Moving;
use crate::error::{RunErrorCode, RunFailure};
use crate::migrate::{self, Sources};
use crate::places::Placement;
use crate::trees::{NewPlace, TreeError};

impl Task {
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
        if hold.is_some() {
            self.ctx.refill_spares();
        }
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
async fn off_runtime<T: Send + 'static>(
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
