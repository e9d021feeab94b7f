//! Where threads work: directory trees named by random ids, never by anything a client chose.
//!
//! A **tree** holds the state of the threads that share a harness process — an owner's threads
//! under [`Isolation::Owner`], one thread's under [`Isolation::Thread`] — in two places:
//! `<save_dir>/o/<tree>/` (the harness's `HOME` and conversation storage, each thread's app data
//! dir under `app/<slot>/`) and `<workspace_root>/<tree>/` (each thread's workspace under
//! `<slot>/`). A confined process is given exactly those two directories, so its agent can
//! rewrite anything below them: the server reaches them only through the door
//! ([`harness_sandbox::AgentDir`]), which follows no link and opens no FIFO, and it names
//! nothing there after what it finds there (slots are random names, made by an exclusive
//! `mkdir`). What says whose a tree is stays out of every sandbox's reach (`claims.rs`): its
//! marker beside its state directory and the owner's claim under `<save_dir>/o/by-owner/`.
//! Every open checks the marker against the thread's owner (and thread): a mismatch is refused.
//!
//! **Spares** (`spares.rs`): a tree allocated ahead of need, unclaimed, whose harness process the
//! backend has booted and warmed; an owner's first thread (or, per thread, every new thread)
//! claims one, so its first turn does not wait for a boot. A server removes its own unclaimed
//! trees left from an earlier run when it starts. **Disk use** (`usage.rs`): measured in the
//! background through the door.

pub(crate) mod claims;
mod spares;
mod usage;

use parking_lot::Mutex;
use std::collections::HashMap;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use harness_sandbox::{AgentDir, SandboxError, SandboxIdentity};

use self::claims::{Claims, Marker, make_exclusive, make_private_dir, remove_empty_root};
use self::spares::{Spare, Spares};
pub(crate) use self::spares::{Stock, refill_spares};
use self::usage::{SlotUsage, UsageCache};
use crate::owner::Owner;
use crate::places::{
    Beneath, Isolation, Place, Placement, ProcessPlace, TreeId, random_slot, valid_slot,
};

/// Trees' state directories live under `<save_dir>/o/`.
pub(crate) const TREES_DIR: &str = "o";

/// Why a thread cannot be placed.
#[derive(Debug, thiserror::Error)]
pub(crate) enum TreeError {
    /// The tree's marker names someone else: refused (logged with both).
    #[error("the tree {tree} belongs to {found}, not to {expected}")]
    Mismatch {
        tree: TreeId,
        expected: String,
        found: String,
    },
    /// The server's own files could not be read or written.
    #[error("{action}: {source}")]
    Io { action: String, source: io::Error },
    /// A tree's directories could not be reached or made through the door (what the agent
    /// put there was refused, or the file system failed).
    #[error("{action}: {source}")]
    Door {
        action: String,
        source: SandboxError,
    },
}

fn io_error(action: impl Into<String>) -> impl FnOnce(io::Error) -> TreeError {
    let action = action.into();
    move |source| TreeError::Io { action, source }
}

fn door_error(action: impl Into<String>) -> impl FnOnce(SandboxError) -> TreeError {
    let action = action.into();
    move |source| TreeError::Door { action, source }
}

/// A hold on a spare's warm process, dropped once its claimant's conversation is open.
pub(crate) type Hold = Box<dyn Send + Sync>;

/// The trees of one agent.
pub(crate) struct Trees {
    save_dir: PathBuf,
    workspace_root: PathBuf,
    isolation: Isolation,
    made_by: String,
    /// Who owns what the server makes in a tree: the sandbox's own identity, when it has one.
    ownership: Option<SandboxIdentity>,
    claims: Claims,
    /// Owner → tree, as read or claimed (the files are the truth; this saves reading them).
    owners: Mutex<HashMap<Owner, TreeId>>,
    /// Serialises this process's claims of trees for owners.
    claiming: tokio::sync::Mutex<()>,
    spares: Spares,
    usage: UsageCache,
    slot_usage: SlotUsage,
}

/// A place for a new thread, and the hold on a spare's process if it claimed one (drop it once
/// the thread's conversation is open).
pub(crate) struct NewPlace {
    pub(crate) place: Place,
    pub(crate) hold: Option<Hold>,
}

impl Trees {
    /// The trees under `save_dir` and `workspace_root`; removes the unclaimed trees this server
    /// (`made_by`: its replica id, or `local`) left from an earlier run. What the server makes
    /// in a tree is owned by `ownership` (the sandbox's identity) when given.
    pub(crate) fn open(
        save_dir: &Path,
        workspace_root: &Path,
        isolation: Isolation,
        made_by: &str,
        ownership: Option<SandboxIdentity>,
    ) -> Self {
        let trees = Self {
            save_dir: save_dir.to_owned(),
            workspace_root: workspace_root.to_owned(),
            isolation,
            made_by: made_by.to_owned(),
            ownership,
            claims: Claims::new(save_dir.join(TREES_DIR)),
            owners: Mutex::new(HashMap::new()),
            claiming: tokio::sync::Mutex::new(()),
            spares: Spares::default(),
            usage: UsageCache::default(),
            slot_usage: SlotUsage::default(),
        };
        trees.remove_own_unclaimed();
        trees
    }

    pub(crate) fn isolation(&self) -> Isolation {
        self.isolation
    }

    fn trees_dir(&self) -> PathBuf {
        self.save_dir.join(TREES_DIR)
    }

    fn state_dir(&self, tree: &TreeId) -> PathBuf {
        self.trees_dir().join(tree.as_str())
    }

    fn workspaces_dir(&self, tree: &TreeId) -> PathBuf {
        self.workspace_root.join(tree.as_str())
    }

    /// A tree's half, opened at its root: a directory only the server names (its parent is the
    /// server's), so the door starts from it.
    fn open_root(&self, root: &Path) -> Result<AgentDir, TreeError> {
        AgentDir::open(root)
            .map(|dir| dir.owned_by(self.ownership))
            .map_err(door_error(format!("open {}", root.display())))
    }

    /// A tree's half that an earlier version made as the server's user, given whole to the
    /// sandbox's identity (once: the root's owner says it is done).
    fn give_to_sandbox(&self, root: &AgentDir) -> Result<(), TreeError> {
        let given = root
            .is_owned_as_asked()
            .map_err(door_error("read who owns a tree"))?;
        if !given {
            tracing::info!(root = %root.path().display(), "giving a tree made as the server's user to the sandbox's identity");
            root.give_all().map_err(door_error(format!(
                "give {} to the sandbox",
                root.path().display()
            )))?;
        }
        Ok(())
    }

    /// The process place of `tree`: its own storage and `HOME`, confined to the tree, unless
    /// threads share processes (then the agent's storage dir and the backend's `HOME`).
    pub(crate) fn process_place(&self, tree: &TreeId) -> ProcessPlace {
        let state = self.state_dir(tree);
        match self.isolation {
            Isolation::Shared => self.shared_place(),
            Isolation::Owner | Isolation::Thread => ProcessPlace {
                storage_dir: state.join("save"),
                home_dir: Some(state.join("home")),
                confine: vec![state, self.workspaces_dir(tree)],
                label: tree.to_string(),
            },
        }
    }

    /// The directory the harness of a thread placed in `tree` (or, with none, of threads sharing
    /// processes) saves their conversations beneath (the server's own: its free space is read,
    /// nothing in it).
    pub(crate) fn storage_root(&self, tree: Option<&TreeId>) -> PathBuf {
        match (self.isolation, tree) {
            (Isolation::Owner | Isolation::Thread, Some(tree)) => self.state_dir(tree),
            _ => self.save_dir.clone(),
        }
    }

    /// The process place of threads sharing processes ([`Isolation::Shared`]).
    pub(crate) fn shared_place(&self) -> ProcessPlace {
        ProcessPlace {
            storage_dir: self.save_dir.clone(),
            home_dir: None,
            confine: Vec::new(),
            label: "shared".into(),
        }
    }

    /// The tree `owner` has claimed, if any (read from disk when not known yet).
    pub(crate) fn existing_tree(&self, owner: &Owner) -> Option<TreeId> {
        if let Some(tree) = self.lock_owners().get(owner).cloned() {
            return Some(tree);
        }
        let tree = self.claims.read_claim(owner).ok().flatten()?;
        self.lock_owners().insert(owner.clone(), tree.clone());
        Some(tree)
    }

    /// The directories of the thread at `place`, owned by `owner`, after checking the tree's
    /// marker (the owner, and the thread for a tree of one thread) and making them (through the
    /// door: what stands in their way and is not a directory is moved aside). Blocking.
    pub(crate) fn placement(
        &self,
        owner: &Owner,
        thread_id: &str,
        place: &Place,
    ) -> Result<Placement, TreeError> {
        let marker = self.claims.read_marker(&place.tree)?;
        let expected_thread = (self.isolation == Isolation::Thread).then_some(thread_id);
        let found_thread = marker
            .thread
            .as_deref()
            .filter(|_| expected_thread.is_some());
        if !marker.claimed || marker.owner != *owner || found_thread != expected_thread {
            return Err(TreeError::Mismatch {
                tree: place.tree.clone(),
                expected: describe(owner, expected_thread),
                found: if marker.claimed {
                    describe(&marker.owner, marker.thread.as_deref())
                } else {
                    "nobody (an unclaimed tree)".into()
                },
            });
        }
        if !valid_slot(&place.slot) {
            return Err(TreeError::Io {
                action: format!("use slot `{}`", place.slot),
                source: io::Error::new(io::ErrorKind::InvalidData, "not a slot name"),
            });
        }
        let state = self.state_dir(&place.tree);
        let slot = Path::new(&place.slot);
        let workspaces = self.open_root(&self.workspaces_dir(&place.tree))?;
        let state_root = self.open_root(&state)?;
        for root in [&workspaces, &state_root] {
            self.give_to_sandbox(root)?;
        }
        workspaces
            .ensure_dir_all(slot)
            .map_err(door_error("make the thread's workspace"))?;
        let mut own = vec![Path::new("app").join(slot)];
        if self.isolation != Isolation::Shared {
            own.extend(["save".into(), "home".into()]);
        }
        for dir in &own {
            state_root
                .ensure_dir_all(dir)
                .map_err(door_error("make the thread's state directories"))?;
        }
        let storage_dir = match self.isolation {
            Isolation::Shared => Beneath::new(&self.save_dir, ""),
            Isolation::Owner | Isolation::Thread => Beneath::new(&state, "save"),
        };
        Ok(Placement {
            process: self.process_place(&place.tree),
            workspace: Beneath::new(self.workspaces_dir(&place.tree), slot),
            app_data_dir: Beneath::new(state, Path::new("app").join(slot)),
            storage_dir,
        })
    }

    /// The file `name` of the thread's process storage (a saved conversation), read through
    /// the door (never through a link the agent planted), at most `max` bytes; `None` when it
    /// does not exist. Blocking.
    pub(crate) fn read_storage(
        &self,
        placement: &Placement,
        name: &str,
        max: u64,
    ) -> Result<Option<Vec<u8>>, TreeError> {
        let Beneath { root, rel } = &placement.storage_dir;
        let dir = self.open_root(root)?;
        match dir.read(&rel.join(name), max) {
            Ok(bytes) => Ok(Some(bytes)),
            Err(SandboxError::Io { source, .. }) if source.kind() == io::ErrorKind::NotFound => {
                Ok(None)
            }
            Err(e) => Err(door_error(format!("read {name}"))(e)),
        }
    }

    /// The workspace of a thread placed at `placement`, opened through the door from its
    /// tree's root (what it makes belongs to the sandbox's identity). Blocking.
    pub(crate) fn open_workspace(&self, placement: &Placement) -> Result<AgentDir, TreeError> {
        let Beneath { root, rel } = &placement.workspace;
        self.open_root(root)?
            .dir(rel)
            .map_err(door_error("open the thread's workspace"))
    }

    /// The two directories of `tree` (its workspaces, its state), which its disk cap covers.
    pub(crate) fn tree_roots(&self, tree: &TreeId) -> [PathBuf; 2] {
        [self.workspaces_dir(tree), self.state_dir(tree)]
    }

    /// A place for a new thread of `owner`: in the owner's tree (claiming a spare's, or a new
    /// one, if the owner has none), or a tree of its own. It takes a spare only if one is
    /// ready: waiting for one being booted is the caller's choice ([`Trees::await_spare`]).
    /// The file work runs off the async threads.
    pub(crate) async fn new_place(
        self: &Arc<Self>,
        owner: &Owner,
        thread_id: &str,
    ) -> Result<NewPlace, TreeError> {
        let (tree, hold) = match self.isolation {
            Isolation::Thread => {
                let (trees, owner, thread) = (self.clone(), owner.clone(), thread_id.to_owned());
                blocking(move || trees.claim_tree(&owner, Some(&thread))).await?
            }
            Isolation::Owner | Isolation::Shared => self.owner_tree(owner).await?,
        };
        let trees = self.clone();
        let tree2 = tree.clone();
        match blocking(move || trees.new_slot(&tree2)).await {
            Ok(slot) => Ok(NewPlace {
                place: Place { tree, slot },
                hold,
            }),
            Err(e) => {
                if let Some(hold) = hold {
                    self.spares.give_back(Spare { tree, hold });
                }
                Err(e)
            }
        }
    }

    /// The owner's tree, claimed now if it has none.
    async fn owner_tree(
        self: &Arc<Self>,
        owner: &Owner,
    ) -> Result<(TreeId, Option<Hold>), TreeError> {
        if let Some(tree) = self.lock_owners().get(owner).cloned() {
            return Ok((tree, None));
        }
        let _claims = self.claiming.lock().await;
        let (trees, owner) = (self.clone(), owner.clone());
        blocking(move || {
            if let Some(tree) = trees.claims.read_claim(&owner)? {
                trees.lock_owners().insert(owner, tree.clone());
                return Ok((tree, None));
            }
            let (tree, hold) = trees.claim_tree(&owner, None)?;
            match trees.claims.link_claim(&owner, &tree)? {
                None => {
                    tracing::info!(%owner, %tree, spare = hold.is_some(), "the owner's directory tree is claimed");
                    trees.lock_owners().insert(owner, tree.clone());
                    Ok((tree, hold))
                }
                Some(theirs) => {
                    // Another replica claimed a tree for this owner first: ours goes back.
                    trees.release_claim(&tree, hold);
                    trees.lock_owners().insert(owner, theirs.clone());
                    Ok((theirs, None))
                }
            }
        })
        .await
    }

    /// A tree claimed for `owner` (and `thread`): a spare's if one is ready, else a new one.
    fn claim_tree(
        &self,
        owner: &Owner,
        thread: Option<&str>,
    ) -> Result<(TreeId, Option<Hold>), TreeError> {
        let marker = Marker {
            claimed: true,
            owner: owner.clone(),
            thread: thread.map(str::to_owned),
            made_by: self.made_by.clone(),
        };
        self.spares.arrived();
        if let Some(spare) = self.spares.take() {
            if let Err(e) = self.claims.write_marker(&spare.tree, &marker) {
                self.spares.give_back(spare);
                return Err(e);
            }
            return Ok((spare.tree, Some(spare.hold)));
        }
        let tree = self.make_tree(&marker)?;
        Ok((tree, None))
    }

    /// Gives a claimed tree back (another replica won the owner): unclaimed again, it waits as
    /// a spare if it has a warm process, else it is removed.
    fn release_claim(&self, tree: &TreeId, hold: Option<Hold>) {
        let marker = self.unclaimed_marker();
        match hold {
            Some(hold) if self.claims.write_marker(tree, &marker).is_ok() => {
                self.spares.give_back(Spare {
                    tree: tree.clone(),
                    hold,
                });
            }
            _ => self.remove_tree(tree),
        }
    }

    fn unclaimed_marker(&self) -> Marker {
        Marker {
            claimed: false,
            owner: Owner::local(),
            thread: None,
            made_by: self.made_by.clone(),
        }
    }

    /// Makes a new tree: its two directories, each by an exclusive `mkdir` under a directory
    /// only the server writes, and its marker.
    fn make_tree(&self, marker: &Marker) -> Result<TreeId, TreeError> {
        let trees = self.trees_dir();
        make_private_dir(&trees).map_err(io_error(format!("create {}", trees.display())))?;
        make_private_dir(&self.workspace_root).map_err(io_error(format!(
            "create {}",
            self.workspace_root.display()
        )))?;
        loop {
            let tree = TreeId::random().map_err(io_error("allocate a tree id"))?;
            let state = self.state_dir(&tree);
            match make_exclusive(&state) {
                Ok(()) => {}
                // 2^-128: never, but an id is never reused.
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => continue,
                Err(e) => return Err(io_error(format!("create {}", state.display()))(e)),
            }
            let workspaces = self.workspaces_dir(&tree);
            match make_exclusive(&workspaces) {
                Ok(()) => {}
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
                    remove_empty_root(&state);
                    continue;
                }
                Err(e) => return Err(io_error(format!("create {}", workspaces.display()))(e)),
            }
            for root in [&state, &workspaces] {
                AgentDir::create(root, self.ownership).map_err(door_error(format!(
                    "give {} to the sandbox",
                    root.display()
                )))?;
            }
            self.claims.write_marker(&tree, marker)?;
            return Ok(tree);
        }
    }

    /// A new slot in `tree`: a random name whose workspace directory this call creates (a
    /// thread's, or a conversation's opened ahead of its thread). Blocking.
    pub(crate) fn new_slot(&self, tree: &TreeId) -> Result<String, TreeError> {
        let workspaces = self.open_root(&self.workspaces_dir(tree))?;
        loop {
            let slot = random_slot().map_err(io_error("allocate a slot"))?;
            let made = workspaces
                .create_dir(Path::new(&slot))
                .map_err(door_error("create a thread's workspace"))?;
            if made {
                return Ok(slot);
            }
        }
    }

    /// The tree of `owner`, once known.
    pub(crate) fn tree_of(&self, owner: &Owner) -> Option<TreeId> {
        self.lock_owners().get(owner).cloned()
    }

    fn lock_owners(&self) -> parking_lot::MutexGuard<'_, HashMap<Owner, TreeId>> {
        self.owners.lock()
    }

    /// Removes what a thread left: its workspace, app data dir and conversation database (the
    /// whole tree for a tree of one thread; a workspace recorded before places existed, when it
    /// is a directory right under the workspace root). Through the door: a link planted
    /// anywhere on the way is removed as a link, never followed. Blocking.
    pub(crate) fn remove_thread_files(&self, record: &crate::store::ThreadRecord) {
        let Some(place) = &record.place else {
            let legacy = &record.workspace;
            if let Ok(rel) = legacy.strip_prefix(&self.workspace_root)
                && rel.components().count() == 1
            {
                self.remove_below(&self.workspace_root, rel);
            }
            return;
        };
        if !valid_slot(&place.slot) {
            return;
        }
        if self.isolation == Isolation::Thread {
            self.remove_tree(&place.tree);
            return;
        }
        let slot = Path::new(&place.slot);
        let state = self.state_dir(&place.tree);
        self.remove_below(&self.workspaces_dir(&place.tree), slot);
        self.remove_below(&state, &Path::new("app").join(slot));
        let id = &record.conversation_id;
        if !id.is_empty() && !id.contains(['/', '\\', '.']) {
            let (root, dir) = match self.isolation {
                Isolation::Shared => (self.save_dir.clone(), PathBuf::new()),
                Isolation::Owner | Isolation::Thread => (state, PathBuf::from("save")),
            };
            for suffix in ["", "-wal", "-shm"] {
                self.remove_below(&root, &dir.join(format!("{id}.db{suffix}")));
            }
        }
    }

    /// Removes `rel` below `root` through the door; failures are logged.
    fn remove_below(&self, root: &Path, rel: &Path) {
        let removed = AgentDir::open(root).and_then(|dir| dir.remove(rel));
        match removed {
            Ok(_) => {}
            Err(SandboxError::Io { source, .. }) if source.kind() == io::ErrorKind::NotFound => {}
            Err(e) => {
                tracing::warn!(path = %root.join(rel).display(), error = %e, "could not remove a thread's files");
            }
        }
    }

    /// Removes a tree's two directories and its marker. Blocking.
    pub(crate) fn remove_tree(&self, tree: &TreeId) {
        self.remove_below(&self.trees_dir(), Path::new(tree.as_str()));
        self.remove_below(&self.workspace_root, Path::new(tree.as_str()));
        self.claims.remove_marker(tree);
    }

    /// Removes the unclaimed trees this server made in an earlier run (its spares then).
    fn remove_own_unclaimed(&self) {
        for tree in self.claims.marked_trees() {
            if let Ok(marker) = self.claims.read_marker(&tree)
                && !marker.claimed
                && marker.made_by == self.made_by
            {
                self.remove_tree(&tree);
            }
        }
    }
}

/// Runs blocking file work off the async threads.
async fn blocking<T: Send + 'static>(
    job: impl FnOnce() -> Result<T, TreeError> + Send + 'static,
) -> Result<T, TreeError> {
    tokio::task::spawn_blocking(job)
        .await
        .map_err(|e| TreeError::Io {
            action: "prepare a thread's directories".into(),
            source: io::Error::other(e),
        })?
}

fn describe(owner: &Owner, thread: Option<&str>) -> String {
    match thread {
        Some(thread) => format!("{owner} (thread {thread})"),
        None => owner.to_string(),
    }
}

#[cfg(test)]
mod tests;
