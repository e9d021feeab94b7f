//! W1 latency: `runs` sequential runs each on a fresh thread, then `runs` sequential turns on one
//! thread (the whole transcript resent each turn, like a real client). Warm-up runs come first
//! and are reported apart (cold start: the first one boots a harness).

use std::time::Instant;

use serde::Serialize;

use super::{Cost, Ctx, FloorSeries, Series, Window, progress};
use crate::agui::Thread;
use crate::floor::{self, Floor, FloorTurn};
use crate::launch::ServerSettings;
use crate::model::RequestShape;
use crate::stats::{Summary, ms};

/// W1's parameters.
#[derive(Debug, Clone, Copy, Serialize)]
pub(crate) struct Params {
    pub(crate) runs: usize,
    pub(crate) warmup: usize,
    /// Pause before each fresh-thread run but the first, ms: threads that arrive one at a time
    /// more slowly than processes boot (0: back to back).
    pub(crate) gap_ms: u64,
}

/// A series with what it cost.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct Measured<S> {
    pub(crate) stats: S,
    pub(crate) cost: Cost,
}

/// How the cost of a turn follows the history on one thread.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct History {
    /// The first and the last `k` turns.
    pub(crate) k: usize,
    pub(crate) first_k_end_ms: Summary,
    pub(crate) last_k_end_ms: Summary,
    pub(crate) cost_first_half: Cost,
    pub(crate) cost_second_half: Cost,
    /// Size of the last `RunAgentInput` (AG-UI only).
    pub(crate) last_request_bytes: Option<usize>,
}

/// W1 against one side (the server or the floor).
#[derive(Debug, Clone, Serialize)]
pub(crate) struct Side<S> {
    /// End of each warm-up run (ms).
    pub(crate) warmup_end_ms: Vec<Option<f64>>,
    pub(crate) fresh: Measured<S>,
    pub(crate) one_thread: Measured<S>,
    pub(crate) history: History,
    /// The model request of the first fresh run: what the harness config made of it.
    pub(crate) request_shape: Option<RequestShape>,
}

/// W1's figures.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct W1 {
    pub(crate) params: Params,
    pub(crate) ours: Side<Series>,
    pub(crate) floor: Option<Side<FloorSeries>>,
}

fn k_of(runs: usize) -> usize {
    (runs / 4).clamp(1, 10)
}

/// The pause between two fresh-thread runs.
async fn gap(p: &Params) {
    if p.gap_ms > 0 {
        tokio::time::sleep(std::time::Duration::from_millis(p.gap_ms)).await;
    }
}

/// Runs W1 against a fresh server, then the floor.
pub(crate) async fn run(ctx: &Ctx, params: Params) -> anyhow::Result<W1> {
    progress("W1: server");
    let ours = ours(ctx, params).await?;
    let floor = if ctx.floor {
        progress("W1: raw floor");
        Some(floor(ctx, params).await?)
    } else {
        None
    };
    Ok(W1 {
        params,
        ours,
        floor,
    })
}

async fn ours(ctx: &Ctx, p: Params) -> anyhow::Result<Side<Series>> {
    let server = ctx.server("w1", &ServerSettings::default()).await?;
    let url = server.url.clone();
    let expected = Some(ctx.expected.as_str());
    let mut warmup = Vec::new();
    for i in 0..p.warmup {
        let mut thread = Thread::new("w1warm");
        let r = ctx
            .run(
                &url,
                &thread.next_turn(&format!("Hello, warm-up {i}."), &[]),
            )
            .await;
        warmup.push(r.ok().then(|| r.terminal.map(ms)).flatten());
    }
    let window = Window::open(ctx, server.pid).await;
    let mut fresh = Vec::new();
    let mut request_shape = None;
    for i in 0..p.runs {
        if i > 0 {
            gap(&p).await;
        }
        let mut thread = Thread::new("w1fresh");
        let body = thread.next_turn(&format!("Hello, tell me something ({i})."), &[]);
        fresh.push(ctx.run(&url, &body).await);
        if i == 0 {
            request_shape = ctx
                .model
                .last_request(&ctx.client)
                .await
                .map(|r| RequestShape::of(&r, &ctx.scratch.join("w1")));
        }
    }
    let after_fresh = window.mark(ctx).await;
    let mut thread = Thread::new("w1one");
    let mut same = Vec::new();
    let mut middle = None;
    let mut last_bytes = 0;
    for i in 0..p.runs {
        if i == p.runs / 2 {
            middle = Some(window.mark(ctx).await);
        }
        let body = thread.next_turn(&format!("Tell me more ({i})."), &[]);
        last_bytes = serde_json::to_vec(&body).map_or(0, |b| b.len());
        let r = ctx.run(&url, &body).await;
        thread.record_reply(&r.text);
        same.push(r);
    }
    let end = window.mark(ctx).await;
    let fresh_cost = window.between(&window.start_mark(), &after_fresh, fresh.len());
    let one_cost = window.between(&after_fresh, &end, same.len());
    let middle = middle.unwrap_or_else(|| after_fresh.clone());
    let k = k_of(p.runs);
    let ends = |rs: &[crate::sse::RunResult]| {
        Summary::of(rs.iter().filter(|r| r.ok()).map(|r| r.terminal))
    };
    let history = History {
        k,
        first_k_end_ms: ends(&same[..k.min(same.len())]),
        last_k_end_ms: ends(&same[same.len().saturating_sub(k)..]),
        cost_first_half: window.between(&after_fresh, &middle, p.runs / 2),
        cost_second_half: window.between(&middle, &end, p.runs - p.runs / 2),
        last_request_bytes: Some(last_bytes),
    };
    let _ = window.close(ctx, 0).await;
    server.stop().await;
    Ok(Side {
        warmup_end_ms: warmup,
        fresh: Measured {
            stats: Series::of(&fresh, expected),
            cost: fresh_cost,
        },
        one_thread: Measured {
            stats: Series::of(&same, expected),
            cost: one_cost,
        },
        history,
        request_shape,
    })
}

async fn floor(ctx: &Ctx, p: Params) -> anyhow::Result<Side<FloorSeries>> {
    let setup = Floor::new(
        &ctx.bins,
        &ctx.model.base_url,
        &ctx.scratch.join("w1-floor"),
        &ctx.floor_settings(),
    )?;
    let pool = setup.pool().await?;
    let expected = Some(ctx.expected.as_str());
    let mut conversations = Vec::new();
    let mut warmup = Vec::new();
    for i in 0..p.warmup {
        let t0 = Instant::now();
        let mut c = setup.open_plain(&pool).await?;
        let t = floor::turn(
            &mut c,
            &format!("Hello, warm-up {i}."),
            t0,
            None,
            ctx.timeout,
        )
        .await;
        warmup.push(t.ok().then(|| t.end.map(ms)).flatten());
        conversations.push(c);
    }
    let window = Window::open(ctx, std::process::id()).await;
    let mut fresh = Vec::new();
    let mut request_shape = None;
    for i in 0..p.runs {
        if i > 0 {
            gap(&p).await;
        }
        // A fresh thread's first run includes opening its conversation.
        let t0 = Instant::now();
        match setup.open_plain(&pool).await {
            Ok(mut c) => {
                let text = format!("Hello, tell me something ({i}).");
                fresh.push(floor::turn(&mut c, &text, t0, None, ctx.timeout).await);
                conversations.push(c);
                if i == 0 {
                    request_shape = ctx
                        .model
                        .last_request(&ctx.client)
                        .await
                        .map(|r| RequestShape::of(&r, &ctx.scratch.join("w1-floor")));
                }
            }
            Err(e) => fresh.push(FloorTurn {
                error: Some(format!("open: {e:#}")),
                ..FloorTurn::default()
            }),
        }
    }
    let after_fresh = window.mark(ctx).await;
    let mut same = Vec::new();
    let mut middle = None;
    let mut c = setup.open_plain(&pool).await?;
    for i in 0..p.runs {
        if i == p.runs / 2 {
            middle = Some(window.mark(ctx).await);
        }
        let t0 = Instant::now();
        same.push(
            floor::turn(
                &mut c,
                &format!("Tell me more ({i})."),
                t0,
                None,
                ctx.timeout,
            )
            .await,
        );
    }
    let end = window.mark(ctx).await;
    conversations.push(c);
    let middle = middle.unwrap_or_else(|| after_fresh.clone());
    let k = k_of(p.runs);
    let ends = |ts: &[FloorTurn]| Summary::of(ts.iter().filter(|t| t.ok()).map(|t| t.end));
    let side = Side {
        warmup_end_ms: warmup,
        fresh: Measured {
            stats: FloorSeries::of(&fresh, expected),
            cost: window.between(&window.start_mark(), &after_fresh, fresh.len()),
        },
        one_thread: Measured {
            stats: FloorSeries::of(&same, expected),
            cost: window.between(&after_fresh, &end, same.len()),
        },
        history: History {
            k,
            first_k_end_ms: ends(&same[..k.min(same.len())]),
            last_k_end_ms: ends(&same[same.len().saturating_sub(k)..]),
            cost_first_half: window.between(&after_fresh, &middle, p.runs / 2),
            cost_second_half: window.between(&middle, &end, p.runs - p.runs / 2),
            last_request_bytes: None,
        },
        request_shape,
    };
    let _ = window.close(ctx, 0).await;
    for c in conversations {
        c.close().await;
    }
    pool.shutdown().await;
    Ok(side)
}
