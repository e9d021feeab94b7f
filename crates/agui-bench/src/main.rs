//! `agui-bench`: the project's benchmark of record (`cargo xtask bench`).
//!
//! It starts the **release** server binary itself (as `../shared/bench/start_rust.sh` does:
//! loopback, `--pool-size 8`, a high `--max-sessions`, scratch workspace, save dir and `HOME`,
//! `RUST_LOG=warn`), talks to it only over HTTP (POST `RunAgentInput`, read the SSE stream) and
//! reads `/proc`, so it measures the server as a black box, the way the reference benchmark
//! (`../shared/bench/agui_bench.py`) does, with the same workloads:
//!
//! - **W1 latency**: N sequential runs each on a fresh thread, then N sequential turns on one
//!   thread (the whole transcript resent each turn); warm-up runs reported apart (cold start).
//!   Time to first byte, to `RUN_STARTED`, to the first `TEXT_MESSAGE_CONTENT`, to the terminal
//!   event (p50/p90/p99/max); the streamed text checked against the model's reply; CPU per turn
//!   of the server, the harness processes, the model and the benchmark itself.
//! - **W2 concurrency**: for C in 8/32/64, C fresh threads × 3 turns started together, a fresh
//!   server per level: throughput, turn latency, first-turn latency (session creation),
//!   later-turn latency, each thread's time to finish all its turns, ok/attempted, errors, CPU
//!   per turn per process group, machine utilisation, harness processes after, peak tree RSS.
//! - **W3 idle memory**: grow to N threads (one turn each) for N in 16/64/256, then PSS of the
//!   server and of the whole tree per thread, harness processes, idle CPU; once with
//!   hibernation off a few seconds after the turns, once with a short `--hibernate-after-secs`
//!   after a settle longer than it plus the harness idle grace.
//! - **W4 frontend-tool park/resume**: run 1 declares a tool and the model calls it; it must
//!   end `RUN_FINISHED` with `pendingToolCallIds` (parked); run 2 posts the `ToolMessage` and
//!   gets the text. Run-1 `RUN_FINISHED`, resume, park + resume.
//! - **W5 command cost** (only when asked for, `--workloads W5`): text-only turns alternate
//!   with turns whose model runs one command; the difference is what a command costs, to
//!   compare between runs with different `--sandbox` values.
//! - **W7 threads and files**: one owner makes N threads by uploading a small file to each,
//!   then lists them page by page (p50/p95 per page, each whole listing, each thread listed
//!   once); a 200 MiB file is uploaded, then downloaded and read to the end: throughput next
//!   to `cat` of the same file, and the server's RSS before and at its peak during the download.
//! - **W6 forks**: per thread, a first turn, a second, then a regenerate of the second's
//!   answer (the server forks the thread from the harness's saved trajectory): the fork's
//!   latency against a new thread's first turn.
//!
//! Next to our figures stands the **raw floor** ([`floor`]): the same turns (W1, W2, and W4 up
//! to the tool call) driven straight through `harness-client` with the harness config the
//! server would send, no AG-UI and no session layer — time to first text, end of turn, harness
//! CPU per turn, time to the tool call — and the ratio ours / floor.
//!
//! Before the workloads, the **harness process floor** ([`process_floor`]): what one harness
//! costs once started, before any config or conversation — the least each process per owner (or
//! per thread) takes, set against W2's harness processes.
//!
//! The model is `gemini-script` as its own process (its CPU measured apart) with a script
//! behaving like the reference's `fast_mock.py` ([`model`]). Process figures come from `/proc`
//! exactly as the reference reads them ([`procfs`]), plus the whole machine's busy share, so a
//! disturbed measurement shows. Output: a table per workload, and the JSON report.

mod agui;
mod cli;
mod floor;
mod launch;
mod model;
mod process_floor;
mod procfs;
mod report;
mod sse;
mod stats;
mod workloads;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use anyhow::Context as _;
use clap::Parser as _;
use serde_json::{Value, json};

use crate::cli::{Args, Plan, Workload};
use crate::launch::{Binaries, Model};
use crate::report::Table;
use crate::workloads::{Ctx, w1, w2, w3, w4, w5, w6, w7, w8};

fn main() -> anyhow::Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn")),
        )
        .with_writer(std::io::stderr)
        .init();
    let args = Args::parse();
    let plan = args.plan()?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    runtime.block_on(async {
        tokio::select! {
            result = run(&args, &plan) => result,
            _ = tokio::signal::ctrl_c() => anyhow::bail!("interrupted; servers and harnesses were stopped"),
        }
    })
}

fn unix_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

fn machine() -> Value {
    let read = |p: &str| std::fs::read_to_string(p).unwrap_or_default();
    let cpu = read("/proc/cpuinfo").lines().find_map(|l| {
        l.strip_prefix("model name")
            .map(|v| v.trim_start_matches([' ', '\t', ':']).to_owned())
    });
    let mem_gb =
        procfs::mem_total_kb().map(|kb| (kb as f64 / 1024.0 / 1024.0 * 10.0).round() / 10.0);
    json!({
        "nproc": std::thread::available_parallelism().map_or(1, |n| n.get()),
        "cpu": cpu,
        "mem_total_gb": mem_gb,
        "kernel": read("/proc/sys/kernel/osrelease").trim(),
    })
}

async fn run(args: &Args, plan: &Plan) -> anyhow::Result<()> {
    let started = unix_now();
    let t_start = Instant::now();
    let out = args
        .out
        .clone()
        .unwrap_or_else(|| PathBuf::from(format!("target/bench/agui-bench-{started}.json")));
    let scratch = args
        .scratch
        .clone()
        .unwrap_or_else(|| out.parent().unwrap_or(Path::new(".")).join("scratch"));
    std::fs::create_dir_all(&scratch).with_context(|| format!("creating {}", scratch.display()))?;
    let harness = match &args.harness {
        Some(path) => path.clone(),
        None => harness_client::find_binary(None)?,
    };
    let bins = Binaries {
        server: args.server_bin.clone(),
        model: args.model_bin.clone(),
        harness,
    };
    let load_start = procfs::loadavg();
    eprintln!(
        "[agui-bench] {} mode, sandbox {}, {} conversations per harness process, {}; load average at start {:?}; scratch {}",
        if plan.quick { "quick" } else { "full" },
        plan.sandbox.as_deref().unwrap_or("(server default)"),
        plan.pool_size,
        match plan.owners {
            0 => "one local owner".to_owned(),
            n => format!("{n} owners"),
        },
        load_start,
        scratch.display()
    );
    let process_floor = process_floor::measure(&bins.harness, &scratch.join("process-floor"))
        .await
        .context("measuring the harness process floor")?;
    sse::set_owners(plan.owners);
    let script = model::script(plan.tokens, plan.chunks, &[agui::TOOL_NAME]);
    let script_path = scratch.join("model-script.json");
    std::fs::write(&script_path, script.to_json())?;
    let model = Model::start(&bins.model, &script_path, &scratch.join("model.log")).await?;
    let ctx = Ctx {
        bins: bins.clone(),
        model,
        client: sse::client(),
        expected: model::reply_text(plan.tokens),
        scratch,
        timeout: Duration::from_secs_f64(plan.timeout_s),
        floor: plan.floor,
        sandbox: plan.sandbox.clone(),
        pool_size: plan.pool_size,
    };
    let mut results = serde_json::Map::new();
    let mut elapsed = serde_json::Map::new();
    let mut tables: Vec<Table> = Vec::new();
    let show = |new: Vec<Table>, tables: &mut Vec<Table>| {
        for t in &new {
            println!("{}", t.render());
        }
        tables.extend(new);
    };
    show(vec![process_floor.table()], &mut tables);
    let suffix = |r: usize| {
        if plan.repeats > 1 {
            format!(" [repeat {}/{}]", r + 1, plan.repeats)
        } else {
            String::new()
        }
    };
    for workload in &plan.workloads {
        let t0 = Instant::now();
        let (name, value) = match workload {
            Workload::W1 => {
                let mut all = Vec::new();
                for r in 0..plan.repeats {
                    let w = w1::run(&ctx, plan.w1).await?;
                    let mut t = report::w1(&w);
                    t.iter_mut().for_each(|t| t.title.push_str(&suffix(r)));
                    show(t, &mut tables);
                    all.push(serde_json::to_value(&w)?);
                }
                ("W1", Value::Array(all))
            }
            Workload::W2 => {
                let mut all = Vec::new();
                for r in 0..plan.repeats {
                    let w = w2::run(&ctx, plan.w2.clone()).await?;
                    let mut t = report::w2(&w, process_floor.rss_mb);
                    t.iter_mut().for_each(|t| t.title.push_str(&suffix(r)));
                    show(t, &mut tables);
                    all.push(serde_json::to_value(&w)?);
                }
                ("W2", Value::Array(all))
            }
            Workload::W3 => {
                let w = w3::run(&ctx, plan.w3.clone()).await?;
                show(report::w3(&w), &mut tables);
                ("W3", serde_json::to_value(&w)?)
            }
            Workload::W4 => {
                let w = w4::run(&ctx, plan.w4).await?;
                show(report::w4(&w), &mut tables);
                ("W4", serde_json::to_value(&w)?)
            }
            Workload::W5 => {
                let w = w5::run(&ctx, plan.w5).await?;
                show(report::w5(&w), &mut tables);
                ("W5", serde_json::to_value(&w)?)
            }
            Workload::W6 => {
                let w = w6::run(&ctx, plan.w6).await?;
                show(report::w6(&w), &mut tables);
                ("W6", serde_json::to_value(&w)?)
            }
            Workload::W7 => {
                let w = w7::run(&ctx, plan.w7).await?;
                show(report::w7(&w), &mut tables);
                ("W7", serde_json::to_value(&w)?)
            }
            Workload::W8 => {
                let w = w8::run(&ctx, plan.w8).await?;
                show(report::w8(&w), &mut tables);
                ("W8", serde_json::to_value(&w)?)
            }
        };
        results.insert(name.into(), value);
        elapsed.insert(name.into(), json!(t0.elapsed().as_secs_f64()));
    }
    ctx.model.stop().await;
    let load_end = procfs::loadavg();
    let report = json!({
        "tool": "agui-bench",
        "version": 1,
        "started_unix": started,
        "elapsed_s": t_start.elapsed().as_secs_f64(),
        "machine": machine(),
        "loadavg_start": load_start,
        "loadavg_end": load_end,
        "binaries": {
            "server": bins.server,
            "model": bins.model,
            "harness": bins.harness,
        },
        "model": {"tokens": plan.tokens, "chunks": plan.chunks, "reply_chars": ctx.expected.len()},
        "plan": plan,
        "process_floor": process_floor,
        "workloads": results,
        "workload_elapsed_s": elapsed,
    });
    if let Some(dir) = out.parent() {
        std::fs::create_dir_all(dir)?;
    }
    std::fs::write(&out, serde_json::to_string_pretty(&report)? + "\n")
        .with_context(|| format!("writing {}", out.display()))?;
    eprintln!(
        "[agui-bench] done in {:.0} s; load average at start {:?}, at end {:?}; {} tables; JSON: {}",
        t_start.elapsed().as_secs_f64(),
        load_start,
        load_end,
        tables.len(),
        out.display()
    );
    Ok(())
}
