//! Leases: which replica may drive a thread when several share one save dir.
//!
//! Several servers (replicas) can share one save dir and workspace root behind a proxy that
//! routes each thread to one of them. Two replicas must never drive the same harness
//! conversation, so a thread's task holds a lease on the thread while it lives: it takes the
//! lease before it reads the thread's record (so it sees what the previous holder left),
//! renews it while it lives, and gives it up when it ends — hibernation, a timeout or shutdown.
//! A replica that dies stops renewing, and its leases expire. A replica that needs a thread
//! another one holds asks for it ([`ThreadLeases::want`]); the holder, at its next renewal,
//! hands an idle thread over (or once its turn ends), so a thread that moves between replicas
//! waits about a renewal period, not until the holder would hibernate it.
//!
//! This crate only asks; where leases are kept (files on the shared volume, in agui-server) is
//! the embedder's choice, through [`ThreadLeases`]. Without one, a thread's task never asks
//! (one server alone owns its save dir).

use std::time::Duration;

/// The lease keeper an agent asks before it drives a thread. Its calls do blocking I/O (small
/// files on a shared volume): the agent makes them off the async threads.
pub trait ThreadLeases: Send + Sync + 'static {
    /// Takes the lease of `thread_id` for this replica, or renews it when this replica holds
    /// it. `Ok` says how long the lease now lasts unless renewed.
    fn acquire(&self, thread_id: &str) -> Result<Duration, LeaseDenied>;

    /// Gives the lease of `thread_id` up (nothing when this replica does not hold it).
    fn release(&self, thread_id: &str);

    /// How often a held lease is renewed (well within its lifetime).
    fn renew_every(&self) -> Duration;

    /// Asks the replica holding the lease of `thread_id` to hand the thread over: a mark beside
    /// the lease that the holder reads when it next renews (see [`ThreadLeases::wanted`]). A
    /// replica waiting for a lease calls it on every try, so the mark stays fresh while it waits.
    fn want(&self, thread_id: &str);

    /// Whether another replica has asked for `thread_id` ([`ThreadLeases::want`]) recently: the
    /// holder then hands the thread over as soon as it is idle.
    fn wanted(&self, thread_id: &str) -> bool;
}

/// Why a lease was not granted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LeaseDenied {
    /// Another replica holds it; it may be free after `retry_after` (when that replica has
    /// died, its lease has expired by then).
    Held {
        /// The replica holding it.
        holder: String,
        /// When to try again.
        retry_after: Duration,
    },
    /// The lease moved while this replica was taking it (taken and given up meanwhile); asking
    /// again settles who holds it.
    Contended,
    /// The lease store could not be read or written (the shared volume failed).
    StoreFailed {
        /// The failure's kind, for decisions.
        kind: std::io::ErrorKind,
        /// What failed, for the log.
        detail: String,
    },
    /// The agent keeps no leases (it has a single replica), so none can be taken.
    NotKept,
}

impl LeaseDenied {
    /// The store's failure `error`.
    pub fn store_failed(error: &std::io::Error) -> LeaseDenied {
        LeaseDenied::StoreFailed {
            kind: error.kind(),
            detail: error.to_string(),
        }
    }

    /// The lease work `error` that never finished (its task panicked or was cancelled).
    pub(crate) fn task_failed(error: &tokio::task::JoinError) -> LeaseDenied {
        LeaseDenied::StoreFailed {
            kind: std::io::ErrorKind::Other,
            detail: format!("the lease's file work did not finish: {error}"),
        }
    }

    /// Whether asking again soon may succeed without the holder giving the lease up: the
    /// store failed, or the lease moved meanwhile.
    pub fn is_transient(&self) -> bool {
        matches!(
            self,
            LeaseDenied::Contended | LeaseDenied::StoreFailed { .. }
        )
    }
}

impl std::fmt::Display for LeaseDenied {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Held {
                holder,
                retry_after,
            } => write!(
                f,
                "held by replica `{holder}` (retry in {} s)",
                retry_after.as_secs().max(1)
            ),
            Self::Contended => write!(f, "the lease changed hands while it was being taken"),
            Self::StoreFailed { detail, .. } => write!(f, "the lease store failed: {detail}"),
            Self::NotKept => write!(f, "the agent keeps no leases"),
        }
    }
}
