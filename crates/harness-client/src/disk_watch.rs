//! The disk cap of a confined process, held whenever its processes can write: for as long as
//! the sandbox lives, turn or no turn, a command sent to the background included. Its granted
//! directories are measured through the door (links not followed, each inode once), plus what
//! its processes hold open after unlinking (which no walk sees, counted by the sandbox's PID 1);
//! when that goes over the cap and is still growing a moment later, or grows while over it (by
//! more than the harness's own bookkeeping, [`slack`]), the sandbox's commands are stopped
//! (killed; the harness lives on). A tree over its cap that shrinks — the agent cleaning up —
//! is left alone.
//!
//! How often: the closer to the cap, the sooner the next look (the headroom at a write rate of
//! [`FAST_WRITER`]), between [`SOONEST`] and [`LATEST`], and never more often than one look in
//! five of the time a look takes (a huge tree costs at most a fifth of a core). So a writer at
//! full disk speed overshoots by about what it writes in [`SOONEST`] and one measurement.

use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use harness_sandbox::{AgentDir, SandboxControl};

use crate::blocking::off_runtime;

/// The write rate the next look is timed for: faster than most disks, as fast as a page cache.
const FAST_WRITER: u64 = 2 << 30;

/// The shortest wait between two looks.
const SOONEST: Duration = Duration::from_millis(50);

/// The longest wait between two looks.
const LATEST: Duration = Duration::from_secs(5);

/// What one look found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Look {
    bytes: u64,
    /// A directory chain too deep to measure: counted as over the cap.
    too_deep: bool,
}

/// What to do after a look.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Verdict {
    /// Under the cap, or over it and not growing.
    Fine,
    /// It just went over the cap: look again at once, to tell a writer still at work from a
    /// tree that only grew before (whose writer is gone, or was a turn the turn's own check
    /// stopped) — killing then would only hit whatever command runs next, the agent's cleanup.
    Confirm,
    /// Over the cap and growing: stop the commands.
    Stop,
    /// Commands were just stopped: what they wrote while being killed lands now, so this look
    /// only takes the floor anew (judging it as growth would kill the next command, the agent's
    /// cleanup); look again at once.
    Settle,
}

/// What the watcher remembers between looks.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct Watch {
    /// The last look.
    before: Option<Look>,
    /// While over the cap: the least the tree took since it went over (or since its commands
    /// were last stopped).
    floor: Option<u64>,
    /// What the tree took when it was found over the cap, waiting for a second look.
    confirming: Option<u64>,
    /// Commands were stopped at the last look: this one takes the floor.
    settling: bool,
}

/// How much a tree found over its cap must grow before the second look for its writer to count
/// as still at work (the harness's own bookkeeping writes a few KiB).
const STILL_WRITING: u64 = 64 << 10;

/// How much a tree over its cap may grow before its commands are stopped: the harness's own
/// bookkeeping (its conversation database, transcripts) goes on while the agent cleans up, and
/// must not get the cleaning command killed. A new conversation opened to clean up writes its
/// database and its write-ahead log (up to about 4 MiB before a checkpoint): 1% of the cap, at
/// least 16 MiB.
fn slack(cap: u64) -> u64 {
    (cap / 100).max(16 << 20)
}

/// Judges `now` against `cap`: a tree that goes over the cap and is still growing a moment
/// later, or grows by more than [`slack`] above the least it took while over it, has its
/// commands stopped.
fn judge(cap: u64, watch: &mut Watch, now: Look) -> Verdict {
    let over = now.too_deep || now.bytes > cap;
    let before = watch.before.replace(now);
    if !over {
        watch.floor = None;
        watch.confirming = None;
        watch.settling = false;
        return Verdict::Fine;
    }
    if std::mem::take(&mut watch.settling) {
        watch.floor = Some(now.bytes);
        return Verdict::Settle;
    }
    if let Some(found) = watch.confirming.take() {
        let verdict = if now.bytes > found.saturating_add(STILL_WRITING) {
            Verdict::Stop
        } else {
            Verdict::Fine
        };
        watch.floor = Some(now.bytes);
        watch.settling = verdict == Verdict::Stop;
        return verdict;
    }
    let verdict = match (before, watch.floor) {
        // The first look: a sandbox started over its cap has no command yet.
        (None, _) => Verdict::Fine,
        // It went over since the last look.
        (Some(_), None) => {
            watch.confirming = Some(now.bytes);
            return Verdict::Confirm;
        }
        (Some(_), Some(floor)) if now.bytes > floor.saturating_add(slack(cap)) => Verdict::Stop,
        (Some(_), Some(_)) => Verdict::Fine,
    };
    watch.floor = Some(match (verdict, watch.floor) {
        (Verdict::Fine, Some(floor)) => floor.min(now.bytes),
        _ => now.bytes,
    });
    watch.settling = verdict == Verdict::Stop;
    verdict
}

/// How long to wait after a look that took `took` and found `now`.
fn next_wait(cap: u64, now: Look, took: Duration) -> Duration {
    let headroom = cap.saturating_sub(now.bytes);
    let at_full_speed = Duration::from_secs_f64(headroom as f64 / FAST_WRITER as f64);
    at_full_speed.clamp(SOONEST, LATEST).max(took * 5)
}

/// Watches `roots` (a confined process's granted directories) against `cap` until the process
/// is gone (`alive` no longer upgrades) or its sandbox's control channel ends; counts each stop
/// in `stops`.
pub(crate) async fn watch<T: Send + Sync + 'static>(
    alive: Weak<T>,
    stops: Arc<AtomicU64>,
    sandbox: SandboxControl,
    roots: Vec<PathBuf>,
    cap: u64,
    label: String,
) {
    let mut state = Watch::default();
    loop {
        if alive.strong_count() == 0 {
            return;
        }
        let started = Instant::now();
        let walked = {
            let roots = roots.clone();
            off_runtime(move || measure(&roots)).await
        };
        let Some(walked) = walked else { return };
        let Ok(unlinked) = sandbox.unlinked_bytes().await else {
            // The sandbox ended.
            return;
        };
        let now = Look {
            bytes: walked.bytes.saturating_add(unlinked),
            too_deep: walked.too_deep,
        };
        let took = started.elapsed();
        let verdict = judge(cap, &mut state, now);
        if verdict == Verdict::Stop {
            let stopped = sandbox.stop_commands().await;
            stops.fetch_add(1, Ordering::SeqCst);
            match stopped {
                Ok(stopped) => tracing::warn!(
                    process = %label,
                    used = now.bytes,
                    cap,
                    unlinked,
                    too_deep = now.too_deep,
                    stopped,
                    "the disk cap was passed while its commands wrote: stopped them"
                ),
                Err(_) => return,
            }
        }
        let wait = match verdict {
            Verdict::Confirm | Verdict::Stop => SOONEST,
            Verdict::Fine | Verdict::Settle => next_wait(cap, now, took),
        };
        tokio::time::sleep(wait).await;
    }
}

/// The disk `roots` take, through the door.
fn measure(roots: &[PathBuf]) -> Look {
    let mut look = Look {
        bytes: 0,
        too_deep: false,
    };
    for root in roots {
        match AgentDir::open(root).and_then(|dir| dir.disk_usage()) {
            Ok(usage) => {
                look.bytes = look.bytes.saturating_add(usage.bytes);
                look.too_deep |= usage.too_deep;
            }
            Err(e) => {
                tracing::debug!(root = %root.display(), error = %e, "could not measure a granted directory")
            }
        }
    }
    look
}

#[cfg(test)]
mod tests {
    use super::*;

    fn look(bytes: u64) -> Look {
        Look {
            bytes,
            too_deep: false,
        }
    }

    #[test]
    fn commands_are_stopped_when_the_tree_goes_over_its_cap_still_writing_or_grows_while_over_it() {
        let cap = 100 << 20;
        let slack = slack(cap);
        let mb = |n: u64| look(n << 20);
        // (the looks, in order, and the verdict on the last one)
        for (looks, expected) in [
            (vec![mb(50)], Verdict::Fine),
            (vec![mb(150)], Verdict::Fine),
            (vec![mb(90), mb(120)], Verdict::Confirm),
            // Still writing a moment later: stopped.
            (vec![mb(90), mb(120), mb(125)], Verdict::Stop),
            // Grown only before (the turn's own check stopped it): nothing to stop.
            (
                vec![mb(90), mb(120), look((120 << 20) + 1024)],
                Verdict::Fine,
            ),
            (vec![mb(90), mb(120), mb(120), mb(120)], Verdict::Fine),
            (
                vec![mb(150), mb(150), look((150 << 20) + slack / 2)],
                Verdict::Fine,
            ),
            (
                vec![mb(150), mb(150), look((150 << 20) + slack + 1)],
                Verdict::Stop,
            ),
            // Cleaning up lowers the floor: growing again from there counts.
            (
                vec![mb(150), mb(120), look((120 << 20) + slack + 1)],
                Verdict::Stop,
            ),
            // Bookkeeping, a little at a time, is judged from the floor, not look to look.
            (
                vec![
                    mb(150),
                    look((150 << 20) + slack / 2),
                    look((150 << 20) + slack + 1),
                ],
                Verdict::Stop,
            ),
            (
                vec![
                    mb(10),
                    Look {
                        bytes: 20 << 20,
                        too_deep: true,
                    },
                ],
                Verdict::Confirm,
            ),
            (vec![mb(150), mb(50), mb(60)], Verdict::Fine),
            // What the stopped writer wrote while being killed is not growth.
            (vec![mb(90), mb(120), mb(125), mb(130)], Verdict::Settle),
            (
                vec![mb(90), mb(120), mb(125), mb(130), mb(110)],
                Verdict::Fine,
            ),
            // After the settling look, growth counts again.
            (
                vec![
                    mb(90),
                    mb(120),
                    mb(125),
                    mb(130),
                    look((130 << 20) + slack + 1),
                ],
                Verdict::Stop,
            ),
        ] {
            let mut watch = Watch::default();
            let verdicts: Vec<Verdict> = looks.iter().map(|&l| judge(cap, &mut watch, l)).collect();
            assert_eq!(verdicts.last(), Some(&expected), "{looks:?}: {verdicts:?}");
        }
    }

    #[test]
    fn looks_come_sooner_near_the_cap_and_never_take_more_than_a_fifth_of_the_time() {
        let cap = 10 << 30;
        let far = next_wait(cap, look(0), Duration::from_millis(1));
        let near = next_wait(cap, look(cap - (10 << 20)), Duration::from_millis(1));
        let over = next_wait(cap, look(cap + 1), Duration::from_millis(1));
        assert_eq!(far, LATEST);
        assert_eq!(near, SOONEST);
        assert_eq!(over, SOONEST);
        let slow = next_wait(cap, look(cap), Duration::from_secs(1));
        assert_eq!(slow, Duration::from_secs(5));
    }
}
