//! Threads as their owner lists them: summaries read from the thread store (so every replica
//! lists the same threads, no lease needed), pages in a stable order with a cursor, renames and
//! archiving (through each thread's task, which alone writes its record), and a stream of
//! changes for live lists (`watch.rs`).

pub(crate) mod model;
mod watch;

use std::collections::HashSet;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crate::owner::Owner;
use crate::store::ThreadRecord;
use crate::thread::context::ThreadContext;

pub use model::{
    BranchSummary, MAX_TITLE_CHARS, TITLE_FROM_MESSAGE_CHARS, ThreadPatch, ThreadState, WaitingFor,
};
pub use watch::ThreadChanges;
pub(crate) use watch::ThreadWatch;

/// The most threads one page holds.
pub const MAX_PAGE: usize = 200;

/// The threads a page holds when the query does not say.
pub const DEFAULT_PAGE: usize = 50;

/// A thread as its owner's list shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ThreadSummary {
    /// The thread id.
    pub id: String,
    /// The first line of its first user message (at most [`TITLE_FROM_MESSAGE_CHARS`]
    /// characters) until renamed; empty before any.
    pub title: String,
    /// When it was made.
    pub created_at: SystemTime,
    /// When something last happened on it.
    pub updated_at: SystemTime,
    /// Where it stands.
    pub state: ThreadState,
    /// Archived by its owner.
    pub archived: bool,
    /// The messages `connect` restates, when last known.
    pub message_count: u32,
    /// The disk its workspace took when last measured (0 before).
    pub workspace_bytes: u64,
    /// The id of its current branch (its harness conversation).
    pub branch: String,
    /// Its other branches, oldest first (an edit or a regenerate forks a new one).
    pub branches: Vec<BranchSummary>,
}

/// Which threads a list holds, by archiving.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum ArchivedFilter {
    /// Those not archived.
    #[default]
    Exclude,
    /// Only the archived ones.
    Only,
    /// All.
    Include,
}

impl ArchivedFilter {
    fn admits(self, archived: bool) -> bool {
        match self {
            Self::Exclude => !archived,
            Self::Only => archived,
            Self::Include => true,
        }
    }
}

/// A page of an owner's threads to list.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ThreadQuery {
    /// At most this many (1 to [`MAX_PAGE`]).
    pub limit: usize,
    /// Where the previous page ended ([`ThreadPage::next_cursor`]).
    pub cursor: Option<String>,
    /// Which threads, by archiving.
    pub archived: ArchivedFilter,
}

impl Default for ThreadQuery {
    fn default() -> Self {
        Self {
            limit: DEFAULT_PAGE,
            cursor: None,
            archived: ArchivedFilter::default(),
        }
    }
}

/// One page of an owner's threads, newest activity first.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ThreadPage {
    /// The threads.
    pub threads: Vec<ThreadSummary>,
    /// Where the next page starts; `None` on the last page.
    pub next_cursor: Option<String>,
}

/// A change of one of an owner's threads.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ThreadChange {
    /// A thread appeared.
    Created(ThreadSummary),
    /// Something other than its state changed (its title, archiving, messages, workspace).
    Updated(ThreadSummary),
    /// Only its state changed.
    Status(ThreadSummary),
    /// It was deleted (or forgot past its retention).
    Deleted {
        /// Its id.
        id: String,
    },
}

/// Why a list or a change of threads was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ThreadsError {
    /// The page size is out of range.
    #[error("limit must be between 1 and {MAX_PAGE}")]
    BadLimit,
    /// The cursor is not one a page gave.
    #[error("the cursor is not one a page of threads gave")]
    BadCursor,
    /// The title is empty, too long or holds control characters.
    #[error("{0}")]
    BadTitle(String),
    /// The change asks for nothing.
    #[error("the change names neither a title, archiving nor a branch")]
    EmptyPatch,
    /// The thread has no such branch.
    #[error("the thread has no branch {0}")]
    NoSuchBranch(String),
    /// The thread cannot switch branches now (the message says why).
    #[error("{0}")]
    CannotSwitch(String),
}

/// `patch` checked: the title trimmed and valid.
pub(crate) fn check_patch(patch: ThreadPatch) -> Result<ThreadPatch, ThreadsError> {
    if patch.title.is_none() && patch.archived.is_none() && patch.branch.is_none() {
        return Err(ThreadsError::EmptyPatch);
    }
    let title = match patch.title {
        None => None,
        Some(title) => {
            let title = title.trim().to_owned();
            let chars = title.chars().count();
            if chars == 0 {
                return Err(ThreadsError::BadTitle("the title is empty".into()));
            }
            if chars > MAX_TITLE_CHARS {
                return Err(ThreadsError::BadTitle(format!(
                    "the title has {chars} characters, more than {MAX_TITLE_CHARS}"
                )));
            }
            if title.chars().any(char::is_control) {
                return Err(ThreadsError::BadTitle(
                    "the title holds control characters".into(),
                ));
            }
            Some(title)
        }
    };
    Ok(ThreadPatch {
        title,
        archived: patch.archived,
        branch: patch.branch,
    })
}

/// A thread's place in its owner's list: newest activity first, then by id.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
struct Position {
    newest_first: std::cmp::Reverse<u64>,
    id: String,
}

impl Position {
    fn of(summary: &ThreadSummary) -> Self {
        Self {
            newest_first: std::cmp::Reverse(unix(summary.updated_at)),
            id: summary.id.clone(),
        }
    }

    fn cursor(&self) -> String {
        format!(
            "{}.{}",
            self.newest_first.0,
            hex::encode(self.id.as_bytes())
        )
    }

    fn parse(cursor: &str) -> Result<Self, ThreadsError> {
        let (at, id) = cursor.split_once('.').ok_or(ThreadsError::BadCursor)?;
        let at = at.parse().map_err(|_| ThreadsError::BadCursor)?;
        let id = hex::decode(id).map_err(|_| ThreadsError::BadCursor)?;
        let id = String::from_utf8(id).map_err(|_| ThreadsError::BadCursor)?;
        Ok(Self {
            newest_first: std::cmp::Reverse(at),
            id,
        })
    }
}

/// The page `query` asks of `threads` (all of one owner's, in any order).
pub(crate) fn page(
    mut threads: Vec<ThreadSummary>,
    query: &ThreadQuery,
) -> Result<ThreadPage, ThreadsError> {
    if query.limit == 0 || query.limit > MAX_PAGE {
        return Err(ThreadsError::BadLimit);
    }
    let after = query.cursor.as_deref().map(Position::parse).transpose()?;
    threads.retain(|t| query.archived.admits(t.archived));
    threads.sort_by_cached_key(Position::of);
    let start = match &after {
        Some(after) => threads.partition_point(|t| Position::of(t) <= *after),
        None => 0,
    };
    let mut rest = threads.split_off(start);
    let more = rest.len() > query.limit;
    rest.truncate(query.limit);
    let next_cursor = more
        .then(|| rest.last().map(|t| Position::of(t).cursor()))
        .flatten();
    Ok(ThreadPage {
        threads: rest,
        next_cursor,
    })
}

/// What the list shows of `record` (the thread `id`), `live` saying whether a task serves it
/// on this server, `leases` whether other replicas may (then the record's state is the truth).
pub(crate) fn summary(
    id: &str,
    record: &ThreadRecord,
    live: bool,
    leases: bool,
    workspace_bytes: u64,
) -> ThreadSummary {
    let active = if record.active_at > 0 {
        record.active_at
    } else {
        record.updated_at
    };
    let created = if record.created_at > 0 {
        record.created_at
    } else {
        active
    };
    let state = if live || leases {
        record.state
    } else {
        // Nothing runs it anywhere: what the record says of a conversation or a turn is what
        // a server that stopped left. A frontend tool's result can still be given.
        match record.state {
            ThreadState::Waiting(WaitingFor::FrontendTool)
                if !record.pending_frontend_tools.is_empty() =>
            {
                record.state
            }
            _ => ThreadState::Hibernated,
        }
    };
    ThreadSummary {
        id: id.to_owned(),
        title: record.title.clone(),
        created_at: at(created),
        updated_at: at(active),
        state,
        archived: record.archived,
        message_count: record.message_count,
        workspace_bytes,
        branch: record.conversation_id.clone(),
        branches: record
            .branches
            .iter()
            .map(|b| BranchSummary {
                id: b.conversation_id.clone(),
                left_at: b.left_at.clone(),
                left_when: at(b.left_when),
                message_count: b.message_count,
            })
            .collect(),
    }
}

/// Whether `record` is `owner`'s.
pub(crate) fn owned_by(record: &ThreadRecord, owner: &Owner) -> bool {
    record.owner.as_ref().unwrap_or(&Owner::local()) == owner
}

/// Every thread's summary, with its owner: from the store (so every replica sees the same),
/// whether a task serves it on this server, and the disk its workspace took when last
/// measured (measured now in the background when never).
pub(crate) async fn all_summaries(ctx: &ThreadContext) -> Vec<(Owner, ThreadSummary)> {
    let records = ctx.records.scan().await;
    let live: HashSet<String> = ctx.registry.lock().keys().cloned().collect();
    let leases = ctx.leases.is_some();
    records
        .into_iter()
        .map(|(id, record)| {
            let bytes = record
                .place
                .as_ref()
                .map_or(0, |place| ctx.trees.slot_usage(place));
            let owner = record.owner.clone().unwrap_or_default();
            (
                owner,
                summary(&id, &record, live.contains(&id), leases, bytes),
            )
        })
        .collect()
}

fn unix(time: SystemTime) -> u64 {
    time.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs())
}

fn at(secs: u64) -> SystemTime {
    UNIX_EPOCH + Duration::from_secs(secs)
}

#[cfg(test)]
mod tests;
