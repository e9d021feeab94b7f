//! An owner's thread changes, as a stream for live lists, on every replica: one background scan
//! of the thread store per agent — woken by this server's own record writes, and every second
//! for those of other replicas sharing the store — diffed against the scan before and fanned
//! out by owner. It runs only while someone watches.

use std::collections::HashMap;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Weak};
use std::task::{Context, Poll};
use std::time::Duration;

use futures_util::Stream;
use tokio::sync::broadcast;
use tokio_stream::wrappers::BroadcastStream;
use tokio_stream::wrappers::errors::BroadcastStreamRecvError;

use super::{ThreadChange, ThreadSummary};
use crate::owner::Owner;
use crate::thread::context::ThreadContext;

/// How often the store is scanned for other replicas' changes while someone watches.
const RESCAN: Duration = Duration::from_secs(1);

/// Changes a slow watcher may fall behind by before it loses some (it is told to list again).
const BACKLOG: usize = 1024;

/// The scan shared by an agent's watchers.
pub(crate) struct ThreadWatch {
    changes: broadcast::Sender<(Owner, ThreadChange)>,
    scanning: AtomicBool,
}

impl ThreadWatch {
    pub(crate) fn new() -> Self {
        Self {
            changes: broadcast::channel(BACKLOG).0,
            scanning: AtomicBool::new(false),
        }
    }

    /// `owner`'s changes from now on (the scan starts with the first watcher).
    pub(crate) fn subscribe(
        self: &Arc<Self>,
        ctx: &Arc<ThreadContext>,
        owner: Owner,
    ) -> ThreadChanges {
        let changes = BroadcastStream::new(self.changes.subscribe());
        if !self.scanning.swap(true, Ordering::SeqCst) {
            tokio::spawn(scan(Arc::downgrade(ctx), self.clone()));
        }
        ThreadChanges { changes, owner }
    }
}

/// An owner's thread changes (see [`crate::Agent::watch_threads_as`]). A watcher that falls
/// more than a thousand changes behind loses the oldest: it ends, so that its client lists
/// again.
pub struct ThreadChanges {
    changes: BroadcastStream<(Owner, ThreadChange)>,
    owner: Owner,
}

impl Stream for ThreadChanges {
    type Item = ThreadChange;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<ThreadChange>> {
        loop {
            match Pin::new(&mut self.changes).poll_next(cx) {
                Poll::Ready(Some(Ok((owner, change)))) if owner == self.owner => {
                    return Poll::Ready(Some(change));
                }
                Poll::Ready(Some(Ok(_))) => {}
                Poll::Ready(Some(Err(BroadcastStreamRecvError::Lagged(missed)))) => {
                    tracing::warn!(
                        missed,
                        "a thread watcher fell behind; ending it so that its client lists again"
                    );
                    return Poll::Ready(None);
                }
                Poll::Ready(None) => return Poll::Ready(None),
                Poll::Pending => return Poll::Pending,
            }
        }
    }
}

/// Scans while anyone watches: after this server writes a record, and every [`RESCAN`].
async fn scan(ctx: Weak<ThreadContext>, watch: Arc<ThreadWatch>) {
    let Some(mut written) = ctx.upgrade().map(|ctx| ctx.records.written()) else {
        watch.scanning.store(false, Ordering::SeqCst);
        return;
    };
    let mut known = match ctx.upgrade() {
        Some(ctx) => by_id(super::all_summaries(&ctx).await),
        None => HashMap::new(),
    };
    loop {
        tokio::select! {
            changed = written.changed() => if changed.is_err() { break },
            () = tokio::time::sleep(RESCAN) => {}
        }
        if watch.changes.receiver_count() == 0 {
            watch.scanning.store(false, Ordering::SeqCst);
            // A watcher that came meanwhile found the scan running: go on for it.
            if watch.changes.receiver_count() == 0 || watch.scanning.swap(true, Ordering::SeqCst) {
                return;
            }
        }
        let Some(ctx_now) = ctx.upgrade() else { break };
        let now = by_id(super::all_summaries(&ctx_now).await);
        drop(ctx_now);
        for (owner, change) in diff(&known, &now) {
            let _ = watch.changes.send((owner, change));
        }
        known = now;
    }
    watch.scanning.store(false, Ordering::SeqCst);
}

fn by_id(summaries: Vec<(Owner, ThreadSummary)>) -> HashMap<String, (Owner, ThreadSummary)> {
    summaries
        .into_iter()
        .map(|(owner, summary)| (summary.id.clone(), (owner, summary)))
        .collect()
}

/// What changed from `before` to `now`, for each owner.
fn diff(
    before: &HashMap<String, (Owner, ThreadSummary)>,
    now: &HashMap<String, (Owner, ThreadSummary)>,
) -> Vec<(Owner, ThreadChange)> {
    let mut changes = Vec::new();
    for (id, (owner, summary)) in now {
        match before.get(id) {
            None => changes.push((owner.clone(), ThreadChange::Created(summary.clone()))),
            Some((was_owner, was)) if was_owner != owner => {
                changes.push((was_owner.clone(), ThreadChange::Deleted { id: id.clone() }));
                changes.push((owner.clone(), ThreadChange::Created(summary.clone())));
            }
            Some((_, was)) if was == summary => {}
            Some((_, was)) => {
                let only_state = ThreadSummary {
                    state: summary.state,
                    ..was.clone()
                } == *summary;
                changes.push((
                    owner.clone(),
                    if only_state {
                        ThreadChange::Status(summary.clone())
                    } else {
                        ThreadChange::Updated(summary.clone())
                    },
                ));
            }
        }
    }
    for (id, (owner, _)) in before {
        if !now.contains_key(id) {
            changes.push((owner.clone(), ThreadChange::Deleted { id: id.clone() }));
        }
    }
    changes
}

#[cfg(test)]
mod tests {
    use std::time::UNIX_EPOCH;

    use super::*;
    use crate::threads::ThreadState;

    fn summary(id: &str, title: &str, state: ThreadState) -> ThreadSummary {
        ThreadSummary {
            id: id.into(),
            title: title.into(),
            created_at: UNIX_EPOCH,
            updated_at: UNIX_EPOCH,
            state,
            archived: false,
            message_count: 0,
            workspace_bytes: 0,
            branch: String::new(),
            branches: Vec::new(),
        }
    }

    #[test]
    fn a_diff_tells_creations_state_changes_other_updates_and_deletions_apart() {
        let alice = Owner::named("alice");
        let at = |list: &[(&str, &str, ThreadState)]| {
            by_id(
                list.iter()
                    .map(|(id, title, state)| (alice.clone(), summary(id, title, *state)))
                    .collect(),
            )
        };
        let before = at(&[
            ("a", "A", ThreadState::Idle),
            ("b", "B", ThreadState::Idle),
            ("c", "C", ThreadState::Idle),
        ]);
        let now = at(&[
            ("a", "A", ThreadState::Running),
            ("b", "B renamed", ThreadState::Idle),
            ("d", "D", ThreadState::Idle),
        ]);
        let mut changes: Vec<String> = diff(&before, &now)
            .into_iter()
            .map(|(_, change)| match change {
                ThreadChange::Created(s) => format!("created {}", s.id),
                ThreadChange::Updated(s) => format!("updated {}", s.id),
                ThreadChange::Status(s) => format!("status {}", s.id),
                ThreadChange::Deleted { id } => format!("deleted {id}"),
            })
            .collect();
        changes.sort();
        assert_eq!(changes, ["created d", "deleted c", "status a", "updated b"]);
        assert!(diff(&now, &now).is_empty());
    }
}
