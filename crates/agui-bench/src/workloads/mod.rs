//! The workloads (W1–W8), each against the server over HTTP and, where one exists, against the
//! raw floor; shared measurement helpers.

pub(crate) mod w1;
pub(crate) mod w2;
pub(crate) mod w3;
pub(crate) mod w4;
pub(crate) mod w5;
pub(crate) mod w6;
pub(crate) mod w7;
pub(crate) mod w8;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use serde::Serialize;

use crate::floor::FloorTurn;
use crate::launch::{Binaries, Model, Server, ServerSettings};
use crate::procfs::{CpuPerTurn, CpuSnapshot, ProcWatch};
use crate::sse::{RunResult, Status};
use crate::stats::{Summary, mean};

/// What every workload runs with.
pub(crate) struct Ctx {
    pub(crate) bins: Binaries,
    pub(crate) model: Model,
    pub(crate) client: reqwest::Client,
    /// The model's standard reply: every text answer must be exactly this.
    pub(crate) expected: String,
    /// Scratch directories of servers and floors go under it.
    pub(crate) scratch: PathBuf,
    /// Per-run timeout.
    pub(crate) timeout: Duration,
    /// Also drive the raw floor.
    pub(crate) floor: bool,
    /// The servers' `--sandbox` (their default when `None`).
    pub(crate) sandbox: Option<String>,
    /// The servers' and the raw floors' conversations per harness process.
    pub(crate) pool_size: u64,
}

impl Ctx {
    /// What a raw floor of this run is set up from (see [`ServerSettings::floor`]).
    pub(crate) fn floor_settings(&self) -> ServerSettings {
        ServerSettings::floor(self.pool_size)
    }

    /// Starts a fresh server named `label` (its scratch directory).
    pub(crate) async fn server(
        &self,
        label: &str,
        settings: &ServerSettings,
    ) -> anyhow::Result<Server> {
        let mut settings = settings.clone();
        settings.pool_size = Some(self.pool_size);
        if let Some(mode) = &self.sandbox {
            settings.extra.extend(["--sandbox".into(), mode.clone()]);
        }
        if let Some(tokens) = crate::sse::owner_tokens() {
            // The workloads' concurrency is the benchmark's, whatever the owners' caps.
            settings.extra.extend([
                "--auth-tokens".into(),
                tokens,
                "--max-runs-per-owner".into(),
                "100000".into(),
                "--max-threads-per-owner".into(),
                "100000".into(),
            ]);
        }
        Server::start(
            &self.bins,
            &self.model.base_url,
            &self.scratch.join(label),
            &settings,
            &self.client,
        )
        .await
    }

    /// One AG-UI run.
    pub(crate) async fn run(&self, url: &str, body: &serde_json::Value) -> RunResult {
        crate::sse::run(&self.client, url, body, self.timeout).await
    }
}

/// A measured window: CPU of every process group and model requests, per turn.
pub(crate) struct Window {
    watch: ProcWatch,
    start: CpuSnapshot,
    served: Option<u64>,
}

impl Window {
    /// Starts measuring `server_pid` (this process for the floor) and the model.
    pub(crate) async fn open(ctx: &Ctx, server_pid: u32) -> Self {
        let mut watch = ProcWatch::new(Some(server_pid), Some(ctx.model.pid));
        let served = ctx.model.served(&ctx.client).await;
        let start = watch.snapshot();
        watch.start();
        Self {
            watch,
            start,
            served,
        }
    }

    /// A figure of the window without closing it.
    pub(crate) async fn mark(&self, ctx: &Ctx) -> (CpuSnapshot, Option<u64>) {
        (self.watch.snapshot(), ctx.model.served(&ctx.client).await)
    }

    /// CPU per turn and model requests per turn between two marks.
    pub(crate) fn between(
        &self,
        a: &(CpuSnapshot, Option<u64>),
        b: &(CpuSnapshot, Option<u64>),
        turns: usize,
    ) -> Cost {
        Cost::new(&self.watch.delta(&a.0, &b.0), a.1, b.1, turns)
    }

    /// Closes the window: the cost of `turns` turns, and the peak tree RSS (MB).
    pub(crate) async fn close(mut self, ctx: &Ctx, turns: usize) -> (Cost, f64) {
        let end = self.watch.snapshot();
        let served = ctx.model.served(&ctx.client).await;
        self.watch.stop();
        let cost = Cost::new(
            &self.watch.delta(&self.start, &end),
            self.served,
            served,
            turns,
        );
        (cost, self.watch.peak_tree_rss_mb())
    }

    /// The start mark.
    pub(crate) fn start_mark(&self) -> (CpuSnapshot, Option<u64>) {
        (self.start.clone(), self.served)
    }
}

/// What a set of turns cost.
#[derive(Debug, Clone, Copy, Default, Serialize)]
pub(crate) struct Cost {
    pub(crate) cpu: CpuPerTurn,
    pub(crate) model_requests_per_turn: Option<f64>,
}

impl Cost {
    fn new(
        delta: &crate::procfs::CpuDelta,
        served_a: Option<u64>,
        served_b: Option<u64>,
        turns: usize,
    ) -> Self {
        Self {
            cpu: CpuPerTurn::of(delta, turns),
            model_requests_per_turn: served_a
                .zip(served_b)
                .filter(|_| turns > 0)
                .map(|(a, b)| (b - a) as f64 / turns as f64),
        }
    }
}

/// Figures of a series of AG-UI runs (the reference's `run_stats`).
#[derive(Debug, Clone, Default, Serialize)]
pub(crate) struct Series {
    pub(crate) runs: usize,
    pub(crate) ok: usize,
    pub(crate) invalid_streams: usize,
    pub(crate) run_errors: usize,
    pub(crate) http_errors: usize,
    pub(crate) exceptions: usize,
    pub(crate) text_mismatch: usize,
    pub(crate) ttfb_ms: Summary,
    pub(crate) run_started_ms: Summary,
    pub(crate) first_content_ms: Summary,
    pub(crate) terminal_ms: Summary,
    pub(crate) content_events_per_run: Option<f64>,
    pub(crate) sse_bytes_per_run: Option<f64>,
    pub(crate) errors: BTreeMap<String, usize>,
}

impl Series {
    /// The figures of `runs`; text is checked against `expected` when given.
    pub(crate) fn of<'a>(
        runs: impl IntoIterator<Item = &'a RunResult>,
        expected: Option<&str>,
    ) -> Self {
        let runs: Vec<&RunResult> = runs.into_iter().collect();
        let ok: Vec<&&RunResult> = runs.iter().filter(|r| r.ok()).collect();
        let count = |s: Status| runs.iter().filter(|r| r.status == s).count();
        Self {
            runs: runs.len(),
            ok: ok.len(),
            invalid_streams: count(Status::Invalid),
            run_errors: count(Status::RunError),
            http_errors: count(Status::HttpError),
            exceptions: count(Status::Exception) + count(Status::Timeout),
            text_mismatch: expected.map_or(0, |e| ok.iter().filter(|r| r.text != e).count()),
            ttfb_ms: Summary::of(ok.iter().map(|r| r.first_byte)),
            run_started_ms: Summary::of(ok.iter().map(|r| r.run_started)),
            first_content_ms: Summary::of(ok.iter().map(|r| r.first_content)),
            terminal_ms: Summary::of(ok.iter().map(|r| r.terminal)),
            content_events_per_run: mean(ok.iter().map(|r| r.content_events as f64)),
            sse_bytes_per_run: mean(ok.iter().map(|r| r.bytes as f64)),
            errors: tally(runs.iter().filter(|r| !r.ok()).map(|r| r.failure())),
        }
    }
}

/// Figures of a series of floor turns.
#[derive(Debug, Clone, Default, Serialize)]
pub(crate) struct FloorSeries {
    pub(crate) runs: usize,
    pub(crate) ok: usize,
    pub(crate) text_mismatch: usize,
    pub(crate) first_text_ms: Summary,
    pub(crate) end_ms: Summary,
    pub(crate) text_deltas_per_run: Option<f64>,
    pub(crate) errors: BTreeMap<String, usize>,
}

impl FloorSeries {
    /// The figures of `turns`; text is checked against `expected` when given.
    pub(crate) fn of<'a>(
        turns: impl IntoIterator<Item = &'a FloorTurn>,
        expected: Option<&str>,
    ) -> Self {
        let turns: Vec<&FloorTurn> = turns.into_iter().collect();
        let ok: Vec<&&FloorTurn> = turns.iter().filter(|t| t.ok()).collect();
        Self {
            runs: turns.len(),
            ok: ok.len(),
            text_mismatch: expected.map_or(0, |e| ok.iter().filter(|t| t.text != e).count()),
            first_text_ms: Summary::of(ok.iter().map(|t| t.first_text)),
            end_ms: Summary::of(ok.iter().map(|t| t.end)),
            text_deltas_per_run: mean(ok.iter().map(|t| t.deltas as f64)),
            errors: tally(
                turns
                    .iter()
                    .filter(|t| !t.ok())
                    .map(|t| t.error.clone().unwrap_or_else(|| "no end of turn".into())),
            ),
        }
    }
}

/// Counts equal messages.
pub(crate) fn tally(messages: impl IntoIterator<Item = String>) -> BTreeMap<String, usize> {
    let mut out = BTreeMap::new();
    for m in messages {
        *out.entry(m).or_default() += 1;
    }
    out
}

/// Logs progress on stderr.
pub(crate) fn progress(what: &str) {
    eprintln!("[agui-bench] {what}");
}
