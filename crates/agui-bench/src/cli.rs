//! Command-line options and the resolved plan of a run (full or `--quick`).

use std::path::PathBuf;

use anyhow::bail;
use serde::Serialize;

use crate::workloads::{w1, w2, w3, w4, w5, w6, w7, w8};

/// `agui-bench`: the benchmark of record (`cargo xtask bench` builds the binaries and runs it).
#[derive(Debug, clap::Parser)]
#[command(name = "agui-bench", version, about)]
pub(crate) struct Args {
    /// Workloads to run, comma-separated (W1 latency, W2 concurrency, W3 idle memory, W4
    /// frontend-tool park/resume, W5 commands, W6 forks, W7 threads and files, W8 a new
    /// thread's first answer by phase; W5 runs only when asked for).
    #[arg(long, default_value = "W1,W2,W3,W4,W6,W7,W8", value_delimiter = ',')]
    pub(crate) workloads: Vec<String>,
    /// A ~2-minute run: fewer runs, levels and iterations, shorter settles (explicit flags win).
    #[arg(long)]
    pub(crate) quick: bool,
    /// Skip the raw floor (harness-client driven directly).
    #[arg(long)]
    pub(crate) no_floor: bool,
    /// The servers' `--sandbox` (`owner`, `thread` or `off`; default: the server's default).
    /// The raw floor is never confined.
    #[arg(long)]
    pub(crate) sandbox: Option<String>,
    /// Conversations per harness process, of the servers (`--pool-size`) and of the raw floor
    /// (default: the server's default). `--sandbox off --pool-size 1` is a process per thread
    /// with no confinement: the floor under `thread` mode and under every thread a new owner.
    #[arg(long, default_value_t = crate::launch::POOL_SIZE, value_parser = clap::value_parser!(u64).range(1..))]
    pub(crate) pool_size: u64,
    /// Spread the threads over this many owners: the servers get one token per owner
    /// (`auth_tokens`) and each thread's runs carry its owner's (chosen by its id). 0 (the
    /// default): no identities, every thread the one local owner's.
    #[arg(long, default_value_t = 0)]
    pub(crate) owners: usize,
    /// Repeat W1 and W2 this many times (each repeat reported apart).
    #[arg(long, default_value_t = 1)]
    pub(crate) repeats: usize,
    /// The release `agui-antigravity` binary.
    #[arg(long)]
    pub(crate) server_bin: PathBuf,
    /// The release `gemini-script` binary (the model, run as its own process).
    #[arg(long)]
    pub(crate) model_bin: PathBuf,
    /// The `localharness` binary (default: discovery, as the server does it).
    #[arg(long, env = "ANTIGRAVITY_HARNESS_PATH")]
    pub(crate) harness: Option<PathBuf>,
    /// The JSON report (default `target/bench/agui-bench-<unix time>.json`).
    #[arg(long)]
    pub(crate) out: Option<PathBuf>,
    /// Scratch directory for servers, floors and the model (default: next to the report).
    #[arg(long)]
    pub(crate) scratch: Option<PathBuf>,
    /// Per-run timeout, s.
    #[arg(long, default_value_t = 120.0)]
    pub(crate) timeout: f64,
    /// Words in the model's text reply.
    #[arg(long, default_value_t = 200)]
    pub(crate) tokens: usize,
    /// SSE events the model's text reply is split into.
    #[arg(long, default_value_t = 20)]
    pub(crate) chunks: usize,
    /// W1: runs per series (default 40; quick 10).
    #[arg(long)]
    pub(crate) w1_runs: Option<usize>,
    /// W1: warm-up runs, reported apart (default 2).
    #[arg(long)]
    pub(crate) w1_warmup: Option<usize>,
    /// W1: pause before each fresh-thread run, ms — threads arriving one at a time, more slowly
    /// than processes boot (default 0: back to back).
    #[arg(long, default_value_t = 0)]
    pub(crate) w1_gap_ms: u64,
    /// W2: concurrency levels (default 8,32,64; quick 8,32).
    #[arg(long, value_delimiter = ',')]
    pub(crate) w2_levels: Option<Vec<usize>>,
    /// W2: turns per thread (default 3).
    #[arg(long)]
    pub(crate) w2_turns: Option<usize>,
    /// W2: pause between levels, s (default 2).
    #[arg(long)]
    pub(crate) w2_pause: Option<f64>,
    /// W3: thread counts to grow to (default 16,64,256; quick 16,64).
    #[arg(long, value_delimiter = ',')]
    pub(crate) w3_levels: Option<Vec<usize>>,
    /// W3: threads opened at once (default 8).
    #[arg(long)]
    pub(crate) w3_open_concurrency: Option<usize>,
    /// W3 live pass: settle after the turns, s (default 5; quick 3).
    #[arg(long)]
    pub(crate) w3_settle: Option<f64>,
    /// W3: idle CPU window, s (default 5; quick 2).
    #[arg(long)]
    pub(crate) w3_idle_window: Option<f64>,
    /// W3 hibernated pass: the server's `--hibernate-after-secs` (default 5; quick 3).
    #[arg(long)]
    pub(crate) w3_hibernate_after_secs: Option<u64>,
    /// W3 hibernated pass: the server's `--harness-idle-grace-secs` (default 5; quick 3).
    #[arg(long)]
    pub(crate) w3_harness_idle_grace_secs: Option<u64>,
    /// W3 hibernated pass: settle after the turns, s (default 2 × hibernate + 2 × grace).
    #[arg(long)]
    pub(crate) w3_hibernated_settle: Option<f64>,
    /// W4: iterations (default 20; quick 5).
    #[arg(long)]
    pub(crate) w4_iters: Option<usize>,
    /// W5: text-only and command turn pairs (default 20; quick 8).
    #[arg(long)]
    pub(crate) w5_runs: Option<usize>,
    /// W6: forks (a new thread, a second turn, a regenerate of it) (default 10; quick 4).
    #[arg(long)]
    pub(crate) w6_runs: Option<usize>,
    /// W8: fresh threads one at a time, by phase (default 30; quick 10).
    #[arg(long)]
    pub(crate) w8_runs: Option<usize>,
    /// W8: fresh threads at once, by phase (default 8).
    #[arg(long, default_value_t = 8)]
    pub(crate) w8_burst: usize,
    /// W7: threads made and listed (default 1000; quick 200).
    #[arg(long)]
    pub(crate) w7_threads: Option<usize>,
    /// W7: threads a page (default 50, the server's default page).
    #[arg(long, default_value_t = 50)]
    pub(crate) w7_limit: usize,
    /// W7: whole listings read (default 5; quick 3).
    #[arg(long)]
    pub(crate) w7_passes: Option<usize>,
    /// W7: `PUT`s in flight while making the threads.
    #[arg(long, default_value_t = 16)]
    pub(crate) w7_concurrency: usize,
    /// W7: the file uploaded and downloaded, MiB (default 200; quick 50).
    #[arg(long)]
    pub(crate) w7_file_mb: Option<u64>,
    /// W4 floor: wait before answering the tool call, ms (the resume then starts from an idle
    /// harness, as run 2 does).
    #[arg(long, default_value_t = 200)]
    pub(crate) w4_floor_answer_delay_ms: u64,
}

/// Which workloads run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub(crate) enum Workload {
    W1,
    W2,
    W3,
    W4,
    W5,
    W6,
    W7,
    W8,
}

/// Everything a run does, resolved from the flags.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct Plan {
    pub(crate) quick: bool,
    pub(crate) workloads: Vec<Workload>,
    pub(crate) floor: bool,
    pub(crate) repeats: usize,
    pub(crate) timeout_s: f64,
    pub(crate) tokens: usize,
    pub(crate) chunks: usize,
    pub(crate) w1: w1::Params,
    pub(crate) w2: w2::Params,
    pub(crate) w3: w3::Params,
    pub(crate) w4: w4::Params,
    pub(crate) w5: w5::Params,
    pub(crate) w6: w6::Params,
    pub(crate) w7: w7::Params,
    pub(crate) w8: w8::Params,
    pub(crate) sandbox: Option<String>,
    pub(crate) pool_size: u64,
    pub(crate) owners: usize,
}

/// The quick value in quick mode, else the full one.
fn pick<T>(quick_mode: bool, quick: T, full: T) -> T {
    if quick_mode { quick } else { full }
}

impl Args {
    /// The plan these flags describe.
    pub(crate) fn plan(&self) -> anyhow::Result<Plan> {
        let q = self.quick;
        let mut workloads = Vec::new();
        for name in &self.workloads {
            let w = match name.trim().to_ascii_uppercase().as_str() {
                "W1" => Workload::W1,
                "W2" => Workload::W2,
                "W3" => Workload::W3,
                "W4" => Workload::W4,
                "W5" => Workload::W5,
                "W6" => Workload::W6,
                "W7" => Workload::W7,
                "W8" => Workload::W8,
                "" => continue,
                other => bail!("unknown workload `{other}` (W1, W2, W3, W4, W5, W6, W7, W8)"),
            };
            if !workloads.contains(&w) {
                workloads.push(w);
            }
        }
        let hibernate = self.w3_hibernate_after_secs.unwrap_or(pick(q, 3, 5));
        let grace = self.w3_harness_idle_grace_secs.unwrap_or(pick(q, 3, 5));
        let plan = Plan {
            quick: q,
            workloads,
            floor: !self.no_floor,
            repeats: self.repeats.max(1),
            timeout_s: self.timeout,
            tokens: self.tokens,
            chunks: self.chunks,
            w1: w1::Params {
                runs: self.w1_runs.unwrap_or(pick(q, 10, 40)).max(1),
                warmup: self.w1_warmup.unwrap_or(2),
                gap_ms: self.w1_gap_ms,
            },
            w2: w2::Params {
                levels: self
                    .w2_levels
                    .clone()
                    .unwrap_or_else(|| pick(q, vec![8, 32], vec![8, 32, 64])),
                turns: self.w2_turns.unwrap_or(3).max(1),
                pause_s: self.w2_pause.unwrap_or(2.0),
            },
            w3: w3::Params {
                levels: self
                    .w3_levels
                    .clone()
                    .unwrap_or_else(|| pick(q, vec![16, 64], vec![16, 64, 256])),
                open_concurrency: self.w3_open_concurrency.unwrap_or(8),
                settle_s: self.w3_settle.unwrap_or(pick(q, 3.0, 5.0)),
                idle_window_s: self.w3_idle_window.unwrap_or(pick(q, 2.0, 5.0)),
                hibernate_after_secs: hibernate,
                harness_idle_grace_secs: grace,
                hibernated_settle_s: self
                    .w3_hibernated_settle
                    .unwrap_or(2.0 * hibernate as f64 + 2.0 * grace as f64),
            },
            w4: w4::Params {
                iterations: self.w4_iters.unwrap_or(pick(q, 5, 20)).max(1),
                floor_answer_delay_ms: self.w4_floor_answer_delay_ms,
            },
            w5: w5::Params {
                runs: self.w5_runs.unwrap_or(pick(q, 8, 20)).max(1),
                warmup: 2,
            },
            w6: w6::Params {
                runs: self.w6_runs.unwrap_or(pick(q, 4, 10)).max(1),
            },
            w7: w7::Params {
                threads: self.w7_threads.unwrap_or(pick(q, 200, 1000)).max(1),
                limit: self.w7_limit,
                passes: self.w7_passes.unwrap_or(pick(q, 3, 5)).max(1),
                concurrency: self.w7_concurrency.max(1),
                file_mb: self.w7_file_mb.unwrap_or(pick(q, 50, 200)).max(1),
            },
            w8: w8::Params {
                runs: self.w8_runs.unwrap_or(pick(q, 10, 30)).max(1),
                warmup: 2,
                gap_ms: 300,
                burst: self.w8_burst.max(1),
            },
            sandbox: self.sandbox.clone(),
            pool_size: self.pool_size,
            owners: self.owners,
        };
        if plan
            .w2
            .levels
            .iter()
            .chain(&plan.w3.levels)
            .any(|n| *n == 0)
        {
            bail!("levels must be at least 1");
        }
        if !(1..=200).contains(&plan.w7.limit) {
            bail!("--w7-limit must be between 1 and 200 (the server's largest page)");
        }
        Ok(plan)
    }
}

#[cfg(test)]
mod tests {
    use clap::Parser as _;

    use super::*;

    fn plan(args: &[&str]) -> anyhow::Result<Plan> {
        let base = ["agui-bench", "--server-bin", "s", "--model-bin", "m"];
        Args::try_parse_from(base.iter().chain(args))?.plan()
    }

    #[test]
    fn quick_shrinks_and_flags_win() {
        let full = plan(&[]).unwrap();
        assert_eq!(full.w1.runs, 40);
        assert_eq!(full.w2.levels, [8, 32, 64]);
        assert_eq!(full.w3.hibernated_settle_s, 20.0);
        assert_eq!(
            full.workloads,
            [
                Workload::W1,
                Workload::W2,
                Workload::W3,
                Workload::W4,
                Workload::W6,
                Workload::W7,
                Workload::W8
            ]
        );
        assert_eq!(full.w6.runs, 10);
        assert_eq!((full.w7.threads, full.w7.file_mb), (1000, 200));
        let quick = plan(&["--quick", "--w1-runs", "7", "--workloads", "w4,W1,w4"]).unwrap();
        assert_eq!(quick.w1.runs, 7);
        assert_eq!(quick.w2.levels, [8, 32]);
        assert_eq!(quick.w4.iterations, 5);
        assert_eq!(quick.w3.hibernated_settle_s, 12.0);
        assert_eq!(quick.workloads, [Workload::W4, Workload::W1]);
        assert_eq!(quick.w6.runs, 4);
        assert_eq!(
            (quick.w7.threads, quick.w7.file_mb, quick.w7.limit),
            (200, 50, 50)
        );
        assert!(plan(&["--w7-limit", "201"]).is_err());
        assert!(plan(&["--workloads", "W9"]).is_err());
        assert!(plan(&["--w2-levels", "0"]).is_err());
    }
}
