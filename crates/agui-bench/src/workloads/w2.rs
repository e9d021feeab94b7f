//! W2 concurrency: for each level C, C fresh threads doing `turns` turns each, all started
//! together, on a fresh server (and, for the floor, a fresh pool) per level.

use std::sync::Arc;
use std::time::{Duration, Instant};

use serde::Serialize;
use tokio::sync::Barrier;

use super::{Cost, Ctx, FloorSeries, Series, Window, progress, tally};
use crate::agui::Thread;
use crate::floor::{self, Floor, FloorTurn};
use crate::launch::ServerSettings;
use crate::procfs::HARNESS_COMM;
use crate::sse::RunResult;
use crate::stats::Summary;

/// W2's parameters.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct Params {
    pub(crate) levels: Vec<usize>,
    pub(crate) turns: usize,
    /// Pause between levels, s.
    pub(crate) pause_s: f64,
}

/// One level against one side.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct Level<S> {
    pub(crate) concurrency: usize,
    pub(crate) stats: S,
    pub(crate) attempted: usize,
    pub(crate) ok: usize,
    pub(crate) wall_s: f64,
    pub(crate) throughput_turns_per_s: f64,
    pub(crate) turn_ms: Summary,
    /// Each thread's first turn (session creation included).
    pub(crate) first_turn_ms: Summary,
    pub(crate) later_turn_ms: Summary,
    /// Each thread from the level's start to the end of its last turn, when all its turns
    /// succeeded: how long a new thread's whole exchange takes (session creation favoured over
    /// later turns lowers the first-turn figure and raises this one).
    pub(crate) thread_done_ms: Summary,
    pub(crate) cost: Cost,
    pub(crate) harness_processes_after: usize,
    pub(crate) peak_tree_rss_mb: Option<f64>,
}

/// W2 at one level, both sides.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct LevelPair {
    pub(crate) ours: Level<Series>,
    pub(crate) floor: Option<Level<FloorSeries>>,
}

/// W2's figures.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct W2 {
    pub(crate) params: Params,
    pub(crate) levels: Vec<LevelPair>,
}

/// Runs every level against a fresh server, then the floor.
pub(crate) async fn run(ctx: &Ctx, params: Params) -> anyhow::Result<W2> {
    let mut levels = Vec::new();
    for &c in &params.levels {
        progress(&format!("W2: C={c}, server"));
        let ours = ours(ctx, c, params.turns).await?;
        pause(params.pause_s).await;
        let floor = if ctx.floor {
            progress(&format!("W2: C={c}, raw floor"));
            let level = floor(ctx, c, params.turns).await?;
            pause(params.pause_s).await;
            Some(level)
        } else {
            None
        };
        levels.push(LevelPair { ours, floor });
    }
    Ok(W2 { params, levels })
}

async fn pause(secs: f64) {
    tokio::time::sleep(Duration::from_secs_f64(secs)).await;
}

/// One thread's timings, the same for both sides.
struct ThreadTimings {
    /// (ok, turn end) per turn.
    turns: Vec<(bool, Option<Duration>)>,
    /// When the thread's last turn ended, since the level's start.
    done: Duration,
}

/// Waits for the threads' tasks (each gives its turns' results and when its last turn ended):
/// the results per thread, and each thread's timings since `t0`, `turn` reading one result.
async fn joined<R>(
    tasks: Vec<tokio::task::JoinHandle<(Vec<R>, Instant)>>,
    t0: Instant,
    turn: impl Fn(&R) -> (bool, Option<Duration>),
) -> anyhow::Result<(Vec<Vec<R>>, Vec<ThreadTimings>)> {
    let mut per_thread = Vec::with_capacity(tasks.len());
    let mut timings = Vec::with_capacity(tasks.len());
    for task in tasks {
        let (results, done) = task.await?;
        timings.push(ThreadTimings {
            turns: results.iter().map(&turn).collect(),
            done: done.saturating_duration_since(t0),
        });
        per_thread.push(results);
    }
    Ok((per_thread, timings))
}

/// The figures of a level from its threads' timings.
fn level<S>(
    c: usize,
    stats: S,
    per_thread: &[ThreadTimings],
    wall: Duration,
    cost: Cost,
    harness_processes_after: usize,
    peak_tree_rss_mb: Option<f64>,
) -> Level<S> {
    let ok_ends = |skip: usize, take: usize| {
        Summary::of(
            per_thread
                .iter()
                .flat_map(|t| t.turns.iter().skip(skip).take(take))
                .filter(|(ok, _)| *ok)
                .map(|(_, end)| *end),
        )
    };
    let attempted = per_thread.iter().map(|t| t.turns.len()).sum();
    let ok = per_thread
        .iter()
        .flat_map(|t| &t.turns)
        .filter(|(ok, _)| *ok)
        .count();
    Level {
        concurrency: c,
        stats,
        attempted,
        ok,
        wall_s: wall.as_secs_f64(),
        throughput_turns_per_s: ok as f64 / wall.as_secs_f64().max(1e-9),
        turn_ms: ok_ends(0, usize::MAX),
        first_turn_ms: ok_ends(0, 1),
        later_turn_ms: ok_ends(1, usize::MAX),
        thread_done_ms: Summary::of(
            per_thread
                .iter()
                .map(|t| t.turns.iter().all(|(ok, _)| *ok).then_some(t.done)),
        ),
        cost,
        harness_processes_after,
        peak_tree_rss_mb,
    }
}

async fn ours(ctx: &Ctx, c: usize, turns: usize) -> anyhow::Result<Level<Series>> {
    let server = ctx
        .server(&format!("w2-c{c}"), &ServerSettings::default())
        .await?;
    let go = Arc::new(Barrier::new(c + 1));
    let mut tasks = Vec::new();
    for _ in 0..c {
        let (go, client, url) = (go.clone(), ctx.client.clone(), server.url.clone());
        let timeout = ctx.timeout;
        tasks.push(tokio::spawn(async move {
            let mut thread = Thread::new(&format!("w2c{c}"));
            go.wait().await;
            let mut results = Vec::new();
            for k in 0..turns {
                let body = thread.next_turn(&format!("Concurrent turn {k}, please answer."), &[]);
                let r = crate::sse::run(&client, &url, &body, timeout).await;
                thread.record_reply(&r.text);
                results.push(r);
            }
            (results, Instant::now())
        }));
    }
    tokio::time::sleep(Duration::from_millis(50)).await;
    let window = Window::open(ctx, server.pid).await;
    let t0 = Instant::now();
    go.wait().await;
    let (per_thread, timings) = joined(tasks, t0, |r: &RunResult| (r.ok(), r.terminal)).await?;
    let wall = t0.elapsed();
    let ok = per_thread.iter().flatten().filter(|r| r.ok()).count();
    let (cost, peak) = window.close(ctx, ok).await;
    let harness_after =
        crate::procfs::ProcWatch::new(Some(server.pid), Some(ctx.model.pid)).harness_processes();
    server.stop().await;
    let stats = Series::of(per_thread.iter().flatten(), Some(&ctx.expected));
    Ok(level(
        c,
        stats,
        &timings,
        wall,
        cost,
        harness_after,
        Some(peak),
    ))
}

async fn floor(ctx: &Ctx, c: usize, turns: usize) -> anyhow::Result<Level<FloorSeries>> {
    let setup = Arc::new(Floor::new(
        &ctx.bins,
        &ctx.model.base_url,
        &ctx.scratch.join(format!("w2-c{c}-floor")),
        &ctx.floor_settings(),
    )?);
    let pool = setup.pool().await?;
    let go = Arc::new(Barrier::new(c + 1));
    let mut tasks = Vec::new();
    for _ in 0..c {
        let (go, setup, pool) = (go.clone(), setup.clone(), pool.clone());
        let timeout = ctx.timeout;
        tasks.push(tokio::spawn(async move {
            go.wait().await;
            let mut results = Vec::new();
            // The first turn includes opening the conversation, as a new thread's first run.
            let t0 = Instant::now();
            let mut conversation = match setup.open_plain(&pool).await {
                Ok(conversation) => conversation,
                Err(e) => {
                    results.push(FloorTurn {
                        error: Some(format!("open: {e:#}")),
                        ..FloorTurn::default()
                    });
                    return (results, Instant::now());
                }
            };
            for k in 0..turns {
                let start = if k == 0 { t0 } else { Instant::now() };
                let text = format!("Concurrent turn {k}, please answer.");
                results.push(floor::turn(&mut conversation, &text, start, None, timeout).await);
            }
            // Done when its last turn ended (the close is the host's business, as a server's).
            let done = Instant::now();
            conversation.close().await;
            (results, done)
        }));
    }
    tokio::time::sleep(Duration::from_millis(50)).await;
    let window = Window::open(ctx, std::process::id()).await;
    let t0 = Instant::now();
    go.wait().await;
    let (per_thread, timings) = joined(tasks, t0, |t: &FloorTurn| (t.ok(), t.end)).await?;
    let wall = t0.elapsed();
    let ok = per_thread.iter().flatten().filter(|t| t.ok()).count();
    let (cost, peak) = window.close(ctx, ok).await;
    let harness_after = crate::procfs::descendants(std::process::id())
        .iter()
        .filter(|(_, s)| s.comm == HARNESS_COMM)
        .count();
    pool.shutdown().await;
    let mut stats = FloorSeries::of(per_thread.iter().flatten(), Some(&ctx.expected));
    // A thread whose conversation could not open attempted its turns all the same.
    let lost = per_thread.iter().filter(|t| t.len() < turns).count() * (turns - 1);
    if lost > 0 {
        stats.errors.extend(tally(std::iter::repeat_n(
            "turn not attempted (open failed)".to_owned(),
            lost,
        )));
    }
    // The tree here is this process (the host) and its harness processes.
    Ok(level(
        c,
        stats,
        &timings,
        wall,
        cost,
        harness_after,
        Some(peak),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_thread_counts_as_done_only_when_all_its_turns_succeeded() {
        let ms = Duration::from_millis;
        let thread = |turns: &[Option<u64>], done: u64| ThreadTimings {
            turns: turns.iter().map(|t| (t.is_some(), t.map(ms))).collect(),
            done: ms(done),
        };
        let threads = [
            thread(&[Some(100), Some(50)], 150),
            thread(&[Some(120), None], 400),
            thread(&[Some(200), Some(60)], 260),
        ];
        let l = level(3, (), &threads, ms(400), Cost::default(), 1, None);
        assert_eq!((l.ok, l.attempted), (5, 6));
        assert_eq!(l.first_turn_ms.n, 3);
        assert_eq!(
            l.thread_done_ms.n, 2,
            "the thread with a failed turn is left out"
        );
        assert_eq!(l.thread_done_ms.min, Some(150.0));
        assert_eq!(l.thread_done_ms.max, Some(260.0));
    }
}
