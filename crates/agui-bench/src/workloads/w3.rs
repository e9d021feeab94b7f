//! W3 idle memory: grow to N threads (one turn each, a few at a time) for each N, let them
//! idle, then the PSS and RSS of the server alone and of the whole tree (server and harness
//! processes), per thread, the harness process count and the idle CPU.
//!
//! Two server lifetimes: **live** (hibernation off, figures a few seconds after the turns, as
//! the reference measures them) and **hibernated** (`--hibernate-after-secs` short, figures
//! after a settle longer than the hibernation delay plus the harness idle grace).

use std::sync::Arc;
use std::time::{Duration, Instant};

use serde::Serialize;
use tokio::sync::Semaphore;

use super::{Cost, Ctx, Window, progress, tally};
use crate::agui::Thread;
use crate::launch::ServerSettings;
use crate::procfs::{Memory, ProcWatch};
use crate::sse::RunResult;
use crate::stats::Summary;

/// "Never" for the live pass: longer than any run.
const NO_HIBERNATION_SECS: u64 = 86_400;

/// W3's parameters.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct Params {
    pub(crate) levels: Vec<usize>,
    /// Threads opened at once.
    pub(crate) open_concurrency: usize,
    /// Live pass: wait after the turns, s.
    pub(crate) settle_s: f64,
    /// Idle CPU is measured over this window, s.
    pub(crate) idle_window_s: f64,
    /// Hibernated pass: the server's `--hibernate-after-secs`.
    pub(crate) hibernate_after_secs: u64,
    /// Hibernated pass: the server's `--harness-idle-grace-secs`.
    pub(crate) harness_idle_grace_secs: u64,
    /// Hibernated pass: wait after the turns, s.
    pub(crate) hibernated_settle_s: f64,
}

/// One level of one pass.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct Level {
    pub(crate) threads: usize,
    pub(crate) threads_ok: usize,
    pub(crate) open_wall_s: f64,
    pub(crate) open_turn_ms: Summary,
    pub(crate) open_cost: Cost,
    pub(crate) memory: Memory,
    pub(crate) idle_server_cpu_pct: Option<f64>,
    pub(crate) idle_harness_cpu_pct: Option<f64>,
    /// Marginal over the server's own memory before any thread, divided by the threads open
    /// (a harness the server started ahead of the threads counts as theirs: it serves them,
    /// and it goes when they hibernate).
    pub(crate) server_pss_mb_per_thread: Option<f64>,
    pub(crate) tree_pss_mb_per_thread: Option<f64>,
    pub(crate) tree_rss_mb_per_thread: Option<f64>,
}

/// One server lifetime.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct Pass {
    pub(crate) hibernate_after_secs: u64,
    pub(crate) harness_idle_grace_secs: Option<u64>,
    pub(crate) settle_s: f64,
    pub(crate) before: Memory,
    pub(crate) levels: Vec<Level>,
    pub(crate) errors: std::collections::BTreeMap<String, usize>,
}

/// W3's figures.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct W3 {
    pub(crate) params: Params,
    pub(crate) live: Pass,
    pub(crate) hibernated: Pass,
}

/// Runs both passes.
pub(crate) async fn run(ctx: &Ctx, params: Params) -> anyhow::Result<W3> {
    progress("W3: live (hibernation off)");
    let live = pass(
        ctx,
        &params,
        "w3-live",
        ServerSettings {
            hibernate_after_secs: Some(NO_HIBERNATION_SECS),
            ..ServerSettings::default()
        },
        params.settle_s,
    )
    .await?;
    progress(&format!(
        "W3: hibernated (--hibernate-after-secs {}, --harness-idle-grace-secs {}, settle {} s)",
        params.hibernate_after_secs, params.harness_idle_grace_secs, params.hibernated_settle_s
    ));
    let hibernated = pass(
        ctx,
        &params,
        "w3-hibernated",
        ServerSettings {
            hibernate_after_secs: Some(params.hibernate_after_secs),
            harness_idle_grace_secs: Some(params.harness_idle_grace_secs),
            ..ServerSettings::default()
        },
        params.hibernated_settle_s,
    )
    .await?;
    Ok(W3 {
        params,
        live,
        hibernated,
    })
}

async fn pass(
    ctx: &Ctx,
    p: &Params,
    label: &str,
    settings: ServerSettings,
    settle_s: f64,
) -> anyhow::Result<Pass> {
    let server = ctx.server(label, &settings).await?;
    let watch = ProcWatch::new(Some(server.pid), Some(ctx.model.pid));
    // Let the server's start-up settle (a spare harness may be booting).
    tokio::time::sleep(Duration::from_secs(1)).await;
    let before = watch.memory(true);
    let gate = Arc::new(Semaphore::new(p.open_concurrency.max(1)));
    let mut opened: Vec<RunResult> = Vec::new();
    let mut levels = Vec::new();
    for &n in &p.levels {
        let need = n.saturating_sub(opened.len());
        let window = Window::open(ctx, server.pid).await;
        let t0 = Instant::now();
        let mut tasks = Vec::new();
        for i in opened.len()..opened.len() + need {
            let (gate, client, url) = (gate.clone(), ctx.client.clone(), server.url.clone());
            let timeout = ctx.timeout;
            tasks.push(tokio::spawn(async move {
                let _permit = gate.acquire_owned().await.expect("semaphore open");
                let mut thread = Thread::new("w3");
                let body = thread.next_turn(&format!("Idle session {i}, say hi."), &[]);
                crate::sse::run(&client, &url, &body, timeout).await
            }));
        }
        let mut results = Vec::new();
        for task in tasks {
            results.push(task.await?);
        }
        let open_wall_s = t0.elapsed().as_secs_f64();
        let ok_now = results.iter().filter(|r| r.ok()).count();
        let (open_cost, _) = window.close(ctx, ok_now).await;
        let open_turn_ms = Summary::of(results.iter().filter(|r| r.ok()).map(|r| r.terminal));
        opened.extend(results);
        tokio::time::sleep(Duration::from_secs_f64(settle_s)).await;
        let i0 = watch.snapshot();
        tokio::time::sleep(Duration::from_secs_f64(p.idle_window_s)).await;
        let idle = watch.delta(&i0, &watch.snapshot());
        let memory = watch.memory(true);
        let ok = opened.iter().filter(|r| r.ok()).count();
        let per = |now: Option<f64>, base: Option<f64>| {
            (ok > 0)
                .then_some(())
                .and(now.zip(base))
                .map(|(n, b)| (n - b) / ok as f64)
        };
        let pct = |s: Option<f64>| s.map(|s| 100.0 * s / idle.wall_s.max(1e-9));
        levels.push(Level {
            threads: n,
            threads_ok: ok,
            open_wall_s,
            open_turn_ms,
            open_cost,
            memory,
            idle_server_cpu_pct: pct(idle.server_s),
            idle_harness_cpu_pct: pct(idle.harness_s),
            server_pss_mb_per_thread: per(memory.server_pss_mb, before.server_pss_mb),
            tree_pss_mb_per_thread: per(memory.tree_pss_mb, before.server_pss_mb),
            tree_rss_mb_per_thread: per(Some(memory.tree_rss_mb), Some(before.server_rss_mb)),
        });
        progress(&format!(
            "W3 {label}: N={n}, {ok} ok, tree PSS {:.1} MB, {} harness processes",
            memory.tree_pss_mb.unwrap_or(0.0),
            memory.harness_processes
        ));
    }
    server.stop().await;
    Ok(Pass {
        hibernate_after_secs: settings.hibernate_after_secs.unwrap_or_default(),
        harness_idle_grace_secs: settings.harness_idle_grace_secs,
        settle_s,
        before,
        levels,
        errors: tally(opened.iter().filter(|r| !r.ok()).map(RunResult::failure)),
    })
}
