//! Who a tree is for, kept where no sandbox reaches: a tree's marker
//! (`<save_dir>/o/<tree>.owner.json`, beside the tree's state directory, never inside it) and an
//! owner's claim of a tree (`<save_dir>/o/by-owner/<key>.json`, made by hard link so that of two
//! claims one wins), and the trees' roots, made under directories only the server writes. All
//! are the server's own: plain file calls are safe here, and nowhere else in `trees`.

use std::fs;
use std::io::{self, Write as _};
use std::os::unix::fs::OpenOptionsExt as _;
use std::path::{Path, PathBuf};

use harness_sandbox::AgentDir;
use serde::{Deserialize, Serialize};

use super::{TreeError, io_error};
use crate::owner::Owner;
use crate::places::TreeId;

/// Owner → tree claims, under the trees' directory.
pub(crate) const BY_OWNER_DIR: &str = "by-owner";

/// A tree's marker, beside its state directory.
const MARKER_SUFFIX: &str = ".owner.json";

/// Where earlier versions kept the marker: inside the tree's state directory, which the tree's
/// sandbox can write. Read once through the door and moved out.
const MARKER_IN_TREE: &str = "owner.json";

/// The largest marker or claim read (they are a few hundred bytes).
const MAX_RECORD: u64 = 64 << 10;

/// What a tree's marker says.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct Marker {
    /// Claimed by an owner (a spare's tree is not yet).
    pub(super) claimed: bool,
    /// Its owner.
    pub(super) owner: Owner,
    /// The thread, for a tree of one thread.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(super) thread: Option<String>,
    /// Who made it (`<replica or "local">`): a restarted server removes its unclaimed trees.
    pub(super) made_by: String,
}

/// The server-only files of the trees under `<save_dir>/o/`.
pub(crate) struct Claims {
    dir: PathBuf,
}

impl Claims {
    pub(crate) fn new(trees_dir: PathBuf) -> Self {
        Self { dir: trees_dir }
    }

    pub(super) fn marker_file(&self, tree: &TreeId) -> PathBuf {
        self.dir.join(marker_file_name(tree.as_str()))
    }

    /// Moves every marker an earlier version kept inside its tree out of it (see
    /// [`Claims::read_marker`]); what cannot be read is left, and logged.
    pub(crate) fn move_markers_out(&self) {
        for tree in self.marked_trees() {
            if let Err(e) = self.read_marker(&tree) {
                tracing::warn!(%tree, error = %e, "a tree's marker could not be read");
            }
        }
    }

    /// The trees that have a marker.
    pub(super) fn marked_trees(&self) -> Vec<TreeId> {
        let Ok(entries) = fs::read_dir(&self.dir) else {
            return Vec::new();
        };
        let mut trees: Vec<TreeId> = entries
            .flatten()
            .filter_map(|entry| {
                let name = entry.file_name();
                let name = name.to_str()?;
                let id = name
                    .strip_suffix(MARKER_SUFFIX)
                    .or_else(|| (name.len() == 26).then_some(name))?;
                TreeId::try_from(id.to_owned()).ok()
            })
            .collect();
        trees.sort_by(|a, b| a.as_str().cmp(b.as_str()));
        trees.dedup();
        trees
    }

    /// A tree's marker; one an earlier version kept inside the tree is read through the door
    /// (no link, FIFO or hard link followed) and moved beside it.
    pub(super) fn read_marker(&self, tree: &TreeId) -> Result<Marker, TreeError> {
        let file = self.marker_file(tree);
        match fs::read(&file) {
            Ok(text) => parse(&file, &text),
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                let state = self.dir.join(tree.as_str());
                let old = AgentDir::open(&state)
                    .and_then(|dir| dir.read(Path::new(MARKER_IN_TREE), MAX_RECORD))
                    .map_err(|e| TreeError::Door {
                        action: format!("read the marker of the tree {tree}"),
                        source: e,
                    })?;
                let marker = parse(&state.join(MARKER_IN_TREE), &old)?;
                self.write_marker(tree, &marker)?;
                if let Ok(dir) = AgentDir::open(&state) {
                    let _ = dir.remove_file(Path::new(MARKER_IN_TREE));
                }
                tracing::info!(%tree, "moved the tree's marker out of the tree");
                Ok(marker)
            }
            Err(e) => Err(io_error(format!("read {}", file.display()))(e)),
        }
    }

    /// Writes a tree's marker: a new file renamed over the old, readable by the server only.
    pub(super) fn write_marker(&self, tree: &TreeId, marker: &Marker) -> Result<(), TreeError> {
        let file = self.marker_file(tree);
        let temp = file.with_extension("json.new");
        let json = serde_json::to_vec(marker).expect("a marker serialises");
        write_private(&temp, &json)
            .and_then(|()| fs::rename(&temp, &file))
            .map_err(io_error(format!("write {}", file.display())))
    }

    /// Removes a tree's marker.
    pub(super) fn remove_marker(&self, tree: &TreeId) {
        let file = self.marker_file(tree);
        if let Err(e) = fs::remove_file(&file)
            && e.kind() != io::ErrorKind::NotFound
        {
            tracing::warn!(file = %file.display(), error = %e, "could not remove a tree's marker");
        }
    }

    fn by_owner_file(&self, owner: &Owner) -> PathBuf {
        self.dir.join(BY_OWNER_DIR).join(claim_file_name(owner))
    }

    /// The tree `owner` claimed, if any.
    pub(super) fn read_claim(&self, owner: &Owner) -> Result<Option<TreeId>, TreeError> {
        read_claim(&self.by_owner_file(owner))
    }

    /// Claims `tree` for `owner`; `Some(theirs)` when another claim won.
    pub(super) fn link_claim(
        &self,
        owner: &Owner,
        tree: &TreeId,
    ) -> Result<Option<TreeId>, TreeError> {
        link_claim(&self.by_owner_file(owner), owner, tree)
    }
}

/// The name of `tree`'s marker in the trees' directory.
pub(crate) fn marker_file_name(tree: &str) -> String {
    format!("{tree}{MARKER_SUFFIX}")
}

/// The name of `owner`'s claim file in `<save_dir>/o/by-owner/`.
pub(crate) fn claim_file_name(owner: &Owner) -> String {
    let key = match owner.identity() {
        Some(identity) => crate::hash::sha256_hex(format!("owner:{identity}").as_bytes(), 32),
        None => "local".into(),
    };
    format!("{key}.json")
}

fn parse(file: &Path, text: &[u8]) -> Result<Marker, TreeError> {
    serde_json::from_slice(text).map_err(|e| TreeError::Io {
        action: format!("read {}", file.display()),
        source: io::Error::new(io::ErrorKind::InvalidData, e),
    })
}

/// Creates `dir` (and missing parents) readable by the server only.
pub(crate) fn make_private_dir(dir: &Path) -> io::Result<()> {
    use std::os::unix::fs::DirBuilderExt as _;
    fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
}

/// Creates a tree's root `dir` (its parent, the server's, existing), readable by the server
/// only; fails when it exists, so a tree id is never used twice.
pub(super) fn make_exclusive(dir: &Path) -> io::Result<()> {
    use std::os::unix::fs::DirBuilderExt as _;
    fs::DirBuilder::new().mode(0o700).create(dir)
}

/// Removes a tree root just made and still empty.
pub(super) fn remove_empty_root(dir: &Path) {
    let _ = fs::remove_dir(dir);
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
    let json = serde_json::to_vec(&Claim {
        owner: owner.clone(),
        tree: tree.clone(),
    })
    .expect("a claim serialises");
    match crate::claim::claim_file(file, &json) {
        Ok(true) => Ok(None),
        Ok(false) => read_claim(file)?.map(Some).ok_or_else(|| {
            io_error(format!("read {}", file.display()))(io::ErrorKind::NotFound.into())
        }),
        Err(e) => Err(io_error(format!("claim {}", file.display()))(e)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn two_claims_of_one_owner_agree_on_the_first() {
        let dir = tempfile::tempdir().unwrap();
        let claims = Claims::new(dir.path().to_owned());
        let (a, b) = (TreeId::random().unwrap(), TreeId::random().unwrap());
        let owner = Owner::named("alice");
        assert_eq!(claims.link_claim(&owner, &a).unwrap(), None);
        assert_eq!(claims.link_claim(&owner, &b).unwrap(), Some(a.clone()));
        assert_eq!(claims.read_claim(&owner).unwrap(), Some(a));
    }

    #[test]
    fn a_marker_an_earlier_version_kept_in_the_tree_is_moved_out_and_a_planted_link_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let claims = Claims::new(dir.path().to_owned());
        let (kept, linked) = (TreeId::random().unwrap(), TreeId::random().unwrap());
        let marker = Marker {
            claimed: true,
            owner: Owner::named("alice"),
            thread: None,
            made_by: "local".into(),
        };
        let state = dir.path().join(kept.as_str());
        fs::create_dir(&state).unwrap();
        fs::write(
            state.join(MARKER_IN_TREE),
            serde_json::to_vec(&marker).unwrap(),
        )
        .unwrap();
        assert_eq!(claims.read_marker(&kept).unwrap(), marker);
        assert!(
            !state.join(MARKER_IN_TREE).exists(),
            "moved out of the tree"
        );
        assert_eq!(claims.read_marker(&kept).unwrap(), marker);
        // A marker the tree's sandbox replaced by a link to a file elsewhere is not read.
        let elsewhere = dir.path().join("elsewhere.json");
        fs::write(&elsewhere, serde_json::to_vec(&marker).unwrap()).unwrap();
        let state = dir.path().join(linked.as_str());
        fs::create_dir(&state).unwrap();
        std::os::unix::fs::symlink(&elsewhere, state.join(MARKER_IN_TREE)).unwrap();
        assert!(claims.read_marker(&linked).is_err());
        assert_eq!(claims.marked_trees(), {
            let mut both = vec![kept, linked];
            both.sort_by(|a, b| a.as_str().cmp(b.as_str()));
            both
        });
    }
}
