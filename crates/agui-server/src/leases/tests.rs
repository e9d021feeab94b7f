use std::sync::atomic::{AtomicU64, Ordering};

use super::*;

/// A clock the test moves, shared by every replica of a test.
fn clock() -> (Arc<AtomicU64>, Clock) {
    let now = Arc::new(AtomicU64::new(1_000_000));
    let read = now.clone();
    (now, Arc::new(move || read.load(Ordering::SeqCst)))
}

const TTL: Duration = Duration::from_secs(10);

fn replica(dir: &Path, name: &str, clock: &Clock) -> FileLeases {
    FileLeases::with_clock(dir, name, TTL, clock.clone())
}

/// Replicas `a` and `b` sharing a directory and a clock.
fn two_replicas() -> (tempfile::TempDir, Arc<AtomicU64>, FileLeases, FileLeases) {
    let dir = tempfile::tempdir().unwrap();
    let (now, clock) = clock();
    let (a, b) = (
        replica(dir.path(), "a", &clock),
        replica(dir.path(), "b", &clock),
    );
    (dir, now, a, b)
}

fn holder(denied: Result<Duration, LeaseDenied>) -> (String, Duration) {
    match denied {
        Err(LeaseDenied::Held {
            holder,
            retry_after,
        }) => (holder, retry_after),
        other => panic!("expected a lease held elsewhere, got {other:?}"),
    }
}

#[test]
fn a_held_lease_is_refused_to_others_until_it_expires() {
    let (_dir, now, a, b) = two_replicas();
    assert_eq!(a.acquire("t"), Ok(TTL));
    now.fetch_add(4_000, Ordering::SeqCst);
    let (who, retry) = holder(b.acquire("t"));
    assert_eq!((who.as_str(), retry), ("a", Duration::from_secs(6)));
    // Another thread is free.
    assert_eq!(b.acquire("u"), Ok(TTL));
    // a dies (stops renewing): once expired, b takes it, and a cannot renew it any more.
    now.fetch_add(6_001, Ordering::SeqCst);
    assert_eq!(b.acquire("t"), Ok(TTL));
    assert_eq!(holder(a.acquire("t")).0, "b");
}

#[test]
fn renewing_extends_the_lease() {
    let (_dir, now, a, b) = two_replicas();
    assert_eq!(a.acquire("t"), Ok(TTL));
    for _ in 0..5 {
        now.fetch_add(a.renew_every().as_millis() as u64, Ordering::SeqCst);
        assert_eq!(a.acquire("t"), Ok(TTL), "the holder renews");
        assert_eq!(holder(b.acquire("t")).1, TTL, "a full lifetime left");
    }
    // Released, it is free at once.
    a.release("t");
    assert_eq!(b.acquire("t"), Ok(TTL));
    // Releasing a lease one does not hold changes nothing.
    a.release("t");
    assert_eq!(holder(a.acquire("t")).0, "b");
}

#[test]
fn a_restarted_replica_takes_its_earlier_leases_back_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let (now, clock) = clock();
    let before = replica(dir.path(), "a", &clock);
    assert_eq!(before.acquire("t"), Ok(TTL));
    now.fetch_add(1, Ordering::SeqCst);
    // Same replica id, new incarnation: the earlier one is dead (ids are unique per replica).
    let after = replica(dir.path(), "a", &clock);
    assert_eq!(after.acquire("t"), Ok(TTL));
    assert_eq!(
        holder(before.acquire("t")).0,
        "a",
        "the old incarnation lost it"
    );
    assert_eq!(holder(replica(dir.path(), "b", &clock).acquire("t")).0, "a");
}

#[test]
fn of_replicas_racing_for_a_free_or_an_expired_lease_exactly_one_wins() {
    let dir = tempfile::tempdir().unwrap();
    let (now, clock) = clock();
    for round in 0..20 {
        let thread = format!("t{}", round % 2);
        let replicas: Vec<Arc<FileLeases>> = (0..4)
            .map(|i| Arc::new(replica(dir.path(), &format!("r{round}-{i}"), &clock)))
            .collect();
        let barrier = Arc::new(std::sync::Barrier::new(replicas.len()));
        let handles: Vec<_> = replicas
            .iter()
            .map(|r| {
                let (r, barrier, thread) = (r.clone(), barrier.clone(), thread.clone());
                std::thread::spawn(move || {
                    barrier.wait();
                    r.acquire(&thread)
                })
            })
            .collect();
        let won: Vec<_> = handles
            .into_iter()
            .map(|h| h.join().unwrap())
            .enumerate()
            .filter(|(_, r)| r.is_ok())
            .map(|(i, _)| i)
            .collect();
        assert_eq!(won.len(), 1, "round {round}: winners {won:?}");
        let file: LeaseRecord =
            serde_json::from_slice(&std::fs::read(replicas[0].path_of(&thread)).unwrap()).unwrap();
        assert_eq!(
            file.replica,
            format!("r{round}-{}", won[0]),
            "the file names the winner"
        );
        // Every lease of this round expires before the next round races for it again.
        now.fetch_add(millis(TTL) + 1, Ordering::SeqCst);
    }
    let left: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| !n.ends_with(".json"))
        .collect();
    assert!(
        left.is_empty(),
        "no temp file or takeover lock is left: {left:?}"
    );
}

#[test]
fn an_unreadable_lease_counts_as_expired() {
    let dir = tempfile::tempdir().unwrap();
    let (_now, clock) = clock();
    let a = replica(dir.path(), "a", &clock);
    std::fs::write(a.path_of("t"), b"{ torn").unwrap();
    assert_eq!(a.acquire("t"), Ok(TTL));
}

#[test]
fn a_replica_asking_for_a_held_thread_is_seen_by_the_holder_until_it_holds_it_or_gives_up() {
    let (_dir, now, a, b) = two_replicas();
    assert_eq!(a.acquire("t"), Ok(TTL));
    assert!(!a.wanted("t"), "nobody asked");
    holder(b.acquire("t"));
    b.want("t");
    assert!(a.wanted("t"), "the holder sees b's request");
    assert!(
        !b.wanted("t"),
        "a replica's own request is not a request to it"
    );
    assert!(!a.wanted("u"), "per thread");
    // a hands the thread over; b takes it, and its request is done.
    a.release("t");
    assert_eq!(b.acquire("t"), Ok(TTL));
    assert!(!b.wanted("t") && !a.wanted("t"), "the request is gone");
    // A request nobody renews is forgotten after a lease's lifetime (its asker gave up).
    b.release("t");
    assert_eq!(a.acquire("t"), Ok(TTL));
    b.want("t");
    now.fetch_add(millis(TTL) - 1, Ordering::SeqCst);
    assert!(a.wanted("t"));
    now.fetch_add(2, Ordering::SeqCst);
    assert!(!a.wanted("t"), "a stale request is forgotten");
}

/// A record that cannot be written: what a full volume does to a lease's write, after its
/// temporary file was made.
struct Unwritable;

impl Serialize for Unwritable {
    fn serialize<S: serde::Serializer>(&self, _: S) -> Result<S::Ok, S::Error> {
        Err(serde::ser::Error::custom("no space left"))
    }
}

#[test]
fn a_failed_write_leaves_no_temporary_file_behind() {
    let (dir, _now, a, _b) = two_replicas();
    assert!(a.write_temp(&Unwritable).is_err());
    let left: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert!(
        left.is_empty(),
        "every failed write while the volume was full left a file: {left:?}"
    );
}
