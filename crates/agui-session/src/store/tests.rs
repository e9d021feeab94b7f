use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use pretty_assertions::assert_eq;
use tempfile::TempDir;

use super::*;

/// A store in a fresh directory with a clock the test moves.
struct Fixture {
    /// Holds `store/`; nothing else may appear in it.
    root: TempDir,
    clock: Arc<AtomicU64>,
}

impl Fixture {
    fn new() -> Self {
        Self {
            root: tempfile::tempdir().expect("temp dir"),
            clock: Arc::new(AtomicU64::new(1_000_000)),
        }
    }

    fn dir(&self) -> PathBuf {
        self.root.path().join("store")
    }

    fn open(&self, limits: StoreLimits) -> ThreadStore {
        let clock = Arc::clone(&self.clock);
        ThreadStore::open_with_clock(&self.dir(), limits, move || clock.load(Ordering::SeqCst))
            .expect("open")
    }

    fn advance(&self, seconds: u64) {
        self.clock.fetch_add(seconds, Ordering::SeqCst);
    }

    fn now(&self) -> u64 {
        self.clock.load(Ordering::SeqCst)
    }

    /// The file names in the store directory, sorted.
    fn files(&self) -> Vec<String> {
        let mut names: Vec<String> = fs::read_dir(self.dir())
            .expect("list")
            .map(|entry| {
                entry
                    .expect("entry")
                    .file_name()
                    .to_string_lossy()
                    .into_owned()
            })
            .collect();
        names.sort();
        names
    }

    /// Slot A of a thread: the only file of a thread written once.
    fn path_of(&self, thread_id: &str) -> PathBuf {
        self.slot_path(thread_id, Slot::A)
    }

    fn slot_path(&self, thread_id: &str, slot: Slot) -> PathBuf {
        slots::slot_path(&self.dir(), &slots::stem_of(thread_id), slot)
    }
}

/// The name of one slot file of a thread.
fn file_name(thread_id: &str, slot: Slot) -> String {
    slots::slot_path(Path::new(""), &slots::stem_of(thread_id), slot)
        .to_string_lossy()
        .into_owned()
}

fn record(conversation_id: &str) -> ThreadRecord {
    ThreadRecord {
        conversation_id: conversation_id.to_owned(),
        forwarded: ["m1", "m2"].into_iter().collect(),
        pending_frontend_tools: vec![PendingTool {
            tool_call_id: "call-1".to_owned(),
            name: "set_colour".to_owned(),
        }],
        workspace: PathBuf::from("/srv/ws/t1"),
        awaiting_echo: Some("m2".to_owned()),
        awaited_turn_lost: true,
        lost_turns: {
            let mut lost = LostTurns::default();
            lost.insert(3);
            lost
        },
        updated_at: 0,
        ..ThreadRecord::default()
    }
}

#[test]
fn a_record_round_trips_with_its_update_time() {
    let fixture = Fixture::new();
    let store = fixture.open(StoreLimits::default());
    assert!(store.is_empty());
    assert_eq!(store.get("t1"), None);

    store.put("t1", &record("conv-1")).expect("put");
    let expected = ThreadRecord {
        updated_at: fixture.now(),
        ..record("conv-1")
    };
    assert_eq!(store.get("t1"), Some(expected));
    assert_eq!(store.len(), 1);
    assert_eq!(store.get("t2"), None);

    // A put replaces the record.
    fixture.advance(5);
    store.put("t1", &record("conv-2")).expect("put");
    let got = store.get("t1").expect("record");
    assert_eq!(
        (got.conversation_id.as_str(), got.updated_at),
        ("conv-2", fixture.now())
    );
    assert_eq!(store.len(), 1);
    assert_eq!(
        fixture.files(),
        [file_name("t1", Slot::B), file_name("t1", Slot::A)],
        "two writes fill both slots"
    );
}

#[test]
fn records_survive_a_reopen() {
    let fixture = Fixture::new();
    let store = fixture.open(StoreLimits::default());
    store.put("t1", &record("conv-1")).expect("put");
    store.put("t2", &record("conv-2")).expect("put");
    let before = (store.get("t1"), store.get("t2"));
    drop(store);

    let store = fixture.open(StoreLimits::default());
    assert_eq!(store.len(), 2);
    assert_eq!((store.get("t1"), store.get("t2")), before);
    assert!(before.0.is_some() && before.1.is_some());
}

#[test]
fn no_record_is_dropped_to_make_room_however_many_there_are() {
    let fixture = Fixture::new();
    let store = fixture.open(StoreLimits::default());
    for n in 0..300 {
        store.put(&format!("t{n}"), &record("c")).expect("put");
    }
    drop(store);
    let store = fixture.open(StoreLimits::default());
    assert_eq!(store.len(), 300);
    assert!(store.get("t0").is_some() && store.get("t299").is_some());
}

#[test]
fn expired_records_are_dropped() {
    let fixture = Fixture::new();
    let ttl = StoreLimits {
        ttl: Duration::from_secs(10),
    };
    let store = fixture.open(ttl);
    store.put("old", &record("c-old")).expect("put");
    fixture.advance(6);
    store.put("new", &record("c-new")).expect("put");

    // At exactly the TTL a record is still alive.
    fixture.advance(4);
    assert!(store.sweep().is_empty());
    assert!(store.get("old").is_some());

    // Past it, a read misses and the sweep drops it.
    fixture.advance(1);
    assert_eq!(store.get("old"), None);
    assert_eq!(store.len(), 1);
    fixture.advance(10);
    let dropped: Vec<(String, String)> = store
        .sweep()
        .into_iter()
        .map(|(id, record)| (id, record.conversation_id))
        .collect();
    assert_eq!(
        dropped,
        [
            ("old".into(), "c-old".into()),
            ("new".into(), "c-new".into())
        ],
        "the sweep says what it dropped, the one a read found expired too"
    );
    assert!(store.is_empty());
    assert!(fixture.files().is_empty());

    // Records that expired while the server was down go with the first sweep after a start.
    store.put("again", &record("c")).expect("put");
    drop(store);
    fixture.advance(11);
    let store = fixture.open(ttl);
    assert_eq!(store.get("again"), None);
    assert_eq!(store.sweep().len(), 1);
    assert!(store.is_empty());
    assert!(fixture.files().is_empty());
}

#[test]
fn the_sweep_drops_only_what_expired() {
    let fixture = Fixture::new();
    let store = fixture.open(StoreLimits {
        ttl: Duration::from_secs(10),
    });
    for thread in ["t1", "t2", "t3"] {
        store.put(thread, &record(thread)).expect("put");
        fixture.advance(5);
    }
    // Ages are now 15, 10 and 5 seconds.
    assert_eq!(store.sweep().len(), 1);
    assert_eq!(store.get("t1"), None);
    assert!(store.get("t2").is_some() && store.get("t3").is_some());
}

#[test]
fn forwarded_ids_are_bounded_keeping_the_newest() {
    let mut forwarded: ForwardedIds = (1..=ForwardedIds::KEPT + 2)
        .map(|n| format!("m{n}"))
        .collect();
    assert_eq!(forwarded.len(), ForwardedIds::KEPT);
    assert!(!forwarded.contains("m1") && !forwarded.contains("m2"));
    assert!(forwarded.contains("m3"));
    forwarded.record("m3");
    forwarded.record("new");
    assert_eq!(forwarded.len(), ForwardedIds::KEPT);
    assert!(
        forwarded.contains("m3") && !forwarded.contains("m4"),
        "a recorded again id is the most recent"
    );

    // The store keeps the record's ids as they are, and reads back at most the newest KEPT.
    let fixture = Fixture::new();
    let store = fixture.open(StoreLimits::default());
    let mut thread = record("c");
    thread.forwarded = forwarded.clone();
    store.put("t", &thread).expect("put");
    assert_eq!(store.get("t").expect("record").forwarded, forwarded);
    let long: Vec<String> = (0..ForwardedIds::KEPT + 5)
        .map(|n| format!("x{n}"))
        .collect();
    let read: ForwardedIds =
        serde_json::from_value(serde_json::json!(long)).expect("a list of ids");
    assert_eq!(
        read.iter().collect::<Vec<_>>(),
        long[5..].iter().map(String::as_str).collect::<Vec<_>>()
    );
}

#[test]
fn forwarded_ids_keep_each_id_once_most_recent_last() {
    let mut forwarded = ForwardedIds::default();
    for id in ["a", "b", "a", "c"] {
        forwarded.record(id);
    }
    assert_eq!(forwarded.iter().collect::<Vec<_>>(), ["b", "a", "c"]);
    assert!(forwarded.contains("a"));
    assert!(!forwarded.contains("d"));
}

#[test]
fn corrupt_files_are_moved_aside_at_open() {
    let fixture = Fixture::new();
    let store = fixture.open(StoreLimits::default());
    store.put("good", &record("c")).expect("put");
    drop(store);

    let bad = [
        ("garbage", b"{not json".to_vec()),
        ("empty", Vec::new()),
        (
            "no version",
            br#"{"threadId":"no version","record":{"conversationId":"c"}}"#.to_vec(),
        ),
        (
            "wrong shape",
            br#"{"version":1,"threadId":"wrong shape","record":"nope"}"#.to_vec(),
        ),
        // A valid record under another thread's name (copied or tampered with).
        (
            "misplaced",
            br#"{"version":1,"threadId":"someone else","record":{"conversationId":"c"}}"#.to_vec(),
        ),
    ];
    for (thread, bytes) in &bad {
        fs::write(fixture.path_of(thread), bytes).expect("write");
    }
    // Not ours: left alone.
    fs::write(fixture.dir().join("notes.txt"), "hello").expect("write");

    let store = fixture.open(StoreLimits::default());
    assert_eq!(store.len(), 1);
    assert!(store.get("good").is_some());
    for (thread, bytes) in &bad {
        assert_eq!(store.get(thread), None, "{thread}");
        let aside = format!("{}.corrupt", file_name(thread, Slot::A));
        assert_eq!(
            fs::read(fixture.dir().join(aside)).expect("moved aside"),
            *bytes,
            "{thread}"
        );
        assert!(!fixture.path_of(thread).exists(), "{thread}");
    }
    assert!(fixture.files().contains(&"notes.txt".to_owned()));
}

#[test]
fn a_record_corrupted_after_open_reads_as_absent() {
    let fixture = Fixture::new();
    let store = fixture.open(StoreLimits::default());
    store.put("t", &record("c")).expect("put");
    fs::write(fixture.path_of("t"), "\u{0}\u{1}").expect("write");
    assert_eq!(store.get("t"), None);
    assert!(store.is_empty());
    assert_eq!(
        fixture.files(),
        [format!("{}.corrupt", file_name("t", Slot::A))]
    );

    // A record deleted behind the store's back also reads as absent.
    store.put("u", &record("c")).expect("put");
    fs::remove_file(fixture.path_of("u")).expect("remove");
    assert_eq!(store.get("u"), None);
    assert!(store.is_empty());
    // And a put after that works again.
    store.put("u", &record("c2")).expect("put");
    assert_eq!(store.get("u").expect("record").conversation_id, "c2");
}

#[test]
fn oversized_files_are_not_read() {
    let fixture = Fixture::new();
    let store = fixture.open(StoreLimits::default());
    drop(store);
    let size = usize::try_from(MAX_FILE_BYTES).expect("size") + 1;
    fs::write(fixture.path_of("big"), vec![b' '; size]).expect("write");
    let store = fixture.open(StoreLimits::default());
    assert!(store.is_empty());
    assert_eq!(
        fixture.files(),
        [format!("{}.corrupt", file_name("big", Slot::A))]
    );
}

#[test]
fn unknown_fields_are_tolerated_and_newer_formats_left_alone() {
    let fixture = Fixture::new();
    let store = fixture.open(StoreLimits::default());
    drop(store);
    let now = fixture.now();
    let extended = format!(
        r#"{{"version":1,"threadId":"t","future":true,
            "record":{{"conversationId":"c","updatedAt":{now},"colour":"red"}}}}"#
    );
    fs::write(fixture.path_of("t"), extended).expect("write");
    let newer = r#"{"version":3,"threadId":"n","record":{"conversationId":"c"}}"#;
    fs::write(fixture.path_of("n"), newer).expect("write");

    let store = fixture.open(StoreLimits::default());
    assert_eq!(
        store.get("t"),
        Some(ThreadRecord {
            conversation_id: "c".to_owned(),
            updated_at: now,
            ..ThreadRecord::default()
        })
    );
    assert_eq!(store.get("n"), None);
    assert_eq!(store.len(), 1);
    assert_eq!(
        fs::read_to_string(fixture.path_of("n")).expect("kept"),
        newer
    );
}

#[test]
fn leftover_temp_files_are_removed_at_open() {
    let fixture = Fixture::new();
    let store = fixture.open(StoreLimits::default());
    store.put("t", &record("c")).expect("put");
    drop(store);
    let temp = fixture
        .dir()
        .join(format!("{}.4242.tmp", file_name("t", Slot::A)));
    fs::write(&temp, "half a rec").expect("write");

    let store = fixture.open(StoreLimits::default());
    assert!(!temp.exists());
    assert!(store.get("t").is_some());
    assert_eq!(fixture.files(), [file_name("t", Slot::A)]);
}

#[test]
fn remove_forgets_a_thread_for_good() {
    let fixture = Fixture::new();
    let store = fixture.open(StoreLimits::default());
    store.put("t", &record("c")).expect("put");
    assert!(store.remove("t").expect("remove"));
    assert!(!store.remove("t").expect("remove"));
    assert!(!store.remove("never").expect("remove"));
    assert_eq!(store.get("t"), None);
    drop(store);
    let store = fixture.open(StoreLimits::default());
    assert!(store.is_empty());
    assert!(fixture.files().is_empty());
}

#[test]
fn hostile_thread_ids_stay_inside_the_directory() {
    let fixture = Fixture::new();
    let store = fixture.open(StoreLimits::default());
    let long = "x/".repeat(5_000);
    let ids = [
        "../x",
        "../../../../tmp/escape",
        "/etc/passwd",
        "a/b\\c",
        ".",
        "..",
        "",
        " ",
        "nul\0byte",
        "日本語のスレッド 🧵",
        "CON",
        "t.json",
        long.as_str(),
    ];
    for (n, id) in ids.iter().enumerate() {
        store.put(id, &record(&format!("conv-{n}"))).expect("put");
    }
    for (n, id) in ids.iter().enumerate() {
        let got = store.get(id).expect("record");
        assert_eq!(got.conversation_id, format!("conv-{n}"), "{id:?}");
    }
    assert_eq!(store.len(), ids.len());
    // Only record files, all directly in the store directory, and nothing beside it.
    let files = fixture.files();
    assert_eq!(files.len(), ids.len());
    assert!(
        files.iter().all(|name| slots::parse_name(name).is_some()),
        "{files:?}"
    );
    let beside: Vec<_> = fs::read_dir(fixture.root.path())
        .expect("list")
        .map(|entry| entry.expect("entry").file_name())
        .collect();
    assert_eq!(beside, [OsStr::new("store")]);

    drop(store);
    let store = fixture.open(StoreLimits::default());
    assert_eq!(store.len(), ids.len());
    assert_eq!(store.get("../x").expect("record").conversation_id, "conv-0");
}

#[test]
fn concurrent_puts_from_threads() {
    let fixture = Fixture::new();
    let store = Arc::new(fixture.open(StoreLimits::default()));
    let writers: Vec<_> = (0..8)
        .map(|writer| {
            let store = Arc::clone(&store);
            std::thread::spawn(move || {
                for n in 0..25 {
                    // Each writer has its own threads and shares one with every other writer.
                    let mut own = record(&format!("w{writer}-{n}"));
                    own.forwarded = [format!("m{n}")].into_iter().collect();
                    store.put(&format!("w{writer}-{n}"), &own).expect("put");
                    store
                        .put("shared", &record(&format!("w{writer}")))
                        .expect("put");
                    let _ = store.get("shared");
                }
            })
        })
        .collect();
    for writer in writers {
        writer.join().expect("writer");
    }
    assert_eq!(store.len(), 8 * 25 + 1);
    for writer in 0..8 {
        for n in 0..25 {
            let got = store.get(&format!("w{writer}-{n}")).expect("record");
            assert_eq!(
                (got.conversation_id, got.forwarded),
                (
                    format!("w{writer}-{n}"),
                    [format!("m{n}")].into_iter().collect()
                )
            );
        }
    }
    let shared = store.get("shared").expect("record").conversation_id;
    assert!(shared.starts_with('w'), "{shared}");
    assert_eq!(
        fixture.files().len(),
        8 * 25 + 2,
        "one file per own thread, two for the shared one"
    );

    drop(store);
    let store = fixture.open(StoreLimits::default());
    assert_eq!(store.len(), 8 * 25 + 1);
    assert_eq!(store.get("shared").expect("record").conversation_id, shared);
}

#[test]
fn errors_name_the_action_and_the_path() {
    let fixture = Fixture::new();
    // A file where the directory should be.
    fs::write(fixture.dir(), "not a directory").expect("write");
    let error = ThreadStore::open(&fixture.dir(), StoreLimits::default()).expect_err("fails");
    let message = error.to_string();
    assert!(
        message.starts_with("could not create the thread store directory")
            && message.contains(&fixture.dir().display().to_string()),
        "{message}"
    );
}

#[test]
fn the_system_clock_stamps_records() {
    let dir = tempfile::tempdir().expect("temp dir");
    let store = ThreadStore::open(dir.path(), StoreLimits::default()).expect("open");
    store.put("t", &record("c")).expect("put");
    // 2023-01-01: any working clock is past it.
    assert!(store.get("t").expect("record").updated_at > 1_672_531_200);
    assert_eq!(store.dir(), dir.path());
    assert!(format!("{store:?}").contains("threads: 1"));
}

#[test]
fn a_record_written_by_another_process_sharing_the_directory_is_read() {
    // Two replicas share the directory: each opened it before the other wrote.
    let fixture = Fixture::new();
    let ten_secs = StoreLimits {
        ttl: Duration::from_secs(10),
    };
    let a = fixture.open(ten_secs);
    let b = fixture.open(ten_secs);
    a.put("t", &record("written-by-a")).expect("put");
    assert_eq!(
        b.get("t").expect("b reads a's record").conversation_id,
        "written-by-a"
    );
    // b's index now says "t" is as old as a's first write; a renews it later.
    fixture.advance(8);
    a.put("t", &record("renewed-by-a")).expect("put");
    fixture.advance(8);
    assert!(
        b.sweep().is_empty(),
        "b's sweep keeps a record a renewed since"
    );
    assert_eq!(b.get("t").expect("kept").conversation_id, "renewed-by-a");
    fixture.advance(11);
    assert_eq!(
        b.sweep().len(),
        1,
        "and drops it once it has really expired"
    );
    assert!(a.get("t").is_none());
}

#[test]
fn writes_alternate_between_two_slots_in_place() {
    use std::os::unix::fs::MetadataExt as _;
    let fixture = Fixture::new();
    let store = fixture.open(StoreLimits::default());
    store.put("t", &record("c0")).expect("put");
    store.put("t", &record("c1")).expect("put");
    let inodes = || {
        Slot::BOTH.map(|slot| {
            fs::metadata(fixture.slot_path("t", slot))
                .expect("slot")
                .ino()
        })
    };
    let before = inodes();
    for n in 2..12 {
        store.put("t", &record(&format!("c{n}"))).expect("put");
        assert_eq!(
            store.get("t").expect("record").conversation_id,
            format!("c{n}")
        );
    }
    assert_eq!(
        inodes(),
        before,
        "every write went into one of the same two files"
    );
    assert_eq!(fixture.files().len(), 2);
    drop(store);
    let store = fixture.open(StoreLimits::default());
    assert_eq!(store.get("t").expect("record").conversation_id, "c11");
}

#[test]
fn a_write_cut_short_at_any_byte_leaves_the_previous_record_or_the_new_one() {
    let fixture = Fixture::new();
    let store = fixture.open(StoreLimits::default());
    store.put("t", &record("first")).expect("put");
    store.put("t", &record("previous")).expect("put");
    drop(store);
    // The next write goes over slot A (it holds the older record): what a crash can leave
    // there is a prefix of the new bytes, alone or over the rest of the old ones.
    let old = fs::read(fixture.slot_path("t", Slot::A)).expect("slot A");
    let new = slots::encode(
        "t",
        3,
        &ThreadRecord {
            updated_at: fixture.now(),
            ..record("new")
        },
    )
    .expect("encode");
    let mut previous_seen = 0;
    for cut in 0..=new.len() {
        for over_old in [false, true] {
            let mut torn = new[..cut].to_vec();
            if over_old && old.len() > cut {
                torn.extend_from_slice(&old[cut..]);
            }
            fs::write(fixture.slot_path("t", Slot::A), &torn).expect("tear");
            let store = fixture.open(StoreLimits::default());
            let got = store.get("t").expect("a record survives every cut");
            match got.conversation_id.as_str() {
                "previous" => previous_seen += 1,
                "new" => assert!(
                    cut + 2 >= new.len(),
                    "cut {cut}: the new record only when whole"
                ),
                other => panic!("cut {cut} (over old: {over_old}) read {other:?}"),
            }
            assert_eq!(
                fixture.files().len(),
                2,
                "a torn slot is overwritten, not moved aside"
            );
        }
    }
    assert!(previous_seen >= 2 * new.len(), "{previous_seen}");

    // After a torn write, the next one goes over the torn slot and wins.
    let store = fixture.open(StoreLimits::default());
    fs::write(fixture.slot_path("t", Slot::A), &new[..new.len() / 2]).expect("tear");
    assert_eq!(store.get("t").expect("record").conversation_id, "previous");
    store.put("t", &record("after")).expect("put");
    drop(store);
    let store = fixture.open(StoreLimits::default());
    assert_eq!(store.get("t").expect("record").conversation_id, "after");
}

#[test]
fn a_slot_whose_digest_is_wrong_or_missing_is_passed_over() {
    // Each is still valid JSON holding a valid record, but not as written.
    let edits = [
        ("a changed record", "newer", "nEwer"),
        ("a changed sequence", "\"sequence\": 2", "\"sequence\": 7"),
        ("no digest", "\"digest\"", "\"removed\""),
    ];
    for (what, from, to) in edits {
        let fixture = Fixture::new();
        let store = fixture.open(StoreLimits::default());
        store.put("t", &record("older")).expect("put");
        store.put("t", &record("newer")).expect("put");
        let slot_b = fixture.slot_path("t", Slot::B);
        let written = fs::read_to_string(&slot_b).expect("slot B");
        let edited = written.replace(from, to);
        assert_ne!(edited, written, "{what}: the edit applies");
        fs::write(&slot_b, edited).expect("edit");
        assert_eq!(
            store.get("t").expect("record").conversation_id,
            "older",
            "{what}"
        );
    }
}

#[test]
fn a_record_of_the_single_file_format_is_read_then_superseded() {
    let fixture = Fixture::new();
    drop(fixture.open(StoreLimits::default()));
    let now = fixture.now();
    let legacy = format!(
        r#"{{"version":1,"threadId":"t","record":{{"conversationId":"legacy","updatedAt":{now}}}}}"#
    );
    fs::write(fixture.path_of("t"), &legacy).expect("write");

    let store = fixture.open(StoreLimits::default());
    assert_eq!(store.get("t").expect("record").conversation_id, "legacy");
    store.put("t", &record("current")).expect("put");
    assert_eq!(
        fs::read_to_string(fixture.path_of("t")).expect("slot A"),
        legacy,
        "the first write goes beside the old file"
    );
    assert_eq!(store.get("t").expect("record").conversation_id, "current");
    drop(store);
    let store = fixture.open(StoreLimits::default());
    assert_eq!(store.get("t").expect("record").conversation_id, "current");
}
