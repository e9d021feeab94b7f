//! W8 a new thread's first answer, by phase (issue 41): where the time of a fresh thread's
//! first run goes, from the client's POST to `RUN_FINISHED`, alone (one thread at a time) and
//! in a burst (`burst` at once). The client's clock gives the run's start, first text and end;
//! the server's own structured log (JSON, on a server of its own, so the other workloads pay no
//! logging) gives when the thread got its place (directories, claims, records), when its
//! conversation was open in a harness (a spare handed over, or a process booted), when the user
//! message was sent, and — alone only, as the proxy's log line names no thread — when the
//! harness's first model request reached the server's model proxy. Both clocks are this
//! machine's wall clock.

use std::collections::BTreeMap;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::Serialize;

use super::{Ctx, Series, progress};
use crate::agui::Thread;
use crate::launch::ServerSettings;
use crate::sse::RunResult;
use crate::stats::{Summary, ms};

/// W8's parameters.
#[derive(Debug, Clone, Copy, Serialize)]
pub(crate) struct Params {
    /// Fresh threads one at a time (after `warmup` more, not counted).
    pub(crate) runs: usize,
    pub(crate) warmup: usize,
    /// Pause between two of them, ms.
    pub(crate) gap_ms: u64,
    /// Fresh threads at once, in the burst.
    pub(crate) burst: usize,
}

/// The phases of one series of first runs (ms), in the order they happen.
#[derive(Debug, Clone, Default, Serialize)]
pub(crate) struct Phases {
    /// POST sent → the thread has its place (admission, owner, lease, directories, record).
    pub(crate) to_placed_ms: Summary,
    /// Place → conversation open in a harness (a spare's hand-over, or a boot, and the init).
    pub(crate) placed_to_open_ms: Summary,
    /// Open → the user message sent to the harness.
    pub(crate) open_to_sent_ms: Summary,
    /// Sent → the harness's first model request at the server's model proxy (alone only).
    pub(crate) sent_to_model_ms: Summary,
    /// That request → the first text at the client (the model's stream through the harness
    /// and the translator) (alone only).
    pub(crate) model_to_first_text_ms: Summary,
    /// Sent → the first text at the client (both of the above; in the burst too).
    pub(crate) sent_to_first_text_ms: Summary,
    /// First text → `RUN_FINISHED`.
    pub(crate) first_text_to_end_ms: Summary,
    /// POST sent → `RUN_FINISHED`.
    pub(crate) total_ms: Summary,
    /// Runs whose server log lines were all found.
    pub(crate) traced: usize,
}

/// W8's figures.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct W8 {
    pub(crate) params: Params,
    pub(crate) alone: Phases,
    pub(crate) alone_runs: Series,
    pub(crate) burst: Phases,
    pub(crate) burst_runs: Series,
}

/// A first run as the client saw it: when it started (wall clock, ms) and what came back.
struct Sent {
    thread_id: String,
    start_ms: f64,
    result: RunResult,
}

/// Runs W8 against a fresh server that logs the phases.
pub(crate) async fn run(ctx: &Ctx, params: Params) -> anyhow::Result<W8> {
    progress("W8: server (logging its phases)");
    let settings = ServerSettings {
        log_filter: Some(
            "warn,agui_session::thread=info,harness_client::conversation=info,agui_server::model_proxy=debug"
                .into(),
        ),
        extra: vec!["--log-format".into(), "json".into()],
        ..ServerSettings::default()
    };
    let server = ctx.server("w8", &settings).await?;
    let url = server.url.clone();
    let expected = Some(ctx.expected.as_str());
    for i in 0..params.warmup {
        let mut thread = Thread::new("w8-warm");
        ctx.run(&url, &thread.next_turn(&format!("Warm up ({i})."), &[]))
            .await;
    }
    let mut alone = Vec::new();
    for i in 0..params.runs {
        if i > 0 && params.gap_ms > 0 {
            tokio::time::sleep(Duration::from_millis(params.gap_ms)).await;
        }
        alone.push(first_run(&ctx.client, &url, ctx.timeout, "w8-alone", i).await);
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    let mut tasks = Vec::new();
    for i in 0..params.burst {
        let (client, url, timeout) = (ctx.client.clone(), url.clone(), ctx.timeout);
        tasks.push(tokio::spawn(async move {
            first_run(&client, &url, timeout, "w8-burst", i).await
        }));
    }
    let mut burst = Vec::new();
    for task in tasks {
        burst.push(task.await?);
    }
    server.stop().await;
    let log = std::fs::read_to_string(ctx.scratch.join("w8").join("server.log"))?;
    let lines = server_lines(&log);
    Ok(W8 {
        params,
        alone: phases(&alone, &lines, true),
        alone_runs: Series::of(alone.iter().map(|s| &s.result), expected),
        burst: phases(&burst, &lines, false),
        burst_runs: Series::of(burst.iter().map(|s| &s.result), expected),
    })
}

async fn first_run(
    client: &reqwest::Client,
    url: &str,
    timeout: Duration,
    prefix: &str,
    i: usize,
) -> Sent {
    let mut thread = Thread::new(prefix);
    let body = thread.next_turn(&format!("Hello ({i})."), &[]);
    let start_ms = wall_ms(SystemTime::now());
    let result = crate::sse::run(client, url, &body, timeout).await;
    Sent {
        thread_id: thread.id,
        start_ms,
        result,
    }
}

/// What the server logged of the phases: per thread, the first time of each event; and the
/// model proxy's calls, in order.
#[derive(Debug, Default)]
struct Lines {
    placed: BTreeMap<String, f64>,
    open: BTreeMap<String, f64>,
    sent: BTreeMap<String, f64>,
    model_calls: Vec<f64>,
}

fn server_lines(log: &str) -> Lines {
    let mut lines = Lines::default();
    for line in log.lines() {
        let Ok(v) = serde_json::from_str::<serde_json::Value>(line) else {
            continue;
        };
        let Some(at) = v["timestamp"].as_str().and_then(rfc3339_ms) else {
            continue;
        };
        let message = v["message"].as_str().unwrap_or("");
        if message.starts_with("model proxy: forwarding a model call") {
            lines.model_calls.push(at);
            continue;
        }
        let thread = v["spans"]
            .as_array()
            .into_iter()
            .flatten()
            .find_map(|s| s["thread_id"].as_str())
            .or_else(|| v["span"]["thread_id"].as_str());
        let Some(thread) = thread else { continue };
        let slot = match message {
            "the thread has its place" => &mut lines.placed,
            // The harness's line comes first; a thread that took a conversation opened ahead
            // has only the session's.
            "conversation open" => &mut lines.open,
            "user message sent" => &mut lines.sent,
            _ => continue,
        };
        slot.entry(thread.to_owned()).or_insert(at);
    }
    lines
}

fn phases(runs: &[Sent], lines: &Lines, attribute_model: bool) -> Phases {
    let mut p: BTreeMap<&str, Vec<f64>> = BTreeMap::new();
    let mut traced = 0;
    for run in runs.iter().filter(|r| r.result.ok()) {
        let r = &run.result;
        let (Some(first), Some(end)) = (r.first_content, r.terminal) else {
            continue;
        };
        let first_text = run.start_ms + ms(first);
        p.entry("total").or_default().push(ms(end));
        p.entry("end").or_default().push(ms(end) - ms(first));
        let id = &run.thread_id;
        let (Some(&placed), Some(&open), Some(&sent)) =
            (lines.placed.get(id), lines.open.get(id), lines.sent.get(id))
        else {
            continue;
        };
        traced += 1;
        p.entry("placed").or_default().push(placed - run.start_ms);
        p.entry("open").or_default().push(open - placed);
        p.entry("sent").or_default().push(sent - open);
        p.entry("first").or_default().push(first_text - sent);
        if attribute_model
            && let Some(&model) = lines
                .model_calls
                .iter()
                .find(|&&m| m >= sent && m <= first_text)
        {
            p.entry("model").or_default().push(model - sent);
            p.entry("stream").or_default().push(first_text - model);
        }
    }
    let mut take = |k: &str| Summary::of_ms(p.remove(k).unwrap_or_default());
    Phases {
        to_placed_ms: take("placed"),
        placed_to_open_ms: take("open"),
        open_to_sent_ms: take("sent"),
        sent_to_model_ms: take("model"),
        model_to_first_text_ms: take("stream"),
        sent_to_first_text_ms: take("first"),
        first_text_to_end_ms: take("end"),
        total_ms: take("total"),
        traced,
    }
}

fn wall_ms(t: SystemTime) -> f64 {
    t.duration_since(UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64() * 1000.0)
}

/// Milliseconds since the Unix epoch of a UTC RFC 3339 time as the server logs it
/// (`2026-12-06T22:48:02.069714Z`).
fn rfc3339_ms(s: &str) -> Option<f64> {
    let s = s.strip_suffix('Z')?;
    let (date, time) = s.split_once('T')?;
    let mut d = date.splitn(3, '-').map(|x| x.parse::<i64>().ok());
    let (y, m, day) = (d.next()??, d.next()??, d.next()??);
    let mut t = time.splitn(3, ':');
    let (h, min) = (
        t.next()?.parse::<i64>().ok()?,
        t.next()?.parse::<i64>().ok()?,
    );
    let sec: f64 = t.next()?.parse().ok()?;
    // Days from the civil date (proleptic Gregorian).
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    Some(((days * 86_400 + h * 3_600 + min * 60) as f64 + sec) * 1000.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn server_times_are_read_as_the_clock_reads_them() {
        let at = rfc3339_ms("2026-12-06T22:48:02.069714Z").unwrap();
        let expected = SystemTime::UNIX_EPOCH + Duration::from_micros(1_796_597_282_069_714);
        assert!((at - wall_ms(expected)).abs() < 0.01, "{at}");
        assert_eq!(rfc3339_ms("1970-01-01T00:00:00Z"), Some(0.0));
        assert_eq!(rfc3339_ms("2000-03-01T00:00:00Z"), Some(951_868_800_000.0));
        assert_eq!(rfc3339_ms("not a time"), None);
    }

    #[test]
    fn the_phases_of_a_run_come_from_its_threads_log_lines() {
        let line = |at: &str, msg: &str, target: &str, thread: &str| {
            format!(
                r#"{{"timestamp":"{at}","message":"{msg}","target":"{target}","spans":[{{"thread_id":"{thread}","name":"thread"}}]}}"#
            )
        };
        let log = [
            line("2026-12-06T00:00:00.010Z", "the thread has its place", "p", "t1"),
            line("2026-12-06T00:00:00.030Z", "conversation open", "harness_client::conversation", "t1"),
            line("2026-12-06T00:00:00.031Z", "conversation open", "agui_session::thread::task::opening", "t1"),
            line("2026-12-06T00:00:00.032Z", "user message sent", "r", "t1"),
            r#"{"timestamp":"2026-12-06T00:00:00.040Z","message":"model proxy: forwarding a model call","target":"m"}"#.to_owned(),
            "not json".to_owned(),
        ]
        .join("\n");
        let lines = server_lines(&log);
        let start = rfc3339_ms("2026-12-06T00:00:00.000Z").unwrap();
        let mut result = RunResult::for_tests();
        result.first_content = Some(Duration::from_millis(50));
        result.terminal = Some(Duration::from_millis(60));
        let runs = [Sent {
            thread_id: "t1".into(),
            start_ms: start,
            result,
        }];
        let p = phases(&runs, &lines, true);
        let near = |s: &Summary, v: f64| (s.p50.unwrap() - v).abs() < 0.01;
        assert_eq!(p.traced, 1);
        assert!(near(&p.to_placed_ms, 10.0), "{p:?}");
        assert!(near(&p.placed_to_open_ms, 20.0), "{p:?}");
        assert!(near(&p.open_to_sent_ms, 2.0), "{p:?}");
        assert!(near(&p.sent_to_model_ms, 8.0), "{p:?}");
        assert!(near(&p.model_to_first_text_ms, 10.0), "{p:?}");
        assert!(near(&p.first_text_to_end_ms, 10.0), "{p:?}");
        assert!(near(&p.total_ms, 60.0), "{p:?}");
        let burst = phases(&runs, &lines, false);
        assert_eq!(burst.sent_to_model_ms.n, 0, "no model phase in a burst");
        assert!(near(&burst.sent_to_first_text_ms, 18.0), "{burst:?}");
    }
}
