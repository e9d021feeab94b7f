//! Where a thread works, as data: which threads share a process ([`Isolation`]), a tree's id,
//! a thread's place in its tree, and the directories a place stands for. `trees` allocates and
//! checks them; the store keeps a thread's place; the backend starts processes in them.

use std::io;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

/// Which threads may share a harness process (and its directory tree).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Isolation {
    /// The threads of one owner share confined processes; different owners never do.
    Owner,
    /// Every thread has confined processes of its own.
    Thread,
    /// Every thread of the agent shares unconfined processes.
    Shared,
}

/// A tree's id: 128 random bits in lowercase base32 (26 characters).
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub(crate) struct TreeId(String);

impl TreeId {
    pub(crate) fn random() -> io::Result<Self> {
        let mut bytes = [0u8; 16];
        getrandom::fill(&mut bytes).map_err(|e| io::Error::other(format!("no randomness: {e}")))?;
        Ok(Self(base32(&bytes)))
    }

    pub(crate) fn as_str(&self) -> &str {
        &self.0
    }
}

impl TryFrom<String> for TreeId {
    type Error = String;

    fn try_from(text: String) -> Result<Self, String> {
        if text.len() == 26 && text.bytes().all(|b| matches!(b, b'a'..=b'z' | b'2'..=b'7')) {
            Ok(Self(text))
        } else {
            Err(format!("`{text}` is not a tree id"))
        }
    }
}

impl From<TreeId> for String {
    fn from(id: TreeId) -> Self {
        id.0
    }
}

impl std::fmt::Display for TreeId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// RFC 4648 base32, lowercase, unpadded.
fn base32(bytes: &[u8]) -> String {
    const ALPHABET: &[u8; 32] = b"abcdefghijklmnopqrstuvwxyz234567";
    let mut out = String::with_capacity(bytes.len() * 8 / 5 + 1);
    let (mut buffer, mut bits) = (0u32, 0u32);
    for &byte in bytes {
        buffer = (buffer << 8) | u32::from(byte);
        bits += 8;
        while bits >= 5 {
            bits -= 5;
            out.push(ALPHABET[((buffer >> bits) & 31) as usize] as char);
        }
    }
    if bits > 0 {
        out.push(ALPHABET[((buffer << (5 - bits)) & 31) as usize] as char);
    }
    out
}

/// A new slot's name: 50 random bits in base32 (10 characters), never derived from what is in
/// the tree (which its sandbox can write).
pub(crate) fn random_slot() -> io::Result<String> {
    let mut bytes = [0u8; 7];
    getrandom::fill(&mut bytes).map_err(|e| io::Error::other(format!("no randomness: {e}")))?;
    let mut slot = base32(&bytes);
    slot.truncate(10);
    Ok(slot)
}

/// Whether `slot` can name a thread's directories: a random slot name, or the number an
/// earlier version gave it.
pub(crate) fn valid_slot(slot: &str) -> bool {
    let random = slot.len() == 10 && slot.bytes().all(|b| matches!(b, b'a'..=b'z' | b'2'..=b'7'));
    let numbered = !slot.is_empty() && slot.len() <= 20 && slot.bytes().all(|b| b.is_ascii_digit());
    random || numbered
}

/// Where a thread works: its tree and its slot in it (kept in its record).
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub(crate) struct Place {
    /// The tree.
    pub(crate) tree: TreeId,
    /// The thread's directory names in the tree (`<workspace>/<slot>`, `app/<slot>`).
    pub(crate) slot: String,
}

/// The directories of one harness process's partition: what its confinement grants.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ProcessPlace {
    /// The harness's `storage_directory`.
    pub(crate) storage_dir: PathBuf,
    /// The harness's `HOME`; `None` keeps the backend's.
    pub(crate) home_dir: Option<PathBuf>,
    /// The directories a confined process may write (the tree's two halves); empty for shared
    /// processes.
    pub(crate) confine: Vec<PathBuf>,
    /// The tree's id, naming the process in logs and its model calls.
    pub(crate) label: String,
}

/// A directory as the server reaches it through the door: `rel` below `root`, a directory
/// whose path no agent can change (a tree's root, or one the operator configured).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Beneath {
    pub(crate) root: PathBuf,
    pub(crate) rel: PathBuf,
}

impl Beneath {
    pub(crate) fn new(root: impl Into<PathBuf>, rel: impl Into<PathBuf>) -> Self {
        Self {
            root: root.into(),
            rel: rel.into(),
        }
    }

    /// The whole path (for the harness, which opens it inside its sandbox, and for messages).
    pub(crate) fn path(&self) -> PathBuf {
        self.root.join(&self.rel)
    }
}

/// One thread's directories.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Placement {
    /// The process it runs on.
    pub(crate) process: ProcessPlace,
    /// Its workspace.
    pub(crate) workspace: Beneath,
    /// The harness's `appDataDir` (transcripts, artifacts).
    pub(crate) app_data_dir: Beneath,
    /// Its process's storage dir, where its conversation's database is.
    pub(crate) storage_dir: Beneath,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tree_ids_are_128_random_bits_in_base32() {
        let a = TreeId::random().unwrap();
        let b = TreeId::random().unwrap();
        assert_ne!(a, b);
        assert_eq!(a.as_str().len(), 26);
        assert!(TreeId::try_from(a.to_string()).is_ok());
        assert!(TreeId::try_from("../etc".to_owned()).is_err());
        assert_eq!(base32(b"foobar"), "mzxw6ytboi");
    }

    #[test]
    fn slots_are_random_names_or_earlier_numbers_and_nothing_else() {
        let (a, b) = (random_slot().unwrap(), random_slot().unwrap());
        assert_ne!(a, b);
        assert!(valid_slot(&a) && valid_slot(&b), "{a} {b}");
        assert!(valid_slot("1") && valid_slot("42"));
        for bad in [
            "",
            "..",
            "a/b",
            "abcdefghi1",
            "ABCDEFGHIJ",
            "123456789012345678901",
        ] {
            assert!(!valid_slot(bad), "{bad}");
        }
    }
}
