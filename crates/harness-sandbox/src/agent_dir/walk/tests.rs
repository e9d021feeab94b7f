use std::os::unix::fs::symlink;

use super::*;

fn walked(dir: &AgentDir, rel: &str) -> Vec<(String, EntryKind)> {
    dir.walk(Path::new(rel))
        .unwrap()
        .map(|found| {
            let found = found.unwrap();
            assert_eq!(found.rel.file_name(), Some(found.entry.name.as_os_str()));
            (found.rel.display().to_string(), found.entry.kind)
        })
        .collect()
}

#[test]
fn a_walk_lists_every_entry_in_name_order_and_follows_no_link() {
    let dir = tempfile::tempdir().unwrap();
    let (root, host) = (dir.path().join("tree"), dir.path().join("host"));
    std::fs::create_dir_all(root.join("b/c")).unwrap();
    std::fs::create_dir_all(&host).unwrap();
    std::fs::write(host.join("secret"), "host").unwrap();
    std::fs::write(root.join("a.txt"), "a").unwrap();
    std::fs::write(root.join("b/c/d.txt"), "d").unwrap();
    std::fs::write(root.join("b/z.txt"), "z").unwrap();
    symlink(&host, root.join("b/link")).unwrap();
    nix::unistd::mkfifo(&root.join("fifo"), nix::sys::stat::Mode::S_IRWXU).unwrap();
    let tree = AgentDir::open(&root).unwrap();
    assert_eq!(
        walked(&tree, ""),
        [
            ("a.txt".to_owned(), EntryKind::File),
            ("b".to_owned(), EntryKind::Dir),
            ("b/c".to_owned(), EntryKind::Dir),
            ("b/c/d.txt".to_owned(), EntryKind::File),
            ("b/link".to_owned(), EntryKind::Symlink),
            ("b/z.txt".to_owned(), EntryKind::File),
            ("fifo".to_owned(), EntryKind::Other),
        ]
    );
    assert_eq!(
        walked(&tree, "b/c"),
        [("d.txt".to_owned(), EntryKind::File)],
        "a walk of a subdirectory names entries relative to it"
    );
    assert!(
        matches!(
            tree.walk(Path::new("b/link")),
            Err(SandboxError::Refused {
                why: super::super::Refusal::Symlink,
                ..
            })
        ),
        "a walk never starts through a link"
    );
}

#[test]
fn a_walk_holds_a_bounded_number_of_descriptors_and_says_when_it_went_no_deeper() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("tree");
    let mut deep = root.clone();
    for _ in 0..MAX_DEPTH + 3 {
        deep.push("d");
    }
    std::fs::create_dir_all(&deep).unwrap();
    let tree = AgentDir::open(&root).unwrap();
    let mut walk = tree.walk(Path::new("")).unwrap();
    let count = walk
        .by_ref()
        .inspect(|found| assert!(found.is_ok()))
        .count();
    assert_eq!(
        count, MAX_DEPTH,
        "every directory down to the bound is listed"
    );
    assert!(walk.too_deep(), "the walk says it did not enter the rest");
}
