use std::path::{Path, PathBuf};

use super::*;
use crate::places::{Isolation, Place};
use crate::store::{StoreLimits, ThreadRecord, ThreadStore};
use crate::trees::Trees;

/// agui-server's rule: the names of its tokens become `token:…`, anything else `user:…`.
fn server_rule(identity: &str) -> String {
    if identity == "alice" {
        format!("token:{identity}")
    } else {
        format!("user:{identity}")
    }
}

/// What a save dir held before namespaces: one tree per owner, a record, a marker, a claim and
/// an owner file per thread.
struct Legacy {
    dir: tempfile::TempDir,
    /// `(thread, bare owner, place)`.
    threads: Vec<(String, Owner, Place)>,
}

impl Legacy {
    fn save(&self) -> PathBuf {
        self.dir.path().join("save")
    }

    fn trees(&self) -> std::sync::Arc<Trees> {
        std::sync::Arc::new(Trees::open(
            &self.save(),
            &self.dir.path().join("w"),
            Isolation::Owner,
            "local",
            None,
        ))
    }

    fn store(&self) -> ThreadStore {
        ThreadStore::open(&self.save().join(THREADS_DIR), StoreLimits::default()).unwrap()
    }

    /// Threads of `alice` (a token's name), `bob`, `user:bob` (a proxy's user whose name has
    /// the form of a new identity: its claim file is where `bob`'s new one goes) and the local
    /// owner.
    async fn written() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let legacy = Self {
            dir,
            threads: Vec::new(),
        };
        let trees = legacy.trees();
        let store = legacy.store();
        let mut threads = Vec::new();
        for (thread, owner) in [
            ("t-alice", "alice"),
            ("t-alice-2", "alice"),
            ("t-bob", "bob"),
            ("t-userbob", "user:bob"),
            ("t-local", ""),
        ] {
            let owner = Owner::named(owner);
            let place = trees.new_place(&owner, thread).await.unwrap().place;
            trees.placement(&owner, thread, &place).unwrap();
            store
                .put(
                    thread,
                    &ThreadRecord {
                        conversation_id: format!("c-{thread}"),
                        owner: Some(owner.clone()),
                        place: Some(place.clone()),
                        ..ThreadRecord::default()
                    },
                )
                .unwrap();
            if let Some(identity) = owner.identity() {
                let owners = legacy.save().join("owners");
                fs::create_dir_all(&owners).unwrap();
                fs::write(
                    owners.join(format!("{thread}.json")),
                    serde_json::json!({"threadId": thread, "owner": identity}).to_string(),
                )
                .unwrap();
            }
            threads.push((thread.to_owned(), owner, place));
        }
        // Where that version kept the markers: inside each tree.
        for (_, _, place) in &threads {
            let trees_dir = legacy.save().join("o");
            let beside = trees_dir.join(format!("{}.owner.json", place.tree));
            if beside.exists() {
                fs::rename(
                    &beside,
                    trees_dir.join(place.tree.as_str()).join("owner.json"),
                )
                .unwrap();
            }
        }
        Self { threads, ..legacy }
    }

    /// Checks that every thread belongs to its renamed owner, in the tree it had.
    fn check_renamed(&self) {
        let trees = self.trees();
        let store = self.store();
        for (thread, owner, place) in &self.threads {
            let renamed = owner.identity().map_or_else(Owner::local, |identity| {
                Owner::named(&server_rule(identity))
            });
            let record = store.get(thread).unwrap();
            assert_eq!(record.owner.as_ref(), Some(&renamed), "{thread}'s record");
            assert_eq!(
                record.place.as_ref(),
                Some(place),
                "{thread} keeps its place"
            );
            assert_eq!(
                trees.existing_tree(&renamed).as_ref(),
                Some(&place.tree),
                "{renamed}'s claim names {thread}'s tree"
            );
            trees
                .placement(&renamed, thread, place)
                .unwrap_or_else(|e| panic!("{thread} opens for {renamed}: {e}"));
            if !owner.is_local() {
                assert!(
                    trees.placement(owner, thread, place).is_err(),
                    "the bare `{owner}` no longer opens {thread}"
                );
                let file = self.save().join(format!("owners/{thread}.json"));
                let stored: Value = serde_json::from_slice(&fs::read(file).unwrap()).unwrap();
                assert_eq!(stored["owner"], renamed.identity().unwrap(), "{thread}");
            }
        }
        // No old claim is left to a name the new identities do not use.
        let by_owner = self.save().join("o/by-owner");
        let mut claims: Vec<String> = entries(&by_owner).unwrap();
        claims.sort();
        let mut expected: Vec<String> = ["", "token:alice", "user:bob", "user:user:bob"]
            .iter()
            .map(|identity| claim_file_name(&Owner::named(identity)))
            .collect();
        expected.sort();
        assert_eq!(claims, expected);
        let journal = read_journal(&self.save()).unwrap().unwrap();
        assert_eq!(journal.state, Progress::Done);
        assert_eq!(journal.renamed, expected_renaming());
        assert!(journal.records.is_empty() && journal.claims.is_empty());
        for leftover in ["owners", "o/by-owner"] {
            let names = entries(&self.save().join(leftover)).unwrap();
            assert!(
                names.iter().all(|n| !n.starts_with('.')),
                "no temporary file in {leftover}: {names:?}"
            );
        }
    }
}

fn expected_renaming() -> BTreeMap<String, String> {
    [
        ("alice", "token:alice"),
        ("bob", "user:bob"),
        ("user:bob", "user:user:bob"),
    ]
    .into_iter()
    .map(|(a, b)| (a.to_owned(), b.to_owned()))
    .collect()
}

fn migrate(save: &Path) -> IdentityMigration {
    migrate_identities(save, &server_rule).unwrap()
}

#[tokio::test]
async fn every_stored_identity_is_renamed_and_every_thread_keeps_its_tree() {
    let legacy = Legacy::written().await;
    let before = legacy.store().get("t-alice").unwrap().updated_at;
    let migrated = migrate(&legacy.save());
    assert!(migrated.migrated_now);
    assert_eq!(migrated.renamed, expected_renaming());
    legacy.check_renamed();
    assert_eq!(
        legacy.store().get("t-alice").unwrap().updated_at,
        before,
        "retention is not renewed"
    );
}

#[tokio::test]
async fn a_migration_runs_once_whatever_the_rule_says_later() {
    let legacy = Legacy::written().await;
    migrate(&legacy.save());
    // Later, `bob` becomes a token's name too: what was stored keeps its owner.
    let later = migrate_identities(&legacy.save(), &|x| format!("token:{x}")).unwrap();
    assert!(!later.migrated_now);
    assert_eq!(later.renamed, expected_renaming());
    legacy.check_renamed();
}

#[tokio::test]
async fn a_save_dir_with_nothing_to_rename_is_marked_done_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let save = dir.path().join("fresh");
    assert_eq!(migrate(&save), IdentityMigration::default());
    let journal = read_journal(&save).unwrap().unwrap();
    assert_eq!((journal.state, journal.renamed.len()), (Progress::Done, 0));
}

/// A migration stopped after any of its steps (a crash) is finished by the next start, as
/// planned then: the next start's rule differs, and must not matter.
#[tokio::test]
async fn a_migration_stopped_after_any_step_is_finished_as_planned() {
    type Step = fn(&Path, &mut Journal);
    let steps: [(&str, Step); 6] = [
        ("planned", |_, _| {}),
        ("claims set aside", |save, journal| {
            stage_claims(save, journal).unwrap();
        }),
        ("staged", |save, journal| {
            journal.state = Progress::Staged;
            write_journal(save, journal).unwrap();
        }),
        ("claims linked", |save, journal| {
            link_claims(save, journal).unwrap();
        }),
        ("records rewritten", |save, journal| {
            rewrite_records(save, journal).unwrap();
        }),
        ("files rewritten", |save, journal| {
            rewrite_files(save, journal).unwrap();
        }),
    ];
    for stop in 0..steps.len() {
        let legacy = Legacy::written().await;
        let save = legacy.save();
        let mut journal = plan(&save, &["owners"], &server_rule).unwrap();
        write_journal(&save, &journal).unwrap();
        for (_, step) in &steps[..=stop] {
            step(&save, &mut journal);
        }
        // Half of the claims set aside, as a crash in the middle of that step leaves them.
        if stop == 0 {
            let by_owner = save.join("o/by-owner");
            fs::create_dir_all(by_owner.join(STAGED)).unwrap();
            let first = &journal.claims[0].file;
            fs::rename(by_owner.join(first), by_owner.join(STAGED).join(first)).unwrap();
        }
        let next = migrate_identities(&save, &|x| format!("other:{x}")).unwrap();
        assert!(next.migrated_now, "stopped after `{}`", steps[stop].0);
        assert_eq!(next.renamed, expected_renaming(), "the plan's renaming");
        legacy.check_renamed();
    }
}

#[tokio::test]
async fn of_two_servers_starting_at_once_one_migrates_and_the_other_finds_it_done() {
    let legacy = Legacy::written().await;
    let save = legacy.save();
    let runs: Vec<_> = (0..2)
        .map(|_| {
            let save = save.clone();
            std::thread::spawn(move || migrate(&save))
        })
        .collect();
    let results: Vec<IdentityMigration> = runs.into_iter().map(|r| r.join().unwrap()).collect();
    assert_eq!(
        results.iter().filter(|r| r.migrated_now).count(),
        1,
        "{results:?}"
    );
    assert!(results.iter().all(|r| r.renamed == expected_renaming()));
    legacy.check_renamed();
}

#[tokio::test]
async fn a_rule_that_would_merge_or_keep_identities_is_refused_before_anything_changes() {
    let legacy = Legacy::written().await;
    let save = legacy.save();
    let merge = migrate_identities(&save, &|_| "user:someone".into()).unwrap_err();
    assert!(merge.to_string().contains("same new name"), "{merge}");
    let keep = migrate_identities(&save, &|x| x.to_owned()).unwrap_err();
    assert!(keep.to_string().contains("`alice`"), "{keep}");
    assert!(read_journal(&save).unwrap().is_none(), "nothing planned");
    let trees = legacy.trees();
    for (thread, owner, place) in &legacy.threads {
        trees
            .placement(owner, thread, place)
            .unwrap_or_else(|e| panic!("{thread} is untouched: {e}"));
    }
    migrate(&save);
    legacy.check_renamed();
}
