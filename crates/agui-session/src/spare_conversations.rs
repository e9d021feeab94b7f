//! Conversations opened ahead of the threads that will use them: one per owner's tree, in the
//! tree's process, with a slot of its own and the contract of a run without client tools. The
//! harness takes about as long to open a conversation as the rest of a short first turn's own
//! work before the model is asked, so the next new thread of the owner whose first run brings
//! no client tools takes this conversation (its slot and id become the thread's) instead of
//! opening one, and another is opened in the background.
//!
//! A spare belongs to no thread: its callbacks answer nothing until a thread binds them
//! ([`LateCallbacks`]); it holds no live slot (the thread that takes it holds one); it is
//! closed, and its files removed, once unclaimed for `hibernate_after` (so the process can
//! stop as an idle one would) and at shutdown. A spare left by a crash leaves its empty slot
//! behind, as an abandoned opening does.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};

use async_trait::async_trait;
use harness_client::{
    CallContext, Callbacks, HookRequest, HookResponse, PolicyOutcome, PolicyRequest,
    QuestionAnswer, QuestionRequest, ToolCallRequest, ToolOutcome,
};
use parking_lot::Mutex;

use crate::backend::{Backend, ConversationHandle};
use crate::contract::Contract;
use crate::options::AgentOptions;
use crate::owner::Owner;
use crate::places::{Isolation, Place, TreeId};
use crate::store::ThreadRecord;
use crate::tools::ToolRegistry;
use crate::trees::Trees;

/// A conversation opened ahead, waiting for a thread.
pub(crate) struct SpareConversation {
    /// Its slot in the owner's tree.
    pub(crate) place: Place,
    /// The harness's conversation id.
    pub(crate) conversation_id: String,
    /// The open conversation.
    pub(crate) handle: Box<dyn ConversationHandle>,
    /// Its callbacks, bound by the thread that takes it.
    pub(crate) callbacks: Arc<LateCallbacks>,
    /// The contract it was opened with.
    signature: String,
}

/// Each tree's spare conversation, or its opening.
enum Stock {
    Opening,
    Ready(SpareConversation),
}

/// The spare conversations of an agent (a handle: clones share them).
#[derive(Clone)]
pub(crate) struct SpareConversations(Arc<Inner>);

struct Inner {
    stock: Mutex<HashMap<TreeId, Stock>>,
    /// Whether spares are kept at all.
    enabled: bool,
    /// Set at shutdown: no spare is kept from then on.
    closing: AtomicBool,
    options: AgentOptions,
    trees: Arc<Trees>,
    backend: Backend,
    tools: ToolRegistry,
}

impl SpareConversations {
    /// The spares of an agent with these parts (none unless
    /// [`AgentOptions::spare_conversations`], and never with a process per thread).
    pub(crate) fn new(
        options: &AgentOptions,
        trees: Arc<Trees>,
        backend: Backend,
        tools: ToolRegistry,
    ) -> Self {
        Self(Arc::new(Inner {
            stock: Mutex::default(),
            enabled: options.spare_conversations && trees.isolation() != Isolation::Thread,
            closing: AtomicBool::new(false),
            options: options.clone(),
            trees,
            backend,
            tools,
        }))
    }

    /// The spare of `tree` if it was opened with the contract `signature` (a spare of another
    /// contract stays for a thread it fits) and is still as it was opened: one that heard
    /// anything since — its connection or process ended — is let go.
    pub(crate) fn take(&self, tree: &TreeId, signature: &str) -> Option<SpareConversation> {
        let mut spare = self.remove_if(tree, |spare| spare.signature == signature)?;
        if spare.handle.try_next_event().is_some() {
            tracing::info!(%tree, conversation_id = %spare.conversation_id, "the conversation opened ahead has ended (its process or connection did); the thread opens its own");
            let spares = self.clone();
            tokio::spawn(async move { spares.discard(spare).await });
            return None;
        }
        Some(spare)
    }

    /// `tree`'s spare, removed, if it is ready and `wanted`.
    fn remove_if(
        &self,
        tree: &TreeId,
        wanted: impl FnOnce(&SpareConversation) -> bool,
    ) -> Option<SpareConversation> {
        let mut trees = self.0.stock.lock();
        match trees.get(tree) {
            Some(Stock::Ready(spare)) if wanted(spare) => {}
            _ => return None,
        }
        match trees.remove(tree) {
            Some(Stock::Ready(spare)) => Some(spare),
            _ => None,
        }
    }

    /// Opens a spare for `owner`'s `tree` in the background, unless it has one (or one is
    /// being opened), or the agent keeps none.
    pub(crate) fn refill(&self, owner: &Owner, tree: &TreeId) {
        if !self.0.enabled || self.closing() {
            return;
        }
        {
            let mut stock = self.0.stock.lock();
            if stock.contains_key(tree) {
                return;
            }
            stock.insert(tree.clone(), Stock::Opening);
        }
        let (spares, owner, tree) = (self.clone(), owner.clone(), tree.clone());
        tokio::spawn(async move {
            let opened = spares.open(&owner, &tree).await;
            let unwanted = match opened {
                Ok(spare) if !spares.closing() => {
                    tracing::debug!(%tree, slot = %spare.place.slot, conversation_id = %spare.conversation_id, "a conversation is open ahead of the next new thread");
                    let id = spare.conversation_id.clone();
                    spares
                        .0
                        .stock
                        .lock()
                        .insert(tree.clone(), Stock::Ready(spare));
                    tokio::time::sleep(spares.0.options.hibernate_after).await;
                    spares.expire(&tree, &id).await;
                    return;
                }
                Ok(spare) => Some(spare),
                Err(why) => {
                    tracing::debug!(%tree, why, "no conversation opened ahead");
                    None
                }
            };
            spares.0.stock.lock().remove(&tree);
            if let Some(spare) = unwanted {
                spares.discard(spare).await;
            }
        });
    }

    /// Closes every spare and removes its files; none is kept from then on (shutdown).
    pub(crate) async fn close_all(&self) {
        self.0.closing.store(true, Ordering::SeqCst);
        let spares: Vec<SpareConversation> = self
            .0
            .stock
            .lock()
            .drain()
            .filter_map(|(_, stock)| match stock {
                Stock::Ready(spare) => Some(spare),
                Stock::Opening => None,
            })
            .collect();
        for spare in spares {
            self.discard(spare).await;
        }
    }

    fn closing(&self) -> bool {
        self.0.closing.load(Ordering::SeqCst)
    }

    /// Opens a spare conversation in a new slot of `tree`.
    async fn open(&self, owner: &Owner, tree: &TreeId) -> Result<SpareConversation, String> {
        let inner = &self.0;
        let trees = inner.trees.clone();
        let (owner, tree) = (owner.clone(), tree.clone());
        let (place, placement) = tokio::task::spawn_blocking(move || {
            let slot = trees.new_slot(&tree)?;
            let place = Place { tree, slot };
            let placement = trees.placement(&owner, "", &place)?;
            Ok::<_, crate::trees::TreeError>((place, placement))
        })
        .await
        .map_err(|e| e.to_string())?
        .map_err(|e| e.to_string())?;
        let contract = Contract::new(&[], &inner.options, &inner.tools);
        let conversation_id = uuid::Uuid::new_v4().simple().to_string();
        let config = contract
            .conversation_config(
                &inner.options,
                &inner.tools,
                &placement.workspace.path(),
                &placement.app_data_dir.path(),
                &conversation_id,
                false,
            )
            .build()
            .map_err(|e| e.to_string())?;
        let callbacks = Arc::new(LateCallbacks::default());
        match inner
            .backend
            .0
            .open(&placement, config, callbacks.clone())
            .await
        {
            Ok(handle) => Ok(SpareConversation {
                place,
                conversation_id,
                handle,
                callbacks,
                signature: contract.signature,
            }),
            Err(e) => {
                self.remove_files(&place, &conversation_id).await;
                Err(e.to_string())
            }
        }
    }

    /// Closes `tree`'s spare `id` if no thread took it.
    async fn expire(&self, tree: &TreeId, id: &str) {
        let Some(spare) = self.remove_if(tree, |spare| spare.conversation_id == id) else {
            return;
        };
        tracing::debug!(%tree, conversation_id = %id, "closing a conversation opened ahead that no thread took");
        self.discard(spare).await;
    }

    /// Closes a spare no thread will take and removes its files.
    async fn discard(&self, spare: SpareConversation) {
        spare.handle.close().await;
        self.remove_files(&spare.place, &spare.conversation_id)
            .await;
    }

    /// Removes a spare's slot and conversation database, as a deleted thread's.
    async fn remove_files(&self, place: &Place, conversation_id: &str) {
        let record = ThreadRecord {
            place: Some(place.clone()),
            conversation_id: conversation_id.to_owned(),
            ..ThreadRecord::default()
        };
        let trees = self.0.trees.clone();
        let _ = tokio::task::spawn_blocking(move || trees.remove_thread_files(&record)).await;
    }
}

/// A spare's callbacks: the thread's once one took it; before that nothing is answered as
/// yes (the harness asks nothing of a conversation that was sent no input).
#[derive(Default)]
pub(crate) struct LateCallbacks {
    thread: OnceLock<Arc<dyn Callbacks>>,
}

impl LateCallbacks {
    /// Makes the thread's callbacks this conversation's.
    pub(crate) fn bind(&self, callbacks: Arc<dyn Callbacks>) {
        if self.thread.set(callbacks).is_err() {
            tracing::error!("a conversation opened ahead was bound to a second thread");
        }
    }
}

const UNBOUND: &str = "this conversation has no thread yet";

#[async_trait]
impl Callbacks for LateCallbacks {
    async fn tool_call(&self, ctx: &CallContext, call: ToolCallRequest) -> ToolOutcome {
        match self.thread.get() {
            Some(thread) => thread.tool_call(ctx, call).await,
            None => ToolOutcome::error(UNBOUND),
        }
    }

    async fn hook(&self, ctx: &CallContext, request: HookRequest) -> HookResponse {
        match self.thread.get() {
            Some(thread) => thread.hook(ctx, request).await,
            None => match request {
                HookRequest::PreTurn(_) | HookRequest::PreTool(_) => {
                    HookResponse::Deny(UNBOUND.into())
                }
                _ => HookResponse::Empty,
            },
        }
    }

    async fn policy(&self, ctx: &CallContext, request: PolicyRequest) -> PolicyOutcome {
        match self.thread.get() {
            Some(thread) => thread.policy(ctx, request).await,
            None => PolicyOutcome::NoMatch,
        }
    }

    async fn question(&self, ctx: &CallContext, request: QuestionRequest) -> QuestionAnswer {
        match self.thread.get() {
            Some(thread) => thread.question(ctx, request).await,
            None => QuestionAnswer::Answers(vec![
                harness_client::Answer::Unanswered;
                request.questions.len()
            ]),
        }
    }

    async fn tool_confirmation(
        &self,
        ctx: &CallContext,
        trajectory_id: &str,
        step_index: u32,
    ) -> bool {
        match self.thread.get() {
            Some(thread) => {
                thread
                    .tool_confirmation(ctx, trajectory_id, step_index)
                    .await
            }
            None => false,
        }
    }
}
