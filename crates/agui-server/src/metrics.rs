//! Prometheus metrics, rendered on `GET /metrics` in the text exposition format.
//!
//! A small registry of our own rather than a global recorder, so several servers (tests,
//! embedders) can live in one process.

use parking_lot::Mutex;
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::time::Duration;

use agui_session::AgentStats;

/// A gauge: name, help, and how to read it from an agent's stats.
type Gauge = (&'static str, &'static str, fn(&AgentStats) -> usize);

/// Bucket bounds (seconds) for run durations and time to first event.
const BUCKETS: [f64; 12] = [
    0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0,
];

#[derive(Debug, Clone, Default)]
struct Histogram {
    counts: [u64; BUCKETS.len()],
    count: u64,
    sum: f64,
}

impl Histogram {
    fn observe(&mut self, seconds: f64) {
        for (bound, count) in BUCKETS.iter().zip(self.counts.iter_mut()) {
            if seconds <= *bound {
                *count += 1;
            }
        }
        self.count += 1;
        self.sum += seconds;
    }
}

#[derive(Debug, Default)]
struct State {
    runs: BTreeMap<String, u64>,
    run_errors: BTreeMap<(String, String), u64>,
    durations: BTreeMap<String, Histogram>,
    first_event: BTreeMap<String, Histogram>,
    rejections: BTreeMap<u16, u64>,
    client_gone: BTreeMap<String, u64>,
}

/// The server's metrics.
#[derive(Debug, Default)]
pub(crate) struct Metrics {
    state: Mutex<State>,
    /// The model proxy's own counts.
    model_calls: Option<crate::model_proxy::ModelCalls>,
}

impl Metrics {
    /// An empty registry.
    pub(crate) fn new() -> Self {
        Self::default()
    }

    /// Also renders the model proxy's calls (`agui_model_calls_total`).
    pub(crate) fn with_model_calls(mut self, calls: crate::model_proxy::ModelCalls) -> Self {
        self.model_calls = Some(calls);
        self
    }

    fn lock(&self) -> parking_lot::MutexGuard<'_, State> {
        self.state.lock()
    }

    /// A run ended; `error` is its `RUN_ERROR` code, if it failed.
    pub(crate) fn run_finished(&self, agent: &str, duration: Duration, error: Option<&str>) {
        let mut state = self.lock();
        *state.runs.entry(agent.to_owned()).or_default() += 1;
        if let Some(code) = error {
            *state
                .run_errors
                .entry((agent.to_owned(), code.to_owned()))
                .or_default() += 1;
        }
        state
            .durations
            .entry(agent.to_owned())
            .or_default()
            .observe(duration.as_secs_f64());
    }

    /// The first event after `RUN_STARTED` left for the client.
    pub(crate) fn first_event(&self, agent: &str, after: Duration) {
        self.lock()
            .first_event
            .entry(agent.to_owned())
            .or_default()
            .observe(after.as_secs_f64());
    }

    /// A run's client went away before its terminal event (the turn goes on without it, and
    /// the run is not counted in `agui_runs_total`).
    pub(crate) fn client_left(&self, agent: &str) {
        *self.lock().client_gone.entry(agent.to_owned()).or_default() += 1;
    }

    /// A request was refused before a run started (401, 413, 415, 422…).
    pub(crate) fn rejected(&self, status: u16) {
        *self.lock().rejections.entry(status).or_default() += 1;
    }

    /// The exposition text, with the agents' current gauges.
    pub(crate) fn render(&self, agents: &[(String, AgentStats)]) -> String {
        let state = self.lock();
        let mut out = String::new();
        counter(
            &mut out,
            "agui_runs_total",
            "Runs served.",
            state
                .runs
                .iter()
                .map(|(a, n)| (vec![("agent", a.as_str())], *n)),
        );
        counter(
            &mut out,
            "agui_run_errors_total",
            "Runs that ended with RUN_ERROR, by code.",
            state
                .run_errors
                .iter()
                .map(|((a, c), n)| (vec![("agent", a.as_str()), ("code", c.as_str())], *n)),
        );
        if let Some(calls) = &self.model_calls {
            let calls = calls.lock().clone();
            counter(
                &mut out,
                "agui_model_calls_total",
                "Model calls through the model proxy, by outcome (forwarded, refused, limited, unreachable).",
                calls
                    .iter()
                    .map(|((a, o), n)| (vec![("agent", a.as_str()), ("outcome", *o)], *n)),
            );
        }
        counter(
            &mut out,
            "agui_client_disconnects_total",
            "Runs whose client disconnected before the terminal event (the turn went on).",
            state
                .client_gone
                .iter()
                .map(|(a, n)| (vec![("agent", a.as_str())], *n)),
        );
        let statuses: Vec<(String, u64)> = state
            .rejections
            .iter()
            .map(|(s, n)| (s.to_string(), *n))
            .collect();
        counter(
            &mut out,
            "agui_http_rejections_total",
            "Requests refused before a run started, by HTTP status.",
            statuses
                .iter()
                .map(|(s, n)| (vec![("status", s.as_str())], *n)),
        );
        let known = harness_client::known_harmless_lines();
        counter(
            &mut out,
            "agui_harness_known_lines_total",
            "Harness log lines known to be harmless (logged at debug level), by kind.",
            known.iter().map(|(kind, n)| (vec![("kind", *kind)], *n)),
        );
        let gauges: [Gauge; 5] = [
            ("agui_sessions", "Sessions in memory.", |s| s.sessions),
            (
                "agui_live_conversations",
                "Sessions with an open harness conversation.",
                |s| s.live_conversations,
            ),
            (
                "agui_parked_sessions",
                "Sessions waiting for a client answer.",
                |s| s.parked,
            ),
            (
                "agui_spare_harnesses",
                "Harness processes booted ahead for the next new owner or thread.",
                |s| s.spares,
            ),
            ("agui_harness_processes", "Harness processes.", |s| {
                s.processes
            }),
        ];
        for (name, help, get) in gauges {
            let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} gauge");
            for (agent, stats) in agents {
                let _ = writeln!(out, "{name}{{agent=\"{}\"}} {}", escape(agent), get(stats));
            }
        }
        // Tasks alive in the runtime: a leak of spawned tasks (a thread's actor, a stream's
        // writer) shows here long before it shows in memory.
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            let _ = writeln!(
                out,
                "# HELP agui_runtime_tasks Tasks alive in the server's async runtime.\n# TYPE agui_runtime_tasks gauge\nagui_runtime_tasks {}",
                runtime.metrics().num_alive_tasks()
            );
        }
        histogram(
            &mut out,
            "agui_run_duration_seconds",
            "Run duration (RUN_STARTED to the terminal event).",
            &state.durations,
        );
        histogram(
            &mut out,
            "agui_time_to_first_event_seconds",
            "Time from RUN_STARTED to the next event.",
            &state.first_event,
        );
        out
    }
}

fn counter<'a>(
    out: &mut String,
    name: &str,
    help: &str,
    series: impl Iterator<Item = (Vec<(&'a str, &'a str)>, u64)>,
) {
    let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} counter");
    for (labels, value) in series {
        let _ = writeln!(out, "{name}{} {value}", labels_text(&labels));
    }
}

fn histogram(out: &mut String, name: &str, help: &str, series: &BTreeMap<String, Histogram>) {
    let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} histogram");
    for (agent, h) in series {
        let agent = escape(agent);
        for (bound, count) in BUCKETS.iter().zip(h.counts.iter()) {
            let _ = writeln!(
                out,
                "{name}_bucket{{agent=\"{agent}\",le=\"{bound}\"}} {count}"
            );
        }
        let _ = writeln!(
            out,
            "{name}_bucket{{agent=\"{agent}\",le=\"+Inf\"}} {}",
            h.count
        );
        let _ = writeln!(out, "{name}_sum{{agent=\"{agent}\"}} {}", h.sum);
        let _ = writeln!(out, "{name}_count{{agent=\"{agent}\"}} {}", h.count);
    }
}

fn labels_text(labels: &[(&str, &str)]) -> String {
    let inner: Vec<String> = labels
        .iter()
        .map(|(k, v)| format!("{k}=\"{}\"", escape(v)))
        .collect();
    format!("{{{}}}", inner.join(","))
}

fn escape(value: &str) -> String {
    value
        .replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_exposition_lists_every_series() {
        let metrics = Metrics::new();
        metrics.run_finished("chat", Duration::from_millis(300), None);
        metrics.run_finished("chat", Duration::from_secs(2), Some("AGENT_ERROR"));
        metrics.first_event("chat", Duration::from_millis(40));
        metrics.rejected(422);
        metrics.client_left("chat");
        let stats = AgentStats {
            sessions: 2,
            live_conversations: 1,
            parked: 1,
            processes: 1,
            spares: 1,
        };
        let text = metrics.render(&[("chat\"x".into(), stats)]);
        for line in [
            "agui_runs_total{agent=\"chat\"} 2",
            "agui_run_errors_total{agent=\"chat\",code=\"AGENT_ERROR\"} 1",
            "agui_http_rejections_total{status=\"422\"} 1",
            "agui_client_disconnects_total{agent=\"chat\"} 1",
            "agui_parked_sessions{agent=\"chat\\\"x\"} 1",
            "agui_spare_harnesses{agent=\"chat\\\"x\"} 1",
            "agui_run_duration_seconds_bucket{agent=\"chat\",le=\"0.5\"} 1",
            "agui_run_duration_seconds_bucket{agent=\"chat\",le=\"+Inf\"} 2",
            "agui_time_to_first_event_seconds_count{agent=\"chat\"} 1",
        ] {
            assert!(text.contains(line), "missing `{line}` in:\n{text}");
        }
    }
}
