use std::os::unix::fs::{MetadataExt as _, symlink};
use std::time::Instant;

use super::*;

/// A tree root and, beside it, a directory that stands for the host outside the tree.
struct Planted {
    _dir: tempfile::TempDir,
    root: PathBuf,
    host: PathBuf,
}

impl Planted {
    fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("tree");
        let host = dir.path().join("host");
        std::fs::create_dir_all(&root).unwrap();
        std::fs::create_dir_all(host.join("7")).unwrap();
        std::fs::write(host.join("secret"), "host secret").unwrap();
        std::fs::write(host.join("7/precious"), "precious").unwrap();
        Self {
            _dir: dir,
            root,
            host,
        }
    }

    fn tree(&self) -> AgentDir {
        AgentDir::open(&self.root).unwrap()
    }

    fn host_intact(&self) {
        assert_eq!(
            std::fs::read_to_string(self.host.join("secret")).unwrap(),
            "host secret"
        );
        assert_eq!(
            std::fs::read_to_string(self.host.join("7/precious")).unwrap(),
            "precious"
        );
    }
}

fn refusal(result: Result<impl std::fmt::Debug>) -> Refusal {
    match result {
        Err(SandboxError::Refused { why, .. }) => why,
        other => panic!("expected a refusal, got {other:?}"),
    }
}

#[test]
fn a_link_at_any_component_is_refused_by_every_operation_and_the_host_is_untouched() {
    let planted = Planted::new();
    symlink(&planted.host, planted.root.join("app")).unwrap();
    let tree = planted.tree();
    let through = Path::new("app/7");
    assert_eq!(refusal(tree.dir(through)), Refusal::Symlink);
    assert_eq!(refusal(tree.create_dir_all(through)), Refusal::Symlink);
    assert_eq!(
        refusal(tree.create_dir(Path::new("app/8"))),
        Refusal::Symlink
    );
    assert_eq!(refusal(tree.remove(through)), Refusal::Symlink);
    assert_eq!(
        refusal(tree.remove_file(Path::new("app/secret"))),
        Refusal::Symlink
    );
    assert_eq!(refusal(tree.entries(Path::new("app"))), Refusal::Symlink);
    assert_eq!(
        refusal(tree.stat(Path::new("app/secret"))),
        Refusal::Symlink
    );
    assert_eq!(
        refusal(tree.open_file(Path::new("app/secret"))),
        Refusal::Symlink
    );
    assert_eq!(
        refusal(tree.read(Path::new("app/secret"), 100)),
        Refusal::Symlink
    );
    assert_eq!(
        refusal(tree.write(Path::new("app/secret"), b"overwritten")),
        Refusal::Symlink
    );
    assert!(
        !planted.host.join("8").exists(),
        "nothing made through the link"
    );
    planted.host_intact();
    // The link itself is an entry like any other: removed, its target kept.
    assert!(tree.remove(Path::new("app")).unwrap());
    assert!(!planted.root.join("app").exists());
    planted.host_intact();
}

#[test]
fn a_link_as_the_last_component_is_read_as_a_link_and_replaced_not_followed() {
    let planted = Planted::new();
    symlink(
        planted.host.join("secret"),
        planted.root.join("marker.json"),
    )
    .unwrap();
    let tree = planted.tree();
    assert_eq!(
        refusal(tree.open_file(Path::new("marker.json"))),
        Refusal::Symlink
    );
    assert_eq!(
        tree.stat(Path::new("marker.json")).unwrap().kind,
        EntryKind::Symlink
    );
    tree.write(Path::new("marker.json"), b"{}").unwrap();
    assert_eq!(
        std::fs::read_to_string(planted.root.join("marker.json")).unwrap(),
        "{}"
    );
    planted.host_intact();
}

#[test]
fn removing_a_tree_unlinks_its_links_and_hard_links_and_keeps_what_they_lead_to() {
    let planted = Planted::new();
    let slot = planted.root.join("app/7");
    std::fs::create_dir_all(slot.join("deeper")).unwrap();
    symlink(&planted.host, slot.join("to-host")).unwrap();
    symlink(planted.host.join("7"), slot.join("deeper/to-seven")).unwrap();
    std::fs::hard_link(planted.host.join("secret"), slot.join("hard")).unwrap();
    nix::unistd::mkfifo(&slot.join("fifo"), nix::sys::stat::Mode::S_IRWXU).unwrap();
    assert!(planted.tree().remove(Path::new("app/7")).unwrap());
    assert!(!slot.exists());
    planted.host_intact();
    assert_eq!(
        std::fs::metadata(planted.host.join("secret"))
            .unwrap()
            .nlink(),
        1
    );
    assert!(
        !planted.tree().remove(Path::new("app/7")).unwrap(),
        "already gone"
    );
}

#[test]
fn a_fifo_is_refused_without_waiting_for_a_writer() {
    let planted = Planted::new();
    nix::unistd::mkfifo(&planted.root.join("pipe"), nix::sys::stat::Mode::S_IRWXU).unwrap();
    let started = Instant::now();
    assert_eq!(
        refusal(planted.tree().open_file(Path::new("pipe"))),
        Refusal::NotARegularFile
    );
    assert!(started.elapsed() < Duration::from_secs(5));
    assert_eq!(
        refusal(planted.tree().read(Path::new("pipe"), 10)),
        Refusal::NotARegularFile
    );
}

#[test]
fn a_hard_linked_file_is_refused_and_a_single_one_is_read() {
    let planted = Planted::new();
    std::fs::hard_link(
        planted.host.join("secret"),
        planted.root.join("looks-local"),
    )
    .unwrap();
    std::fs::write(planted.root.join("mine"), "mine").unwrap();
    let tree = planted.tree();
    assert_eq!(
        refusal(tree.open_file(Path::new("looks-local"))),
        Refusal::HardLinked
    );
    assert_eq!(tree.read(Path::new("mine"), 10).unwrap(), b"mine");
    assert_eq!(refusal(tree.read(Path::new("mine"), 3)), Refusal::TooLarge);
}

#[test]
fn paths_that_leave_the_tree_or_name_nothing_are_refused() {
    let planted = Planted::new();
    let tree = planted.tree();
    for bad in ["../host/secret", "/etc/passwd", "a/../../host", "..", ""] {
        let result = tree.open_file(Path::new(bad));
        assert_eq!(refusal(result), Refusal::BadPath, "{bad}");
    }
    assert_eq!(refusal(tree.remove(Path::new(".."))), Refusal::BadPath);
}

#[test]
fn the_hosts_own_directories_are_made_again_when_something_else_took_their_place() {
    let planted = Planted::new();
    symlink(&planted.host, planted.root.join("app")).unwrap();
    std::fs::write(planted.root.join("home"), "a file").unwrap();
    let tree = planted.tree();
    let app = tree.ensure_dir_all(Path::new("app/7")).unwrap();
    assert!(app.entries(Path::new("")).unwrap().is_empty());
    tree.ensure_dir_all(Path::new("home")).unwrap();
    assert!(
        std::fs::symlink_metadata(planted.root.join("app"))
            .unwrap()
            .is_dir()
    );
    assert!(
        std::fs::symlink_metadata(planted.root.join("home"))
            .unwrap()
            .is_dir()
    );
    let aside: Vec<String> = std::fs::read_dir(&planted.root)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.contains(".set-aside-"))
        .collect();
    assert_eq!(aside.len(), 2, "{aside:?}");
    planted.host_intact();
    assert_eq!(
        std::fs::read_dir(&planted.host).unwrap().count(),
        2,
        "nothing made in the host directory"
    );
}

/// A chain of `depth` directories below `dir`, made through descriptors (deeper than a path
/// can name).
fn chain(dir: &AgentDir, depth: usize) {
    let mut current = dir.dup().unwrap();
    for _ in 0..depth {
        current.create_dir(Path::new("d")).unwrap();
        std::fs::File::from(
            rustix::fs::openat(
                &current.fd,
                "f",
                OFlags::CREATE | OFlags::WRONLY,
                Mode::from_raw_mode(0o600),
            )
            .unwrap(),
        )
        .write_all(&[1; 100])
        .unwrap();
        current = current.dir(Path::new("d")).unwrap();
    }
}

#[test]
fn a_chain_deeper_than_the_descriptors_held_is_removed_whole_and_measured_as_too_deep() {
    let planted = Planted::new();
    let tree = planted.tree();
    tree.create_dir(Path::new("deep")).unwrap();
    chain(&tree.dir(Path::new("deep")).unwrap(), 3 * MAX_DEPTH + 7);
    let usage = tree.disk_usage().unwrap();
    assert!(usage.too_deep, "{usage:?}");
    assert!(tree.remove(Path::new("deep")).unwrap());
    assert!(tree.entries(Path::new("")).unwrap().is_empty());
    assert!(!tree.disk_usage().unwrap().too_deep);
}

#[test]
fn disk_usage_counts_each_inode_once_and_follows_no_link() {
    let planted = Planted::new();
    std::fs::write(planted.host.join("big"), vec![7u8; 4 << 20]).unwrap();
    let tree = planted.tree();
    let empty = tree.disk_usage().unwrap().bytes;
    symlink(&planted.host, planted.root.join("to-host")).unwrap();
    let with_link = tree.disk_usage().unwrap().bytes;
    assert!(with_link - empty < 64 << 10, "{empty} → {with_link}");
    std::fs::write(planted.root.join("one"), vec![1u8; 1 << 20]).unwrap();
    std::fs::hard_link(planted.root.join("one"), planted.root.join("two")).unwrap();
    let used = tree.disk_usage().unwrap().bytes - with_link;
    assert!(
        (1 << 20..(1 << 20) + (64 << 10)).contains(&used),
        "one MiB counted once: {used}"
    );
}

#[test]
fn a_directory_the_agent_made_unwritable_is_still_removed() {
    use std::os::unix::fs::PermissionsExt as _;
    let planted = Planted::new();
    let locked = planted.root.join("locked");
    std::fs::create_dir_all(locked.join("inner")).unwrap();
    std::fs::write(locked.join("inner/f"), "x").unwrap();
    std::fs::set_permissions(locked.join("inner"), std::fs::Permissions::from_mode(0o000)).unwrap();
    std::fs::set_permissions(&locked, std::fs::Permissions::from_mode(0o500)).unwrap();
    assert!(planted.tree().remove(Path::new("locked")).unwrap());
    assert!(!locked.exists());
}

/// Writers faster than the removal (four, on a machine of two cores) make every read of a
/// directory again longer than the last: the removal still ends, soon after its refill window,
/// and reports the directory not empty. (With a count of reads again as the only bound, one
/// such removal went on for many minutes while the writer filled 46 GB.)
#[test]
fn a_removal_racing_writers_faster_than_it_ends() {
    let planted = Planted::new();
    let busy = planted.root.join("busy");
    std::fs::create_dir_all(&busy).unwrap();
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let writers: Vec<_> = (0..4)
        .map(|w| {
            let (busy, stop) = (busy.clone(), stop.clone());
            std::thread::spawn(move || {
                let mut n = 0u64;
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    let _ = std::fs::create_dir_all(busy.join(format!("d{}", n % 5)));
                    let _ = std::fs::write(busy.join(format!("d{}/f{w}-{n}", n % 5)), "x");
                    n += 1;
                }
            })
        })
        .collect();
    std::thread::sleep(Duration::from_millis(50));
    let started = Instant::now();
    let _ = planted.tree().remove(Path::new("busy"));
    let took = started.elapsed();
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    for writer in writers {
        writer.join().unwrap();
    }
    assert!(took < REFILL_WINDOW + Duration::from_secs(25), "{took:?}");
    planted.tree().remove(Path::new("busy")).unwrap();
    assert!(!busy.exists());
}

#[test]
fn what_the_host_creates_is_private_and_owned_as_asked() {
    use std::os::unix::fs::PermissionsExt as _;
    let planted = Planted::new();
    let made_by_me = std::fs::metadata(&planted.root).unwrap();
    let me = SandboxIdentity {
        uid: made_by_me.uid(),
        gid: made_by_me.gid(),
    };
    let tree = AgentDir::create(&planted.root.join("made"), Some(me)).unwrap();
    tree.create_dir_all(Path::new("a/b")).unwrap();
    tree.write(Path::new("a/b/f"), b"x").unwrap();
    let mode = |p: &str| {
        std::fs::metadata(planted.root.join("made").join(p))
            .unwrap()
            .permissions()
            .mode()
            & 0o777
    };
    assert_eq!(mode("a"), 0o700);
    assert_eq!(mode("a/b"), 0o700);
    assert_eq!(mode("a/b/f"), 0o600);
    let meta = std::fs::metadata(planted.root.join("made/a/b/f")).unwrap();
    assert_eq!((meta.uid(), meta.gid()), (me.uid, me.gid));
}
