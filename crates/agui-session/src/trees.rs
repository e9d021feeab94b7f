//! Where threads work: directory trees named by random ids, never by anything a client chose.
//!
//! A **tree** holds the state of the threads that share a harness process — an owner's threads
//! under [`Isolation::Owner`], one thread's under [`Isolation::Thread`] — in two places:
//! `<save_dir>/o/<tree>/` (a marker naming its owner, the harness's `HOME` and conversation
//! storage, each thread's app data dir under `app/<slot>/`) and `<workspace_root>/<tree>/` (each
//! thread's workspace under `<slot>/`). A confined process is given exactly those two
//! directories. Tree ids are 128 random bits, allocated by an exclusive `mkdir`; a thread's
//! place (tree and slot) is kept in its record, an owner's tree in `<save_dir>/o/by-owner/`
//! (claimed by hard link, so two replicas cannot give one owner two trees). Every open checks
//! the tree's marker against the thread's owner (and thread): a mismatch is refused.
//!
//! **Spares**: a tree allocated ahead of need, unclaimed, whose harness process the backend
//! has booted and warmed; an owner's first thread (or, per thread, every new thread) claims
//! one, so its first turn does not wait for a boot. A server removes its own unclaimed trees
//! left from an earlier run when it starts.

use std::collections::HashMap;
use std::fs;
use std::io::{self, Write as _};
use std::os::unix::fs::{DirBuilderExt as _, OpenOptionsExt as _};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};

use serde::{Deserialize, Serialize};

use crate::owner::Owner;
use crate::places::{Isolation, Place, Placement, ProcessPlace, TreeId};

/// Trees' state directories live under `<save_dir>/o/`.
const TREES_DIR: &str = "o";

/// Owner → tree claims, under the trees' directory.
const BY_OWNER_DIR: &str = "by-owner";

/// The marker in a tree's state directory.
const MARKER: &str = "owner.json";

/// How long a new owner or thread waits for a spare that is booting (a boot takes a few hundred
/// milliseconds; this only bounds a stuck one).
const SPARE_WAIT: std::time::Duration = std::time::Duration::from_secs(20);

/// What a tree's marker says.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Marker {
    /// Claimed by an owner (a spare's tree is not yet).
    claimed: bool,
    /// Its owner.
    owner: Owner,
    /// The thread, for a tree of one thread.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    thread: Option<String>,
    /// Who made it (`<replica or "local">`): a restarted server removes its unclaimed trees.
    made_by: String,
}

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
    /// The directories could not be read or written.
    #[error("{action}: {source}")]
    Io { action: String, source: io::Error },
}

fn io_error(action: impl Into<String>) -> impl FnOnce(io::Error) -> TreeError {
    let action = action.into();
    move |source| TreeError::Io { action, source }
}

/// An unclaimed tree whose process the backend keeps warm until it is claimed.
struct Spare {
    tree: TreeId,
    /// The backend's hold on the warm process (dropped once the claimant's conversation is
    /// open, so the process is never idle in between).
    hold: Box<dyn Send + Sync>,
}

/// The trees of one agent.
pub(crate) struct Trees {
    save_dir: PathBuf,
    workspace_root: PathBuf,
    isolation: Isolation,
    made_by: String,
    /// Owner → tree, as read or claimed (the files are the truth; this saves reading them).
    owners: Mutex<HashMap<Owner, TreeId>>,
    /// Serialises this process's claims of trees for owners.
    claiming: tokio::sync::Mutex<()>,
    spares: Mutex<Vec<Spare>>,
    /// Spares being booted, and a signal when one is ready (or failed).
    preparing: std::sync::atomic::AtomicUsize,
    prepared: tokio::sync::Notify,
    /// The disk each tree used when last measured, and whether a measurement runs.
    usage: Arc<Mutex<HashMap<TreeId, Usage>>>,
}

#[derive(Debug, Clone, Copy, Default)]
struct Usage {
    bytes: Option<u64>,
    measuring: bool,
}

/// A place for a new thread, and the hold on a spare's process if it claimed one (drop it once
/// the thread's conversation is open).
pub(crate) struct NewPlace {
    pub(crate) place: Place,
    pub(crate) hold: Option<Box<dyn Send + Sync>>,
}

impl Trees {
    /// The trees under `save_dir` and `workspace_root`; removes the unclaimed trees this server
    /// (`made_by`: its replica id, or `local`) left from an earlier run.
    pub(crate) fn open(
        save_dir: &Path,
        workspace_root: &Path,
        isolation: Isolation,
        made_by: &str,
    ) -> Self {
        let trees = Self {
            save_dir: save_dir.to_owned(),
            workspace_root: workspace_root.to_owned(),
            isolation,
            made_by: made_by.to_owned(),
            owners: Mutex::new(HashMap::new()),
            claiming: tokio::sync::Mutex::new(()),
            spares: Mutex::new(Vec::new()),
            preparing: std::sync::atomic::AtomicUsize::new(0),
            prepared: tokio::sync::Notify::new(),
            usage: Arc::default(),
        };
        trees.remove_own_unclaimed();
        trees
    }

    pub(crate) fn isolation(&self) -> Isolation {
        self.isolation
    }

    fn state_dir(&self, tree: &TreeId) -> PathBuf {
        self.save_dir.join(TREES_DIR).join(tree.as_str())
    }

    fn workspaces_dir(&self, tree: &TreeId) -> PathBuf {
        self.workspace_root.join(tree.as_str())
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
        let tree = read_claim(&self.by_owner_file(owner)).ok().flatten()?;
        self.lock_owners().insert(owner.clone(), tree.clone());
        Some(tree)
    }

    /// The directories of the thread at `place`, owned by `owner`, after checking the tree's
    /// marker (the owner, and the thread for a tree of one thread) and making them.
    pub(crate) fn placement(
        &self,
        owner: &Owner,
        thread_id: &str,
        place: &Place,
    ) -> Result<Placement, TreeError> {
        let marker = self.read_marker(&place.tree)?;
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
        let placement = Placement {
            process: self.process_place(&place.tree),
            workspace: self.workspaces_dir(&place.tree).join(&place.slot),
            app_data_dir: state.join("app").join(&place.slot),
        };
        let p = &placement.process;
        for dir in [
            &placement.workspace,
            &placement.app_data_dir,
            &p.storage_dir,
        ]
        .into_iter()
        .chain(&p.home_dir)
        {
            make_private_dir(dir).map_err(io_error(format!("create {}", dir.display())))?;
        }
        Ok(placement)
    }

    /// A place for a new thread of `owner`: in the owner's tree (claiming a spare's, or a new
    /// one, if the owner has none), or a tree of its own. It takes a spare only if one is
    /// ready: waiting for one being booted is the caller's choice ([`Trees::await_spare`]).
    pub(crate) async fn new_place(
        &self,
        owner: &Owner,
        thread_id: &str,
    ) -> Result<NewPlace, TreeError> {
        match self.isolation {
            Isolation::Thread => {
                let (tree, hold) = self.claim_tree(owner, Some(thread_id))?;
                let slot = self.new_slot(&tree)?;
                Ok(NewPlace {
                    place: Place { tree, slot },
                    hold,
                })
            }
            Isolation::Owner | Isolation::Shared => {
                let (tree, hold) = self.owner_tree(owner).await?;
                let slot = self.new_slot(&tree)?;
                Ok(NewPlace {
                    place: Place { tree, slot },
                    hold,
                })
            }
        }
    }

    /// The owner's tree, claimed now if it has none.
    async fn owner_tree(
        &self,
        owner: &Owner,
    ) -> Result<(TreeId, Option<Box<dyn Send + Sync>>), TreeError> {
        if let Some(tree) = self.lock_owners().get(owner).cloned() {
            return Ok((tree, None));
        }
        let _claims = self.claiming.lock().await;
        let claim_file = self.by_owner_file(owner);
        if let Some(tree) = read_claim(&claim_file)? {
            self.lock_owners().insert(owner.clone(), tree.clone());
            return Ok((tree, None));
        }
        let (tree, hold) = self.claim_tree(owner, None)?;
        match link_claim(&claim_file, owner, &tree)? {
            None => {
                tracing::info!(%owner, %tree, spare = hold.is_some(), "the owner's directory tree is claimed");
                self.lock_owners().insert(owner.clone(), tree.clone());
                Ok((tree, hold))
            }
            Some(theirs) => {
                // Another replica claimed a tree for this owner first: ours goes back.
                self.release_claim(&tree, hold);
                self.lock_owners().insert(owner.clone(), theirs.clone());
                Ok((theirs, None))
            }
        }
    }

    /// A tree claimed for `owner` (and `thread`): a spare's if one is ready, else a new one.
    fn claim_tree(
        &self,
        owner: &Owner,
        thread: Option<&str>,
    ) -> Result<(TreeId, Option<Box<dyn Send + Sync>>), TreeError> {
        let marker = Marker {
            claimed: true,
            owner: owner.clone(),
            thread: thread.map(str::to_owned),
            made_by: self.made_by.clone(),
        };
        let spare = self
            .spares
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .pop();
        if let Some(spare) = spare {
            self.write_marker(&spare.tree, &marker)?;
            return Ok((spare.tree, Some(spare.hold)));
        }
        let tree = self.make_tree(&marker)?;
        Ok((tree, None))
    }

    /// Gives a claimed tree back (another replica won the owner): unclaimed again, it waits as
    /// a spare if it has a warm process, else it is removed.
    fn release_claim(&self, tree: &TreeId, hold: Option<Box<dyn Send + Sync>>) {
        let marker = Marker {
            claimed: false,
            owner: Owner::local(),
            thread: None,
            made_by: self.made_by.clone(),
        };
        match hold {
            Some(hold) if self.write_marker(tree, &marker).is_ok() => {
                self.spares
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .push(Spare {
                        tree: tree.clone(),
                        hold,
                    });
            }
            _ => self.remove_tree(tree),
        }
    }

    /// Whether a new place for `owner` should first wait for a spare being booted: it needs a
    /// new tree, none is ready and one is coming (claiming it soon beats booting a second
    /// process beside it).
    pub(crate) fn should_await_spare(&self, owner: &Owner) -> bool {
        (self.isolation == Isolation::Thread || self.existing_tree(owner).is_none())
            && self.spares() == 0
            && self.preparing.load(std::sync::atomic::Ordering::SeqCst) > 0
    }

    /// Waits for a spare being booted, if one is and none is ready (bounded: a stuck boot
    /// does not hold a thread for long). Holds nothing: it can be dropped at any point.
    pub(crate) async fn await_spare(&self) {
        use std::sync::atomic::Ordering;
        let deadline = tokio::time::Instant::now() + SPARE_WAIT;
        loop {
            let ready = self.prepared.notified();
            if self.spares() > 0 || self.preparing.load(Ordering::SeqCst) == 0 {
                return;
            }
            if tokio::time::timeout_at(deadline, ready).await.is_err() {
                return;
            }
        }
    }

    /// Makes a new, unclaimed tree and its process place, for a spare.
    pub(crate) fn make_spare_tree(&self) -> Result<(TreeId, ProcessPlace), TreeError> {
        let tree = self.make_tree(&Marker {
            claimed: false,
            owner: Owner::local(),
            thread: None,
            made_by: self.made_by.clone(),
        })?;
        let place = self.process_place(&tree);
        for dir in [&place.storage_dir].into_iter().chain(&place.home_dir) {
            make_private_dir(dir).map_err(io_error(format!("create {}", dir.display())))?;
        }
        Ok((tree, place))
    }

    /// Adds a spare tree whose process the backend keeps warm (`hold`).
    pub(crate) fn add_spare(&self, tree: TreeId, hold: Box<dyn Send + Sync>) {
        self.spares
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(Spare { tree, hold });
    }

    /// How many spares are ready.
    pub(crate) fn spares(&self) -> usize {
        self.spares
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .len()
    }

    /// Drops the spares (their processes stop with the backend).
    pub(crate) fn drop_spares(&self) {
        let spares =
            std::mem::take(&mut *self.spares.lock().unwrap_or_else(PoisonError::into_inner));
        for spare in spares {
            drop(spare.hold);
            self.remove_tree(&spare.tree);
        }
    }

    fn make_tree(&self, marker: &Marker) -> Result<TreeId, TreeError> {
        let trees = self.save_dir.join(TREES_DIR);
        make_private_dir(&trees).map_err(io_error(format!("create {}", trees.display())))?;
        make_private_dir(&self.workspace_root).map_err(io_error(format!(
            "create {}",
            self.workspace_root.display()
        )))?;
        loop {
            let tree = TreeId::random().map_err(io_error("allocate a tree id"))?;
            let state = self.state_dir(&tree);
            match fs::DirBuilder::new().mode(0o700).create(&state) {
                Ok(()) => {}
                // 2^-128: never, but an id is never reused.
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => continue,
                Err(e) => return Err(io_error(format!("create {}", state.display()))(e)),
            }
            let workspaces = self.workspaces_dir(&tree);
            match fs::DirBuilder::new().mode(0o700).create(&workspaces) {
                Ok(()) => {}
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
                    let _ = fs::remove_dir(&state);
                    continue;
                }
                Err(e) => return Err(io_error(format!("create {}", workspaces.display()))(e)),
            }
            self.write_marker(&tree, marker)?;
            return Ok(tree);
        }
    }

    /// A new slot in `tree`: the lowest number whose workspace directory this call creates.
    fn new_slot(&self, tree: &TreeId) -> Result<String, TreeError> {
        let workspaces = self.workspaces_dir(tree);
        let taken = fs::read_dir(&workspaces)
            .map(|entries| entries.count())
            .map_err(io_error(format!("list {}", workspaces.display())))?;
        for n in (taken + 1).. {
            let slot = n.to_string();
            match fs::DirBuilder::new()
                .mode(0o700)
                .create(workspaces.join(&slot))
            {
                Ok(()) => return Ok(slot),
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
                Err(e) => {
                    return Err(io_error(format!(
                        "create a workspace in {}",
                        workspaces.display()
                    ))(e));
                }
            }
        }
        unreachable!("an unbounded range ends only by returning")
    }

    fn marker_file(&self, tree: &TreeId) -> PathBuf {
        self.state_dir(tree).join(MARKER)
    }

    fn read_marker(&self, tree: &TreeId) -> Result<Marker, TreeError> {
        let file = self.marker_file(tree);
        let text = fs::read(&file).map_err(io_error(format!("read {}", file.display())))?;
        serde_json::from_slice(&text).map_err(|e| TreeError::Io {
            action: format!("read {}", file.display()),
            source: io::Error::new(io::ErrorKind::InvalidData, e),
        })
    }

    /// Writes a tree's marker: a new file renamed over the old, readable by the server only.
    fn write_marker(&self, tree: &TreeId, marker: &Marker) -> Result<(), TreeError> {
        let file = self.marker_file(tree);
        let temp = file.with_extension("json.new");
        let json = serde_json::to_vec(marker).expect("a marker serialises");
        write_private(&temp, &json)
            .and_then(|()| fs::rename(&temp, &file))
            .map_err(io_error(format!("write {}", file.display())))
    }

    fn by_owner_file(&self, owner: &Owner) -> PathBuf {
        let key = match owner.identity() {
            Some(identity) => crate::hash::sha256_hex(format!("owner:{identity}").as_bytes(), 32),
            None => "local".into(),
        };
        self.save_dir
            .join(TREES_DIR)
            .join(BY_OWNER_DIR)
            .join(format!("{key}.json"))
    }

    fn lock_owners(&self) -> std::sync::MutexGuard<'_, HashMap<Owner, TreeId>> {
        self.owners.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Removes what a thread left: its workspace, app data dir and conversation database (the
    /// whole tree for a tree of one thread; a workspace recorded before places existed, when it
    /// lies under the workspace root).
    pub(crate) fn remove_thread_files(&self, record: &crate::store::ThreadRecord) {
        let remove = |path: &Path| {
            let removed = if path.is_dir() {
                fs::remove_dir_all(path)
            } else {
                fs::remove_file(path)
            };
            if let Err(e) = removed
                && e.kind() != io::ErrorKind::NotFound
            {
                tracing::warn!(path = %path.display(), error = %e, "could not remove a thread's files");
            }
        };
        let Some(place) = &record.place else {
            let legacy = &record.workspace;
            if !legacy.as_os_str().is_empty() && legacy.starts_with(&self.workspace_root) {
                remove(legacy);
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
        remove(&self.workspaces_dir(&place.tree).join(&place.slot));
        remove(&self.state_dir(&place.tree).join("app").join(&place.slot));
        let id = &record.conversation_id;
        if !id.is_empty() && !id.contains(['/', '\\', '.']) {
            let storage = self.process_place(&place.tree).storage_dir;
            for suffix in ["", "-wal", "-shm"] {
                remove(&storage.join(format!("{id}.db{suffix}")));
            }
        }
    }

    /// The disk `tree` used when last measured (workspaces and state; blocks allocated).
    pub(crate) fn usage(&self, tree: &TreeId) -> Option<u64> {
        self.usage
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(tree)
            .and_then(|u| u.bytes)
    }

    /// Measures `tree` in the background (once at a time per tree; the result is read with
    /// [`Trees::usage`]).
    pub(crate) fn measure(&self, tree: &TreeId) {
        {
            let mut usage = self.usage.lock().unwrap_or_else(PoisonError::into_inner);
            let entry = usage.entry(tree.clone()).or_default();
            if entry.measuring {
                return;
            }
            entry.measuring = true;
        }
        let dirs = [self.workspaces_dir(tree), self.state_dir(tree)];
        let (usage, tree) = (self.usage.clone(), tree.clone());
        tokio::task::spawn_blocking(move || {
            let bytes = dirs.iter().map(|dir| disk_usage(dir)).sum();
            let mut usage = usage.lock().unwrap_or_else(PoisonError::into_inner);
            usage.insert(
                tree,
                Usage {
                    bytes: Some(bytes),
                    measuring: false,
                },
            );
        });
    }

    /// Removes a tree's two directories.
    pub(crate) fn remove_tree(&self, tree: &TreeId) {
        for dir in [self.workspaces_dir(tree), self.state_dir(tree)] {
            if let Err(e) = fs::remove_dir_all(&dir)
                && e.kind() != io::ErrorKind::NotFound
            {
                tracing::warn!(dir = %dir.display(), error = %e, "could not remove a directory tree");
            }
        }
    }

    /// Removes the unclaimed trees this server made in an earlier run (its spares then).
    fn remove_own_unclaimed(&self) {
        let Ok(entries) = fs::read_dir(self.save_dir.join(TREES_DIR)) else {
            return;
        };
        for entry in entries.flatten() {
            let Some(tree) = entry
                .file_name()
                .to_str()
                .and_then(|n| TreeId::try_from(n.to_owned()).ok())
            else {
                continue;
            };
            if let Ok(marker) = self.read_marker(&tree)
                && !marker.claimed
                && marker.made_by == self.made_by
            {
                self.remove_tree(&tree);
            }
        }
    }
}

/// The disk the files below `dir` take (allocated blocks; links not followed, each inode once
/// per directory walk).
fn disk_usage(dir: &Path) -> u64 {
    use std::os::unix::fs::MetadataExt as _;
    let mut total = 0;
    let mut pending = vec![dir.to_owned()];
    while let Some(dir) = pending.pop() {
        let Ok(entries) = fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries.flatten() {
            let Ok(meta) = entry.metadata() else { continue };
            total += meta.blocks() * 512;
            if meta.is_dir() {
                pending.push(entry.path());
            }
        }
    }
    total
}

fn describe(owner: &Owner, thread: Option<&str>) -> String {
    match thread {
        Some(thread) => format!("{owner} (thread {thread})"),
        None => owner.to_string(),
    }
}

fn valid_slot(slot: &str) -> bool {
    !slot.is_empty() && slot.len() <= 20 && slot.bytes().all(|b| b.is_ascii_digit())
}

/// Creates `dir` (and missing parents) readable by the server only.
pub(crate) fn make_private_dir(dir: &Path) -> io::Result<()> {
    fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
}

/// Writes a new file readable by the server only.
fn write_private(path: &Path, data: &[u8]) -> io::Result<()> {
    let mut file = fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(path)?;
    file.write_all(data)?;
    file.sync_all()
}

/// An owner's claim file, as `{owner, tree}`.
#[derive(Serialize, Deserialize)]
struct Claim {
    owner: Owner,
    tree: TreeId,
}

fn read_claim(file: &Path) -> Result<Option<TreeId>, TreeError> {
    match fs::read(file) {
        Ok(text) => serde_json::from_slice::<Claim>(&text)
            .map(|claim| Some(claim.tree))
            .map_err(|e| TreeError::Io {
                action: format!("read {}", file.display()),
                source: io::Error::new(io::ErrorKind::InvalidData, e),
            }),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(io_error(format!("read {}", file.display()))(e)),
    }
}

/// Claims `tree` for `owner` by hard-linking a complete file into place (a link never replaces
/// a file: of two claims, one wins). `Some(theirs)` when another claim won.
fn link_claim(file: &Path, owner: &Owner, tree: &TreeId) -> Result<Option<TreeId>, TreeError> {
    let dir = file.parent().expect("a claim file has a directory");
    make_private_dir(dir).map_err(io_error(format!("create {}", dir.display())))?;
    let temp = dir.join(format!(".{tree}.claim"));
    let json = serde_json::to_vec(&Claim {
        owner: owner.clone(),
        tree: tree.clone(),
    })
    .expect("a claim serialises");
    write_private(&temp, &json).map_err(io_error(format!("write {}", temp.display())))?;
    let linked = fs::hard_link(&temp, file);
    let _ = fs::remove_file(&temp);
    match linked {
        Ok(()) => Ok(None),
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => read_claim(file)?
            .ok_or_else(|| io_error(format!("read {}", file.display()))(e))
            .map(Some),
        Err(e) => Err(io_error(format!("claim {}", file.display()))(e)),
    }
}

/// Keeps `trees`' spare count at one while the backend can warm one: called at start and after
/// each claim. A tree whose process could not be held is removed.
pub(crate) async fn refill_spares(
    trees: Arc<Trees>,
    backend: crate::backend::Backend,
    warm_up: Option<harness_client::WarmUp>,
) {
    use std::sync::atomic::Ordering;
    if trees.isolation == Isolation::Shared || trees.spares() > 0 {
        return;
    }
    // One spare at a time.
    if trees
        .preparing
        .compare_exchange(0, 1, Ordering::SeqCst, Ordering::SeqCst)
        .is_err()
    {
        return;
    }
    let made = trees.make_spare_tree();
    match made {
        Ok((tree, place)) => match backend.0.reserve(&place, warm_up).await {
            Some(hold) => {
                tracing::info!(%tree, "a spare harness is ready for the next new owner or thread");
                trees.add_spare(tree, hold);
            }
            None => trees.remove_tree(&tree),
        },
        Err(e) => tracing::warn!(error = %e, "could not make a spare directory tree"),
    }
    trees.preparing.fetch_sub(1, Ordering::SeqCst);
    trees.prepared.notify_waiters();
}

#[cfg(test)]
mod tests {
    use super::*;

    fn trees(dir: &Path, isolation: Isolation) -> Trees {
        Trees::open(&dir.join("save"), &dir.join("w"), isolation, "local")
    }

    #[tokio::test]
    async fn an_owners_threads_share_its_tree_and_owners_never_share_one() {
        let dir = tempfile::tempdir().unwrap();
        let trees = trees(dir.path(), Isolation::Owner);
        let (alice, bob) = (Owner::named("alice"), Owner::named("bob"));
        let a1 = trees.new_place(&alice, "t1").await.unwrap().place;
        let a2 = trees.new_place(&alice, "t2").await.unwrap().place;
        let b1 = trees.new_place(&bob, "t3").await.unwrap().place;
        assert_eq!(a1.tree, a2.tree);
        assert_ne!(a1.slot, a2.slot);
        assert_ne!(a1.tree, b1.tree);
        let pa = trees.placement(&alice, "t1", &a1).unwrap();
        let pb = trees.placement(&bob, "t3", &b1).unwrap();
        assert!(pa.workspace.is_dir() && pb.workspace.is_dir());
        assert!(
            pa.process
                .confine
                .iter()
                .all(|d| !pb.workspace.starts_with(d))
        );
        assert_ne!(pa.process.storage_dir, pb.process.storage_dir);
        // The same tree after a restart: the claim is on disk.
        let again = Trees::open(
            &dir.path().join("save"),
            &dir.path().join("w"),
            Isolation::Owner,
            "local",
        );
        assert_eq!(
            again.new_place(&alice, "t4").await.unwrap().place.tree,
            a1.tree
        );
    }

    #[tokio::test]
    async fn a_thread_in_another_owners_tree_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let trees = trees(dir.path(), Isolation::Owner);
        let alice = trees
            .new_place(&Owner::named("alice"), "t1")
            .await
            .unwrap()
            .place;
        let err = trees
            .placement(&Owner::named("mallory"), "t1", &alice)
            .unwrap_err();
        assert!(matches!(err, TreeError::Mismatch { .. }), "{err}");
        assert!(err.to_string().contains("alice"), "{err}");
    }

    #[tokio::test]
    async fn per_thread_trees_check_the_thread_too() {
        let dir = tempfile::tempdir().unwrap();
        let trees = trees(dir.path(), Isolation::Thread);
        let alice = Owner::named("alice");
        let t1 = trees.new_place(&alice, "t1").await.unwrap().place;
        let t2 = trees.new_place(&alice, "t2").await.unwrap().place;
        assert_ne!(t1.tree, t2.tree);
        assert!(trees.placement(&alice, "t1", &t1).is_ok());
        assert!(matches!(
            trees.placement(&alice, "t2", &t1),
            Err(TreeError::Mismatch { .. })
        ));
    }

    #[tokio::test]
    async fn a_spare_tree_is_claimed_by_the_next_owner_and_stale_spares_go_at_start() {
        let dir = tempfile::tempdir().unwrap();
        let trees = trees(dir.path(), Isolation::Owner);
        let (spare, _) = trees.make_spare_tree().unwrap();
        trees.add_spare(spare.clone(), Box::new(()));
        let alice = Owner::named("alice");
        let placed = trees.new_place(&alice, "t1").await.unwrap();
        assert_eq!(placed.place.tree, spare);
        assert!(
            placed.hold.is_some(),
            "the spare's hold goes to the claimant"
        );
        assert!(trees.placement(&alice, "t1", &placed.place).is_ok());
        // An unclaimed tree from an earlier run of this server is removed at start.
        let (stale, _) = trees.make_spare_tree().unwrap();
        let state = dir.path().join("save/o").join(stale.as_str());
        assert!(state.is_dir());
        let _ = Trees::open(
            &dir.path().join("save"),
            &dir.path().join("w"),
            Isolation::Owner,
            "local",
        );
        assert!(!state.exists());
        assert!(dir.path().join("save/o").join(spare.as_str()).is_dir());
    }

    #[test]
    fn two_claims_of_one_owner_agree_on_the_first() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("by-owner/x.json");
        let (a, b) = (TreeId::random().unwrap(), TreeId::random().unwrap());
        let owner = Owner::named("alice");
        assert_eq!(link_claim(&file, &owner, &a).unwrap(), None);
        assert_eq!(link_claim(&file, &owner, &b).unwrap(), Some(a));
    }

    #[tokio::test]
    async fn tree_directories_and_markers_are_private() {
        use std::os::unix::fs::PermissionsExt as _;
        let dir = tempfile::tempdir().unwrap();
        let trees = trees(dir.path(), Isolation::Owner);
        let place = trees.new_place(&Owner::local(), "t").await.unwrap().place;
        let placement = trees.placement(&Owner::local(), "t", &place).unwrap();
        let mode = |p: &Path| fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(&placement.workspace), 0o700);
        assert_eq!(mode(&placement.process.confine[0]), 0o700);
        assert_eq!(mode(&trees.marker_file(&place.tree)), 0o600);
    }
}
