use std::os::unix::fs::symlink;

use super::*;
use crate::store::ThreadRecord;

fn open_trees(dir: &Path, isolation: Isolation) -> Arc<Trees> {
    Arc::new(Trees::open(
        &dir.join("save"),
        &dir.join("w"),
        isolation,
        "local",
        None,
    ))
}

/// A host directory beside the trees, standing for what a planted link would aim at.
fn host_dir(dir: &Path, slot: &str) -> PathBuf {
    let host = dir.join("host");
    std::fs::create_dir_all(host.join(slot)).unwrap();
    std::fs::write(host.join(slot).join("precious"), "precious").unwrap();
    host
}

fn record(place: &Place, conversation: &str) -> ThreadRecord {
    ThreadRecord {
        conversation_id: conversation.into(),
        place: Some(place.clone()),
        ..ThreadRecord::default()
    }
}

#[tokio::test]
async fn an_owners_threads_share_its_tree_and_owners_never_share_one() {
    let dir = tempfile::tempdir().unwrap();
    let trees = open_trees(dir.path(), Isolation::Owner);
    let (alice, bob) = (Owner::named("alice"), Owner::named("bob"));
    let a1 = trees.new_place(&alice, "t1").await.unwrap().place;
    let a2 = trees.new_place(&alice, "t2").await.unwrap().place;
    let b1 = trees.new_place(&bob, "t3").await.unwrap().place;
    assert_eq!(a1.tree, a2.tree);
    assert_ne!(a1.slot, a2.slot);
    assert_ne!(a1.tree, b1.tree);
    let pa = trees.placement(&alice, "t1", &a1).unwrap();
    let pb = trees.placement(&bob, "t3", &b1).unwrap();
    assert!(pa.workspace.path().is_dir() && pb.workspace.path().is_dir());
    assert!(
        pa.process
            .confine
            .iter()
            .all(|d| !pb.workspace.path().starts_with(d))
    );
    assert_ne!(pa.process.storage_dir, pb.process.storage_dir);
    // The same tree after a restart: the claim is on disk.
    let again = open_trees(dir.path(), Isolation::Owner);
    assert_eq!(
        again.new_place(&alice, "t4").await.unwrap().place.tree,
        a1.tree
    );
}

#[tokio::test]
async fn a_thread_in_another_owners_tree_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let trees = open_trees(dir.path(), Isolation::Owner);
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
    let trees = open_trees(dir.path(), Isolation::Thread);
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
    let trees = open_trees(dir.path(), Isolation::Owner);
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
    let _ = open_trees(dir.path(), Isolation::Owner);
    assert!(!state.exists());
    assert!(dir.path().join("save/o").join(spare.as_str()).is_dir());
}

#[tokio::test]
async fn tree_directories_and_markers_are_private() {
    use std::os::unix::fs::PermissionsExt as _;
    let dir = tempfile::tempdir().unwrap();
    let trees = open_trees(dir.path(), Isolation::Owner);
    let place = trees.new_place(&Owner::local(), "t").await.unwrap().place;
    let placement = trees.placement(&Owner::local(), "t", &place).unwrap();
    let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode(&placement.workspace.path()), 0o700);
    assert_eq!(mode(&placement.process.confine[0]), 0o700);
    assert_eq!(
        mode(&trees.claims.marker_file(&place.tree)),
        0o600,
        "the marker"
    );
    assert!(
        !trees
            .claims
            .marker_file(&place.tree)
            .starts_with(&placement.process.confine[0]),
        "the marker is outside the tree its sandbox writes"
    );
}

/// The attack of issue 37: the owner's sandbox replaces `app` (then `<workspace>`'s parent
/// entries, `save`, `home`) with links to a host directory; deleting a thread, placing one,
/// and measuring the tree then follow none of them.
#[tokio::test]
async fn links_planted_in_a_tree_are_never_followed_by_delete_placement_or_measurement() {
    let dir = tempfile::tempdir().unwrap();
    let trees = open_trees(dir.path(), Isolation::Owner);
    let alice = Owner::named("alice");
    let place = trees.new_place(&alice, "t1").await.unwrap().place;
    let placement = trees.placement(&alice, "t1", &place).unwrap();
    let state = &placement.process.confine[0];
    let host = host_dir(dir.path(), &place.slot);
    // What a command in the sandbox can do: `mv app app.bak && ln -s /host app`.
    std::fs::rename(state.join("app"), state.join("app.bak")).unwrap();
    symlink(&host, state.join("app")).unwrap();
    std::fs::rename(state.join("save"), state.join("save.bak")).unwrap();
    symlink(&host, state.join("save")).unwrap();
    std::fs::write(host.join("conv.db"), "not the thread's").unwrap();
    trees.remove_thread_files(&record(&place, "conv"));
    assert_eq!(
        std::fs::read_to_string(host.join(&place.slot).join("precious")).unwrap(),
        "precious",
        "the host directory named like the slot survived the delete"
    );
    assert!(
        host.join("conv.db").exists(),
        "no database removed through `save`"
    );
    assert!(
        !placement.workspace.path().exists(),
        "the workspace itself went"
    );
    // A new thread's placement makes nothing through the links: they are moved aside.
    let next = trees.new_place(&alice, "t2").await.unwrap().place;
    let placed = trees.placement(&alice, "t2", &next).unwrap();
    assert!(
        !host.join(&next.slot).exists(),
        "nothing made in the host dir"
    );
    assert!(
        std::fs::symlink_metadata(state.join("app"))
            .unwrap()
            .is_dir()
    );
    assert!(placed.app_data_dir.path().is_dir());
    assert_eq!(std::fs::read_dir(&host).unwrap().count(), 2);
    // Measuring the tree does not count what a link leads to.
    std::fs::write(host.join("big"), vec![0u8; 8 << 20]).unwrap();
    symlink(&host, placed.workspace.path().join("to-host")).unwrap();
    trees.measure(&next.tree);
    let usage = loop {
        if let Some(usage) = trees.usage(&next.tree) {
            break usage;
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    };
    assert!(usage.bytes < 8 << 20, "{usage:?}");
}

#[tokio::test]
async fn a_slot_is_named_by_the_server_whatever_the_workspace_holds() {
    let dir = tempfile::tempdir().unwrap();
    let trees = open_trees(dir.path(), Isolation::Owner);
    let alice = Owner::named("alice");
    let first = trees.new_place(&alice, "t1").await.unwrap().place;
    let root = dir.path().join("w").join(first.tree.as_str());
    // The sandbox fills its workspaces directory with every name an old slot could take, and
    // links where the next numbers would be.
    for n in 1..50 {
        let _ = std::fs::create_dir(root.join(n.to_string()));
    }
    let host = host_dir(dir.path(), "50");
    for n in 50..60 {
        symlink(&host, root.join(n.to_string())).unwrap();
    }
    let next = trees.new_place(&alice, "t2").await.unwrap().place;
    assert!(crate::places::valid_slot(&next.slot));
    assert!(next.slot.parse::<u64>().is_err(), "{}", next.slot);
    assert!(
        std::fs::symlink_metadata(root.join(&next.slot))
            .unwrap()
            .is_dir()
    );
}

#[tokio::test]
async fn a_thread_tree_is_removed_whole_without_following_what_was_planted_in_it() {
    let dir = tempfile::tempdir().unwrap();
    let trees = open_trees(dir.path(), Isolation::Thread);
    let alice = Owner::named("alice");
    let place = trees.new_place(&alice, "t1").await.unwrap().place;
    let placement = trees.placement(&alice, "t1", &place).unwrap();
    let host = host_dir(dir.path(), &place.slot);
    let state = &placement.process.confine[0];
    std::fs::remove_dir_all(state.join("app")).unwrap();
    symlink(&host, state.join("app")).unwrap();
    symlink(&host, placement.workspace.path().join("host")).unwrap();
    std::fs::hard_link(
        host.join(&place.slot).join("precious"),
        placement.workspace.path().join("hard"),
    )
    .unwrap();
    trees.remove_thread_files(&record(&place, "c"));
    assert!(!state.exists() && !placement.workspace.path().exists());
    assert_eq!(
        std::fs::read_to_string(host.join(&place.slot).join("precious")).unwrap(),
        "precious"
    );
}

/// A tree an earlier version made as the server's user (root) is given whole to the sandbox's
/// identity when a thread opens in it: every entry, links included (never what they lead to).
#[tokio::test]
async fn a_tree_made_as_the_servers_user_is_given_to_the_sandboxs_identity() {
    use std::os::unix::fs::MetadataExt as _;
    let dir = tempfile::tempdir().unwrap();
    let before = open_trees(dir.path(), Isolation::Owner);
    let alice = Owner::named("alice");
    let place = before.new_place(&alice, "t1").await.unwrap().place;
    let placement = before.placement(&alice, "t1", &place).unwrap();
    std::fs::write(placement.workspace.path().join("notes.md"), "mine").unwrap();
    std::fs::write(placement.storage_dir.path().join("c.db"), "db").unwrap();
    let outside = dir.path().join("outside");
    std::fs::write(&outside, "not the tree's").unwrap();
    symlink(&outside, placement.workspace.path().join("link")).unwrap();
    let me = std::fs::metadata(dir.path()).unwrap();
    let identity = if me.uid() == 0 {
        SandboxIdentity {
            uid: 4242,
            gid: 4243,
        }
    } else {
        SandboxIdentity {
            uid: me.uid(),
            gid: me.gid(),
        }
    };
    let after = Arc::new(Trees::open(
        &dir.path().join("save"),
        &dir.path().join("w"),
        Isolation::Owner,
        "local",
        Some(identity),
    ));
    after.placement(&alice, "t1", &place).unwrap();
    for root in &placement.process.confine {
        let mut pending = vec![root.clone()];
        while let Some(path) = pending.pop() {
            let meta = std::fs::symlink_metadata(&path).unwrap();
            assert_eq!(
                (meta.uid(), meta.gid()),
                (identity.uid, identity.gid),
                "{}",
                path.display()
            );
            if meta.is_dir() {
                pending.extend(std::fs::read_dir(&path).unwrap().map(|e| e.unwrap().path()));
            }
        }
    }
    let kept = std::fs::metadata(&outside).unwrap();
    assert_eq!(kept.uid(), me.uid(), "what a link leads to is not given");
    let marker = after.claims.marker_file(&place.tree);
    assert_eq!(
        std::fs::metadata(marker).unwrap().uid(),
        me.uid(),
        "the marker stays the server's"
    );
}
