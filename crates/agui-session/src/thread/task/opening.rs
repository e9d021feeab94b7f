//! Getting the thread's conversation ready for a prompt: re-attaching a connection the harness
//! closed, rebuilding it when the client's tools changed, or opening it — resuming the
//! conversation the harness has, or creating it. Opening is a chain of child tasks (a spare
//! being booted, a live slot, the harness's boot and init) the loop watches; the thread's own
//! state changes only in the loop, between them.

use std::sync::Arc;

use harness_client::HarnessError;
use harness_proto::lh::harness_config::SessionContinuationMode;
use tokio::task::JoinHandle;
use tracing::Instrument as _;

use super::super::callbacks::ThreadCallbacks;
use super::super::conversation::{
    BootFailure, Conversation, Link, LiveSlot, Opening, OpeningStage, Reattached,
};
use super::super::history;
use super::Task;
use super::state::Harnessed;
use crate::backend::ConversationHandle;
use crate::contract::Contract;
use crate::error::{RunErrorCode, RunFailure};
use crate::spare_conversations::SpareConversation;

/// Whether the thread's conversation can take a prompt now.
pub(super) enum Readiness {
    /// It is open, attached, with the right tools.
    Ready,
    /// A child is opening it; the loop hears when it is done.
    Pending,
    /// It cannot be had.
    Failed(RunFailure),
}

impl Task {
    /// Makes sure the thread has a usable conversation with `contract`'s tools: re-attaching a
    /// connection the harness closed, rebuilding it when the client's tools changed (history
    /// kept), or starting to open it.
    pub(super) async fn conversation_ready(&mut self, contract: &Contract) -> Readiness {
        if let Conversation::Lost { why } = &self.conversation {
            tracing::warn!(reason = %why, "the harness of this thread is gone; opening the conversation on a new one");
            self.conversation = Conversation::Closed;
        }
        if self
            .conversation
            .as_open()
            .is_some_and(|open| open.link == Link::Down)
            && let Conversation::Open(mut open) =
                std::mem::replace(&mut self.conversation, Conversation::Closed)
        {
            // A local harness answers at once or fails at once; still, never on the loop.
            let contract = open.contract.clone();
            let reattach = tokio::spawn(
                async move {
                    let result = open.handle.reconnect().await;
                    let steps = result.map(|info| info.history.len());
                    (open, steps.map_err(|e| e.to_string()))
                }
                .instrument(self.span.clone()),
            );
            self.conversation = Conversation::Opening(Opening {
                stage: OpeningStage::Reattach(reattach),
                contract,
                after: None,
            });
            return Readiness::Pending;
        }
        if let Some(open) = self.conversation.as_open()
            && open.contract.signature != contract.signature
        {
            if open.turn.is_some() || self.parking.is_parked() {
                tracing::warn!(
                    "the client's tools changed while a turn is in flight; keeping the current tools until it ends"
                );
                return Readiness::Ready;
            }
            tracing::info!(
                "the client's tools changed; rebuilding the conversation (history is kept)"
            );
            self.conversation.close_in_background();
        }
        match &self.conversation {
            Conversation::Open(_) => Readiness::Ready,
            Conversation::Opening(_) => Readiness::Pending,
            Conversation::Closed | Conversation::Lost { .. } | Conversation::Closing(_) => {
                let after = self.conversation.take_closing();
                self.start_opening(contract.clone(), after).await
            }
        }
    }

    /// Starts opening the conversation: a thread that needs a new tree waits for a spare
    /// being booted first, if one is.
    async fn start_opening(
        &mut self,
        contract: Contract,
        after: Option<JoinHandle<()>>,
    ) -> Readiness {
        if self.record.place.is_none() {
            let owner = self.record.owner.clone().unwrap_or_default();
            if self.ctx.trees.should_await_spare(&owner) {
                let trees = self.ctx.trees.clone();
                let wait = tokio::spawn(async move { trees.await_spare().await });
                self.conversation = Conversation::Opening(Opening {
                    stage: OpeningStage::Spare(wait),
                    contract,
                    after,
                });
                return Readiness::Pending;
            }
        }
        self.take_slot(contract, after).await
    }

    /// Takes a live slot for the conversation: at once when one is free, else by a child that
    /// asks idle threads to hibernate.
    async fn take_slot(&mut self, contract: Contract, after: Option<JoinHandle<()>>) -> Readiness {
        if let Some(slot) = self.ctx.slots.try_take() {
            return self.boot(contract, slot, after).await;
        }
        let (ctx, id) = (self.ctx.clone(), self.id.clone());
        let wait =
            tokio::spawn(async move { ctx.reserve_live(&id).await }.instrument(self.span.clone()));
        self.conversation = Conversation::Opening(Opening {
            stage: OpeningStage::Slot(wait),
            contract,
            after,
        });
        Readiness::Pending
    }

    /// Places the thread, then starts the child that opens its conversation on a harness
    /// (booting one if its partition has none).
    async fn boot(
        &mut self,
        contract: Contract,
        slot: LiveSlot,
        after: Option<JoinHandle<()>>,
    ) -> Readiness {
        if after.is_none()
            && let Some(spare) = self.claim_spare_conversation(&contract)
        {
            return self.open_on_spare(contract, slot, spare);
        }
        let (placement, hold) = match self.place_thread().await {
            Ok(placed) => placed,
            Err(failure) => return Readiness::Failed(failure),
        };
        let options = &self.ctx.options;
        // A fork creates its conversation from the cut trajectory (`fork.rs`).
        let fork_from = self.fork_from.take();
        let known = self.harnessed.is_known() && fork_from.is_none();
        let mut config = match contract
            .conversation_config(
                options,
                &self.ctx.tools,
                &placement.workspace.path(),
                &placement.app_data_dir.path(),
                &self.record.conversation_id,
                known,
            )
            .build()
        {
            Ok(config) => config,
            Err(e) => {
                return Readiness::Failed(
                    RunFailure::new(
                        RunErrorCode::AgentError,
                        "The agent's configuration could not be applied.",
                    )
                    .with_detail(e),
                );
            }
        };
        if let Some(trajectory) = fork_from {
            config.initial_trajectory = Some(trajectory);
            config.session_continuation_mode = Some(SessionContinuationMode::CreateOnly as i32);
        }
        let callbacks = Arc::new(ThreadCallbacks {
            link: self.link.clone(),
            tools: self.ctx.tools.clone(),
            policy: contract.callback_policy(options),
        });
        let ctx = self.ctx.clone();
        let boot = tokio::spawn(
            async move {
                if let Some(closing) = after {
                    // The harness may not open a conversation a connection still holds.
                    let _ = closing.await;
                }
                let opened = ctx.backend.0.open(&placement, config, callbacks).await;
                // The spare's process serves this conversation now (or failed to): it goes
                // back to the pool's care.
                drop(hold);
                match opened {
                    Ok(handle) => Ok(handle),
                    Err(HarnessError::InitFailed { kind, reason })
                        if known && kind.conversation_lost() =>
                    {
                        Err(BootFailure::Lost(reason))
                    }
                    Err(e) => Err(BootFailure::Failed(
                        RunFailure::new(
                            RunErrorCode::AgentError,
                            "Could not start the Antigravity conversation.",
                        )
                        .with_detail(e),
                    )),
                }
            }
            .instrument(self.span.clone()),
        );
        self.conversation = Conversation::Opening(Opening {
            stage: OpeningStage::Boot { boot, slot },
            contract,
            after: None,
        });
        Readiness::Pending
    }

    /// A conversation opened ahead in the owner's tree, when the thread is new, has nothing to
    /// move in or copy, and its first run's contract is the spare's.
    fn claim_spare_conversation(&mut self, contract: &Contract) -> Option<SpareConversation> {
        let options = &self.ctx.options;
        let fresh = self.record.place.is_none()
            && self.moving.is_none()
            && self.fork_from.is_none()
            && self.harnessed == Harnessed::New
            && options.workspace_template.is_none()
            && self.ctx.records.len() < options.max_remembered_threads;
        if !options.spare_conversations || !fresh {
            return None;
        }
        let owner = self.record.owner.clone().unwrap_or_default();
        let tree = self.ctx.trees.tree_of(&owner)?;
        self.ctx
            .spare_conversations
            .take(&tree, &contract.signature)
    }

    /// The thread takes `spare`: its place and conversation become the thread's (recorded as
    /// any new place is), its callbacks the thread's; another is opened behind it.
    fn open_on_spare(
        &mut self,
        contract: Contract,
        slot: LiveSlot,
        spare: SpareConversation,
    ) -> Readiness {
        let owner = self.record.owner.clone().unwrap_or_default();
        tracing::info!(tree = %spare.place.tree, slot = %spare.place.slot, %owner, spare = false, conversation_opened_ahead = true, "the thread has its place");
        self.record.conversation_id = spare.conversation_id.clone();
        self.record.place = Some(spare.place.clone());
        self.persist();
        spare.callbacks.bind(Arc::new(ThreadCallbacks {
            link: self.link.clone(),
            tools: self.ctx.tools.clone(),
            policy: contract.callback_policy(&self.ctx.options),
        }));
        self.ctx
            .spare_conversations
            .refill(&owner, &spare.place.tree);
        let handle = spare.handle;
        let boot = tokio::spawn(async move { Ok(handle) });
        self.conversation = Conversation::Opening(Opening {
            stage: OpeningStage::Boot { boot, slot },
            contract,
            after: None,
        });
        Readiness::Pending
    }

    /// The child re-attaching the conversation is done: open again, or closed (the next
    /// readiness check opens it anew, as after a lost connection).
    pub(super) fn reattached(&mut self, reattached: Option<Reattached>) {
        if !matches!(
            &self.conversation,
            Conversation::Opening(Opening {
                stage: OpeningStage::Reattach(_),
                ..
            })
        ) {
            return;
        }
        self.conversation = Conversation::Closed;
        match reattached {
            Some((mut open, Ok(steps))) => {
                open.link = Link::Attached;
                tracing::info!(steps, "re-attached to the conversation");
                self.conversation = Conversation::Open(open);
                for waiting in std::mem::take(&mut self.history_waiters) {
                    self.serve_connect(waiting.input, waiting.events);
                }
            }
            Some((_, Err(e))) => {
                tracing::warn!(error = %e, "could not re-attach; starting over on a new connection");
            }
            None => tracing::warn!("the re-attach failed; starting over on a new connection"),
        }
    }

    /// The spare the thread waited for is ready (or the wait gave up): on to the slot.
    pub(super) async fn spare_ready(&mut self) {
        let Conversation::Opening(opening) =
            std::mem::replace(&mut self.conversation, Conversation::Closed)
        else {
            return;
        };
        if let Readiness::Failed(failure) = self.take_slot(opening.contract, opening.after).await {
            self.open_failed(failure).await;
        }
    }

    /// The child waiting for a live slot is done: on to the boot.
    pub(super) async fn slot_taken(&mut self, slot: Result<LiveSlot, RunFailure>) {
        let Conversation::Opening(opening) =
            std::mem::replace(&mut self.conversation, Conversation::Closed)
        else {
            return;
        };
        let readiness = match slot {
            Ok(slot) => self.boot(opening.contract, slot, opening.after).await,
            Err(failure) => Readiness::Failed(failure),
        };
        if let Readiness::Failed(failure) = readiness {
            self.open_failed(failure).await;
        }
    }

    /// The child opening the conversation is done: the conversation is open (its history
    /// brought back into the message log when the thread was read back from its record), and
    /// the connects that waited for that history are served.
    pub(super) async fn booted(
        &mut self,
        booted: Result<Box<dyn ConversationHandle>, BootFailure>,
    ) {
        let Conversation::Opening(Opening {
            stage: OpeningStage::Boot { slot, .. },
            contract,
            ..
        }) = std::mem::replace(&mut self.conversation, Conversation::Closed)
        else {
            return;
        };
        let handle = match booted {
            Ok(handle) => handle,
            Err(BootFailure::Lost(why)) => {
                let failure = self.conversation_lost(&why);
                return self.open_failed(failure).await;
            }
            Err(BootFailure::Failed(failure)) => return self.open_failed(failure).await,
        };
        let info = handle.init_info();
        self.opened = true;
        tracing::info!(conversation_id = %handle.id(), resumed_steps = info.history.len(), "conversation open");
        if self.harnessed.is_known() && info.history.is_empty() && !self.record.forwarded.is_empty()
        {
            // Resumed, yet with none of the turns the thread sent: the harness lost it.
            handle.close().await;
            let failure = self.conversation_lost("it came back with no history");
            return self.open_failed(failure).await;
        }
        if self.harnessed == Harnessed::KnownUnread {
            let options = &self.ctx.options;
            let translation = crate::turn::translator_options(options, contract.silent.clone());
            // Resolved here either way: a message the history does not echo never reached the
            // harness, and the next user step belongs to the next message sent.
            let echoes = history::Echoes {
                user_steps: &mut self.record.user_steps,
                lost_turns: &mut self.record.lost_turns,
                echoed: &mut self.record.echoed,
                awaiting_echo: self.record.awaiting_echo.take(),
                awaited_turn_lost: std::mem::take(&mut self.record.awaited_turn_lost),
            };
            let rebuilt = history::rebuild(
                &self.record.conversation_id,
                &info.history,
                translation,
                echoes,
            );
            self.output.adopt_history(rebuilt);
            self.harnessed = Harnessed::Known;
        }
        if self.usage.is_none() {
            self.usage = info.cumulative_usage.clone();
        }
        self.conversation = Conversation::open(handle, contract, slot);
        if let Some(place) = &self.record.place {
            let owner = self.record.owner.clone().unwrap_or_default();
            self.ctx.spare_conversations.refill(&owner, &place.tree);
        }
        for waiting in std::mem::take(&mut self.history_waiters) {
            self.serve_connect(waiting.input, waiting.events);
        }
    }

    /// The conversation could not be opened: the run whose message waited for it ends with
    /// `failure`, and so do the connects waiting for its history.
    async fn open_failed(&mut self, failure: RunFailure) {
        tracing::info!(code = failure.code.as_str(), message = %failure.message, "could not open the conversation");
        if self.run.as_ref().is_some_and(|r| r.prompt.is_some()) {
            self.finish(Err(failure.clone())).await;
        }
        for waiting in std::mem::take(&mut self.history_waiters) {
            self.reject(&waiting.input, waiting.events, failure.clone());
        }
    }

    /// The conversation the thread knew could not be resumed: said loudly, and the thread
    /// starts a new one (the model no longer knows the earlier turns, and the user is told).
    fn conversation_lost(&mut self, why: &str) -> RunFailure {
        tracing::error!(conversation_id = %self.record.conversation_id, why, "the harness lost this thread's conversation; starting a new one");
        self.record.conversation_id = uuid::Uuid::new_v4().simple().to_string();
        self.harnessed = Harnessed::New;
        self.opened = false;
        self.record.user_steps.clear();
        self.record.lost_turns.clear();
        self.record.awaiting_echo = None;
        self.record.awaited_turn_lost = false;
        self.persist();
        RunFailure::new(
            RunErrorCode::ConversationLost,
            "The agent's record of this conversation was lost (its saved state is missing or unreadable), so it no longer knows the earlier messages. The next message starts a new conversation.",
        )
        .with_detail(why)
    }
}
