//! The public face of the crate: an [`Agent`] serves AG-UI runs for one agent configuration,
//! keeping one session per thread.

use std::collections::HashMap;
use std::path::PathBuf;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::task::{Context, Poll};
use std::time::Duration;

use agui_types::{Event, RunAgentInput};
use tokio::sync::mpsc;
use tracing::Instrument as _;

use crate::backend::{Backend, ConversationSource};
use crate::error::{RunErrorCode, RunFailure, SessionError};
use crate::options::AgentOptions;
use crate::session::{Session, SessionState};
use crate::store::{RecordWriter, StoreLimits, ThreadStore};
use crate::tools::ToolRegistry;

/// Events buffered between a run and its client.
const RUN_BUFFER: usize = 256;

/// Serves AG-UI runs for one agent configuration. Cheap to clone.
#[derive(Clone)]
pub struct Agent {
    pub(crate) inner: Arc<AgentInner>,
}

impl std::fmt::Debug for Agent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Agent")
            .field("name", &self.inner.options.name)
            .field("stats", &self.stats())
            .finish()
    }
}

pub(crate) struct AgentInner {
    pub(crate) options: AgentOptions,
    pub(crate) backend: Arc<dyn ConversationSource>,
    pub(crate) tools: ToolRegistry,
    pub(crate) records: Arc<RecordWriter>,
    pub(crate) sessions: Mutex<HashMap<String, Arc<Session>>>,
    /// Open harness conversations (hibernated sessions have none).
    pub(crate) live: AtomicUsize,
    pub(crate) closing: AtomicBool,
    /// Set at shutdown: runs in flight end at once.
    pub(crate) shutdown: tokio::sync::watch::Sender<bool>,
}

/// Counts, for monitoring.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct AgentStats {
    /// Sessions in memory (live or hibernated).
    pub sessions: usize,
    /// Sessions with an open harness conversation.
    pub live_conversations: usize,
    /// Sessions waiting for the client (a parked tool, question or approval).
    pub parked: usize,
    /// Harness processes of the backend.
    pub processes: usize,
}

impl Agent {
    /// An agent with `options`, opening conversations through `backend`, with `tools` as its
    /// server tools. Must be called inside a tokio runtime (it starts the session sweeper).
    pub fn new(
        options: AgentOptions,
        backend: Backend,
        tools: ToolRegistry,
    ) -> Result<Self, SessionError> {
        options.validate()?;
        for dir in [&options.workspace_root, &options.save_dir] {
            std::fs::create_dir_all(dir).map_err(|source| SessionError::Io {
                action: format!("create {}", dir.display()),
                source,
            })?;
        }
        let store = ThreadStore::open(
            &options.save_dir.join("threads"),
            StoreLimits {
                max_threads: options.max_remembered_threads,
                ttl: options.remember_threads_for,
            },
        )?;
        let inner = Arc::new(AgentInner {
            options,
            backend: backend.0,
            tools,
            records: RecordWriter::start(store),
            sessions: Mutex::new(HashMap::new()),
            live: AtomicUsize::new(0),
            closing: AtomicBool::new(false),
            shutdown: tokio::sync::watch::channel(false).0,
        });
        tokio::spawn(sweep(Arc::downgrade(&inner)));
        Ok(Self { inner })
    }

    /// The agent's configuration.
    pub fn options(&self) -> &AgentOptions {
        &self.inner.options
    }

    /// The agent's server tools.
    pub fn tools(&self) -> &ToolRegistry {
        &self.inner.tools
    }

    /// Starts a run. The run is driven by its own task: dropping the stream (the client went
    /// away) stops delivery, never the harness turn or a parked request.
    pub fn run(&self, input: RunAgentInput) -> RunStream {
        let (tx, rx) = mpsc::channel(RUN_BUFFER);
        let span = tracing::info_span!("run", thread_id = %input.thread_id, run_id = %input.run_id, agent = %self.inner.options.name);
        tokio::spawn(crate::run::execute(self.inner.clone(), input, tx).instrument(span));
        RunStream { rx }
    }

    /// Current counts.
    pub fn stats(&self) -> AgentStats {
        let sessions = self
            .inner
            .sessions
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        AgentStats {
            sessions: sessions.len(),
            live_conversations: self.inner.live.load(Ordering::SeqCst),
            parked: sessions.values().filter(|s| s.bridge.is_parked()).count(),
            processes: self.inner.backend.processes(),
        }
    }

    /// Closes every session (parked requests fail, conversations close so the harness
    /// checkpoints them) and stops the backend. Runs in flight end with `RUN_ERROR`.
    pub async fn shutdown(&self) {
        self.inner.closing.store(true, Ordering::SeqCst);
        self.inner.shutdown.send_replace(true);
        let sessions: Vec<Arc<Session>> = self
            .inner
            .sessions
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .drain()
            .map(|(_, s)| s)
            .collect();
        for session in sessions {
            // A run in flight ends at once on the shutdown signal and releases the state.
            let mut state = session.state.lock().await;
            self.inner.close_session(&session, &mut state).await;
        }
        self.inner.backend.shutdown().await;
        self.inner.records.flush().await;
    }
}

impl AgentInner {
    /// The session of `thread_id`, created (from the thread store, if it knows the thread) when
    /// missing. Never blocks on another thread's work.
    pub(crate) async fn session(self: &Arc<Self>, thread_id: &str) -> Arc<Session> {
        if let Some(session) = self
            .sessions
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(thread_id)
        {
            return session.clone();
        }
        let record = self.records.get(thread_id).await;
        if let Some(record) = &record {
            tracing::info!(conversation_id = %record.conversation_id, "thread returned; resuming its conversation");
        }
        let fresh = Session::new(thread_id.to_owned(), record, self.workspace_for(thread_id));
        let mut sessions = self.sessions.lock().unwrap_or_else(|p| p.into_inner());
        sessions
            .entry(thread_id.to_owned())
            .or_insert(fresh)
            .clone()
    }

    /// A short, stable workspace path for a thread (long paths make models corrupt them).
    pub(crate) fn workspace_for(&self, thread_id: &str) -> PathBuf {
        self.options
            .workspace_root
            .join(crate::sha256_hex(thread_id.as_bytes(), 5))
    }

    /// Takes a slot for one more live conversation, hibernating idle sessions if needed. The
    /// slot is counted in `live` at once (so concurrent openings cannot overshoot
    /// `max_sessions`); give it back with [`AgentInner::release_conversation`] if the opening
    /// fails.
    pub(crate) async fn reserve_conversation(&self, except: &str) -> Result<(), RunFailure> {
        let max = self.options.max_sessions;
        let try_reserve = || {
            self.live
                .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| {
                    (n < max).then_some(n + 1)
                })
                .is_ok()
        };
        if try_reserve() {
            return Ok(());
        }
        let mut candidates: Vec<Arc<Session>> = self
            .sessions
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .values()
            .filter(|s| s.thread_id != except)
            .cloned()
            .collect();
        candidates.sort_by_key(|s| std::cmp::Reverse(s.idle_for()));
        for session in candidates {
            if let Ok(mut state) = session.state.try_lock()
                && state.turn.is_none()
                && !session.bridge.is_parked()
                && let Some(conversation) = state.conversation.take()
            {
                tracing::info!(thread_id = %session.thread_id, "hibernating an idle session to make room");
                conversation.close().await;
                self.release_conversation();
                if try_reserve() {
                    return Ok(());
                }
            }
        }
        if try_reserve() {
            return Ok(());
        }
        let live = self.live.load(Ordering::SeqCst);
        Err(RunFailure::new(
            RunErrorCode::SessionLimit,
            format!(
                "Refusing to start a new Antigravity session: {live} of {max} in use (all busy or waiting for users)."
            ),
        ))
    }

    /// Gives back a live-conversation slot (the conversation closed, or never opened).
    pub(crate) fn release_conversation(&self) {
        self.live.fetch_sub(1, Ordering::SeqCst);
    }

    /// Persists a thread's record (written behind the run path).
    pub(crate) fn persist(&self, thread_id: &str, record: crate::store::ThreadRecord) {
        self.records.put(thread_id, record);
    }

    /// Closes a session whose state the caller holds (so no run is in flight and none can
    /// start on it): parked requests fail, the conversation closes (the harness keeps it), the
    /// record is persisted so the thread can come back. The session is marked retired: a run
    /// that was waiting for its lock moves to a fresh session of the thread.
    pub(crate) async fn close_session(&self, session: &Session, state: &mut SessionState) {
        session.retire();
        // Remember what the client still owes, so a result arriving after a restart is not lost.
        let record = state.record(session.bridge.pending_tool_calls());
        let released = session.bridge.close_all();
        if let Some(conversation) = state.conversation.take() {
            conversation.close().await;
            self.release_conversation();
        }
        state.turn = None;
        self.persist(&session.thread_id, record);
        tracing::info!(thread_id = %session.thread_id, released, "session closed");
    }
}

/// Reclaims idle sessions: hibernates idle conversations, forgets idle sessions, gives up on
/// parks nobody answered. A session whose run is in flight is never touched.
async fn sweep(agent: Weak<AgentInner>) {
    let period = match agent.upgrade() {
        Some(a) => (a.options.hibernate_after.min(a.options.session_timeout) / 2)
            .clamp(Duration::from_millis(100), Duration::from_secs(30)),
        None => return,
    };
    loop {
        tokio::time::sleep(period).await;
        let Some(agent) = agent.upgrade() else { return };
        if agent.closing.load(Ordering::SeqCst) {
            return;
        }
        let sessions: Vec<Arc<Session>> = agent
            .sessions
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .values()
            .cloned()
            .collect();
        for session in sessions {
            let idle = session.idle_for();
            let Ok(mut state) = session.state.try_lock() else {
                tracing::trace!(thread_id = %session.thread_id, "not reclaiming: a run is in flight");
                continue;
            };
            let parked = session.bridge.is_parked();
            let busy = parked || state.turn.is_some();
            let expired = if busy {
                idle >= agent.options.parked_timeout
            } else {
                idle >= agent.options.session_timeout
            };
            if expired {
                tracing::info!(thread_id = %session.thread_id, parked, "closing an idle session");
                agent.close_session(&session, &mut state).await;
                // Forgotten only once closed and persisted, still holding the state: a run that
                // found the session meanwhile waits, sees it retired, and resumes the thread in
                // a fresh session from the record (never next to a conversation still open).
                agent
                    .sessions
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .remove(&session.thread_id);
            } else if !busy
                && idle >= agent.options.hibernate_after
                && let Some(conversation) = state.conversation.take()
            {
                tracing::debug!(thread_id = %session.thread_id, "hibernating an idle session");
                conversation.close().await;
                agent.release_conversation();
            }
        }
        agent.records.sweep().await;
    }
}

/// The events of one run, ending with exactly one terminal event.
#[derive(Debug)]
pub struct RunStream {
    rx: mpsc::Receiver<Event>,
}

impl RunStream {
    /// The next event; `None` after the terminal event.
    pub async fn next_event(&mut self) -> Option<Event> {
        self.rx.recv().await
    }

    /// Every event until the end (for tests and batch use).
    pub async fn collect(mut self) -> Vec<Event> {
        let mut events = Vec::new();
        while let Some(event) = self.rx.recv().await {
            events.push(event);
        }
        events
    }
}

impl futures_util::Stream for RunStream {
    type Item = Event;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Event>> {
        self.rx.poll_recv(cx)
    }
}
