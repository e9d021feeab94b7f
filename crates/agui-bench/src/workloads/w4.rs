//! W4 frontend-tool park and resume. Each iteration is a new thread warmed by one plain turn
//! declaring the same tool (so the measured round trip excludes session creation). Run 1 asks
//! the model to call the tool declared in `RunAgentInput.tools`: it must end `RUN_FINISHED`
//! with `outcome.pendingToolCallIds` naming the call (parked). Run 2 posts the `ToolMessage`
//! and gets the final text.
//!
//! The floor does the same on a conversation of its own: the time to the harness's tool call
//! (what run 1 waits for before it can end), and from the answer to the end of the turn, once
//! answering at once and once after a think time.

use std::sync::Arc;
use std::time::{Duration, Instant};

use serde::Serialize;
use tokio::sync::mpsc;

use super::{Ctx, progress, tally};
use crate::agui::{TOOL_NAME, Thread, tool_def, tool_prompt};
use crate::floor::{self, Floor, ParkingCallbacks, bench_tool};
use crate::launch::ServerSettings;
use crate::sse::RunResult;
use crate::stats::Summary;

/// W4's parameters.
#[derive(Debug, Clone, Copy, Serialize)]
pub(crate) struct Params {
    pub(crate) iterations: usize,
    /// Floor: the think time of the second floor series, ms (the first answers at once). Run 2
    /// comes only after run 1 ended, and answering at once makes the harness resume slower
    /// than answering a call it is done with, so both floors are shown.
    pub(crate) floor_answer_delay_ms: u64,
}

/// W4 against the server.
#[derive(Debug, Clone, Default, Serialize)]
pub(crate) struct Ours {
    pub(crate) complete_round_trips: usize,
    pub(crate) run1_ttfb_ms: Summary,
    pub(crate) run1_tool_call_end_ms: Summary,
    pub(crate) run1_finished_ms: Summary,
    pub(crate) run1_tool_end_to_finished_ms: Summary,
    pub(crate) run2_ttfb_ms: Summary,
    pub(crate) run2_first_content_ms: Summary,
    pub(crate) run2_finished_ms: Summary,
    /// Run 1 + run 2, no client think time.
    pub(crate) round_trip_ms: Summary,
    pub(crate) invalid_streams: usize,
    pub(crate) run_errors: usize,
    pub(crate) failures: std::collections::BTreeMap<String, usize>,
}

/// W4 on the raw floor.
#[derive(Debug, Clone, Default, Serialize)]
pub(crate) struct FloorW4 {
    pub(crate) complete_round_trips: usize,
    /// From the prompt to the harness's tool call.
    pub(crate) tool_call_ms: Summary,
    /// From the answer to the first text.
    pub(crate) resume_first_text_ms: Summary,
    /// From the answer to the end of the turn.
    pub(crate) resume_ms: Summary,
    /// Time to the tool call + from the answer to the end of the turn (the think time left out).
    pub(crate) round_trip_ms: Summary,
    pub(crate) failures: std::collections::BTreeMap<String, usize>,
}

/// The floor, answering the call at once and after a think time.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct Floors {
    pub(crate) at_once: FloorW4,
    pub(crate) delayed: FloorW4,
}

/// W4's figures.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct W4 {
    pub(crate) params: Params,
    pub(crate) ours: Ours,
    pub(crate) floor: Option<Floors>,
}

/// Runs W4 against a fresh server, then the floor.
pub(crate) async fn run(ctx: &Ctx, params: Params) -> anyhow::Result<W4> {
    progress("W4: server");
    let ours = ours(ctx, params).await?;
    let floor = if ctx.floor {
        progress("W4: raw floor, answering at once");
        let at_once = floor(ctx, params, Duration::ZERO).await?;
        let delay = Duration::from_millis(params.floor_answer_delay_ms);
        progress(&format!(
            "W4: raw floor, answering after {} ms",
            delay.as_millis()
        ));
        let delayed = floor(ctx, params, delay).await?;
        Some(Floors { at_once, delayed })
    } else {
        None
    };
    Ok(W4 {
        params,
        ours,
        floor,
    })
}

/// Why run 1 does not count as a park, if it does not.
fn park_problem(r1: &RunResult) -> Option<String> {
    if !r1.ok() {
        return Some(format!("run 1: {}", r1.failure()));
    }
    let Some(call) = r1.tool_call.as_ref().filter(|c| c.name == TOOL_NAME) else {
        return Some(format!(
            "run 1 ended {} without a {TOOL_NAME} call",
            r1.terminal_type.as_deref().unwrap_or("-")
        ));
    };
    if r1.outcome.as_deref() == Some("interrupt") {
        return Some("run 1 ended with an interrupt outcome, not a parked frontend tool".into());
    }
    if !r1.pending_tool_call_ids.contains(&call.id) {
        return Some("run 1's RUN_FINISHED has no pendingToolCallIds naming the call".into());
    }
    None
}

async fn ours(ctx: &Ctx, p: Params) -> anyhow::Result<Ours> {
    let server = ctx.server("w4", &ServerSettings::default()).await?;
    let url = server.url.clone();
    let tools = [tool_def()];
    let mut failures = Vec::new();
    let mut all: Vec<RunResult> = Vec::new();
    let mut pairs: Vec<(RunResult, RunResult)> = Vec::new();
    for _ in 0..p.iterations {
        let mut thread = Thread::new("w4");
        let warm = ctx
            .run(
                &url,
                &thread.next_turn("Hello before the tool call.", &tools),
            )
            .await;
        thread.record_reply(&warm.text);
        if !warm.ok() {
            failures.push(format!("warm-up turn: {}", warm.failure()));
            continue;
        }
        let r1 = ctx
            .run(&url, &thread.next_turn(&tool_prompt(), &tools))
            .await;
        all.push(r1.clone());
        if let Some(problem) = park_problem(&r1) {
            failures.push(problem);
            continue;
        }
        let call = r1.tool_call.clone().unwrap_or_default();
        thread.record_tool_answer(&call, &r1.text, "yes");
        let r2 = ctx.run(&url, &thread.input(&tools)).await;
        all.push(r2.clone());
        if !r2.ok() {
            failures.push(format!("run 2: {}", r2.failure()));
            continue;
        }
        if r2.text != ctx.expected {
            failures.push("run 2 text mismatch".into());
        }
        pairs.push((r1, r2));
    }
    server.stop().await;
    let of =
        |f: &dyn Fn(&(RunResult, RunResult)) -> Option<Duration>| Summary::of(pairs.iter().map(f));
    Ok(Ours {
        complete_round_trips: pairs.len(),
        run1_ttfb_ms: of(&|(r1, _)| r1.first_byte),
        run1_tool_call_end_ms: of(&|(r1, _)| r1.tool_end),
        run1_finished_ms: of(&|(r1, _)| r1.terminal),
        run1_tool_end_to_finished_ms: of(&|(r1, _)| r1.terminal?.checked_sub(r1.tool_end?)),
        run2_ttfb_ms: of(&|(_, r2)| r2.first_byte),
        run2_first_content_ms: of(&|(_, r2)| r2.first_content),
        run2_finished_ms: of(&|(_, r2)| r2.terminal),
        round_trip_ms: of(&|(r1, r2)| Some(r1.terminal? + r2.terminal?)),
        invalid_streams: all
            .iter()
            .filter(|r| r.status == crate::sse::Status::Invalid)
            .count(),
        run_errors: all
            .iter()
            .filter(|r| r.status == crate::sse::Status::RunError)
            .count(),
        failures: tally(failures),
    })
}

async fn floor(ctx: &Ctx, p: Params, answer_delay: Duration) -> anyhow::Result<FloorW4> {
    let setup = Floor::new(
        &ctx.bins,
        &ctx.model.base_url,
        &ctx.scratch.join("w4-floor"),
        &ctx.floor_settings(),
    )?;
    let pool = setup.pool().await?;
    let tools = [bench_tool()];
    let mut failures = Vec::new();
    let mut turns = Vec::new();
    for _ in 0..p.iterations {
        let (tx, mut rx) = mpsc::unbounded_channel();
        let callbacks = Arc::new(ParkingCallbacks { calls: tx });
        let mut conversation = setup.open(&pool, &tools, callbacks).await?;
        let warm = floor::turn(
            &mut conversation,
            "Hello before the tool call.",
            Instant::now(),
            None,
            ctx.timeout,
        )
        .await;
        if !warm.ok() {
            failures.push(format!("warm-up turn: {}", warm.error.unwrap_or_default()));
            conversation.close().await;
            continue;
        }
        let t = floor::turn(
            &mut conversation,
            &tool_prompt(),
            Instant::now(),
            Some(floor::Answering {
                calls: &mut rx,
                delay: answer_delay,
            }),
            ctx.timeout,
        )
        .await;
        conversation.close().await;
        match (&t.error, t.tool_call) {
            (Some(e), _) => failures.push(e.clone()),
            (None, None) => failures.push("the model's tool call never reached the host".into()),
            (None, Some(_)) if t.text != ctx.expected => failures.push("text mismatch".into()),
            (None, Some(_)) => turns.push(t),
        }
    }
    pool.shutdown().await;
    let after = |t: &floor::FloorTurn, at: Option<Duration>| at?.checked_sub(t.answered?);
    Ok(FloorW4 {
        complete_round_trips: turns.len(),
        tool_call_ms: Summary::of(turns.iter().map(|t| t.tool_call)),
        resume_first_text_ms: Summary::of(turns.iter().map(|t| after(t, t.first_text))),
        resume_ms: Summary::of(turns.iter().map(|t| after(t, t.end))),
        round_trip_ms: Summary::of(turns.iter().map(|t| Some(t.tool_call? + after(t, t.end)?))),
        failures: tally(failures),
    })
}
