//! A save dir as the server wrote it before identities had namespaces (`alice`, not
//! `token:alice` or `user:alice`), made from one written now by taking the namespaces out of
//! every place an identity is stored: the thread owners (then in `owners/`, now beside the
//! records), the thread records
//! (`threads/`, two slots each with a sequence and a digest), the trees' markers
//! (then inside each tree, `o/<tree>/owner.json`) and the owners' tree claims (`o/by-owner/<sha256 of "owner:" and the
//! identity>.json`). A save dir already in that form is left as it is.

use std::path::Path;

use serde_json::Value;
use sha2::{Digest, Sha256};

/// An identity without its namespace.
fn bare(identity: &str) -> &str {
    identity
        .strip_prefix("token:")
        .or_else(|| identity.strip_prefix("user:"))
        .unwrap_or(identity)
}

fn sha256_hex(text: &str) -> String {
    hex::encode(Sha256::digest(text.as_bytes()))
}

fn read(path: &Path) -> Value {
    serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap()
}

/// The JSON files of `dir` (none when it does not exist).
fn json_files(dir: &Path) -> Vec<std::path::PathBuf> {
    std::fs::read_dir(dir)
        .map(|entries| {
            entries
                .flatten()
                .map(|e| e.path())
                .filter(|p| p.is_file() && p.extension().is_some_and(|e| e == "json"))
                .collect()
        })
        .unwrap_or_default()
}

/// Makes `save` what the server stored before namespaces: every identity bare, the tree claims
/// under their bare names, and no record of a migration.
pub fn strip_namespaces(save: &Path) {
    // Owners were kept in `owners/` then, one file per thread named like its record.
    let owners = save.join("owners");
    for file in json_files(&save.join("threads")) {
        let name = file.file_name().unwrap().to_str().unwrap().to_owned();
        let Some(stem) = name.strip_suffix(".owner.json") else {
            continue;
        };
        let mut owner = read(&file);
        let bare_owner = bare(owner["owner"].as_str().unwrap()).to_owned();
        owner["owner"] = bare_owner.into();
        std::fs::create_dir_all(&owners).unwrap();
        std::fs::write(owners.join(format!("{stem}.json")), owner.to_string()).unwrap();
        std::fs::remove_file(&file).unwrap();
    }
    for file in json_files(&save.join("threads")) {
        let slot = read(&file);
        let mut record = slot["record"].clone();
        if let Some(owner) = record["owner"].as_str() {
            record["owner"] = bare(owner).to_owned().into();
        }
        let thread = slot["threadId"].as_str().unwrap();
        let sequence = slot["sequence"].as_u64().unwrap();
        let raw = serde_json::to_string_pretty(&record).unwrap();
        let digest = sha256_hex(&format!("{sequence}\n{thread}\n{raw}"));
        let text = format!(
            "{{\"version\":2,\"threadId\":{},\"sequence\":{sequence},\"digest\":\"{digest}\",\"record\":{raw}}}",
            Value::from(thread)
        );
        std::fs::write(&file, text).unwrap();
    }
    let trees = save.join("o");
    for entry in std::fs::read_dir(&trees).unwrap().flatten() {
        // Markers were kept inside their trees then.
        let name = entry.file_name().to_string_lossy().into_owned();
        let Some(tree) = name.strip_suffix(".owner.json") else {
            continue;
        };
        let mut content = read(&entry.path());
        let bare_owner = bare(content["owner"].as_str().unwrap()).to_owned();
        content["owner"] = bare_owner.into();
        std::fs::write(trees.join(tree).join("owner.json"), content.to_string()).unwrap();
        std::fs::remove_file(entry.path()).unwrap();
    }
    let by_owner = trees.join("by-owner");
    for file in json_files(&by_owner) {
        let mut claim = read(&file);
        let owner = claim["owner"].as_str().unwrap().to_owned();
        if owner.is_empty() || bare(&owner) == owner {
            continue;
        }
        claim["owner"] = bare(&owner).to_owned().into();
        let name = format!("{}.json", sha256_hex(&format!("owner:{}", bare(&owner))));
        std::fs::write(by_owner.join(name), claim.to_string()).unwrap();
        std::fs::remove_file(&file).unwrap();
    }
    for done in ["identities.json", "identities.lock"] {
        let _ = std::fs::remove_file(save.join(done));
    }
}

/// The newest record of `thread` in `save` (the slot with the highest sequence).
pub fn record(save: &Path, thread: &str) -> Value {
    let stem = sha256_hex(thread);
    ["json", "b.json"]
        .iter()
        .map(|suffix| save.join("threads").join(format!("{stem}.{suffix}")))
        .filter(|path| path.is_file())
        .map(|path| read(&path))
        .max_by_key(|slot| slot["sequence"].as_u64().unwrap_or(0))
        .map(|slot| slot["record"].clone())
        .unwrap_or_else(|| panic!("no record of {thread}"))
}

/// The tree `identity` (as stored) has claimed.
pub fn claimed_tree(save: &Path, identity: &str) -> Option<String> {
    let file = save
        .join("o/by-owner")
        .join(format!("{}.json", sha256_hex(&format!("owner:{identity}"))));
    file.is_file()
        .then(|| read(&file)["tree"].as_str().unwrap().to_owned())
}
