//! The printed report: one table per workload, ours next to the raw floor with their ratio
//! (ours / floor) where the floor has the figure.

use std::fmt::Write as _;

use crate::procfs::CpuPerTurn;
use crate::stats::{Summary, ratio};
use crate::workloads::w1::{self, W1};
use crate::workloads::w2::{Level, W2};
use crate::workloads::w3::{Pass, W3};
use crate::workloads::w4::W4;
use crate::workloads::w5::W5;
use crate::workloads::w6::W6;
use crate::workloads::w7::W7;
use crate::workloads::w8::{Phases, W8};
use crate::workloads::{Cost, FloorSeries, Series};

/// A table with a title and free-form columns.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Table {
    pub(crate) title: String,
    pub(crate) headers: Vec<String>,
    pub(crate) rows: Vec<Vec<String>>,
    pub(crate) notes: Vec<String>,
}

/// `12.3`, or `–` when unknown.
pub(crate) fn num(v: Option<f64>, decimals: usize) -> String {
    v.filter(|v| v.is_finite())
        .map_or_else(|| "–".into(), |v| format!("{v:.decimals$}"))
}

impl Table {
    pub(crate) fn new(title: impl Into<String>, headers: &[&str]) -> Self {
        Self {
            title: title.into(),
            headers: headers.iter().map(|h| (*h).to_owned()).collect(),
            rows: Vec::new(),
            notes: Vec::new(),
        }
    }

    /// A table of ours vs the floor.
    fn versus(title: impl Into<String>) -> Self {
        Self::new(title, &["metric", "ours", "raw floor", "ours/floor"])
    }

    pub(crate) fn row(&mut self, cells: Vec<String>) {
        self.rows.push(cells);
    }

    /// A numeric row, with the ratio when both sides have the figure.
    fn pair(&mut self, label: &str, ours: Option<f64>, floor: Option<f64>, decimals: usize) {
        let r = ratio(ours, floor);
        self.row(vec![
            label.to_owned(),
            num(ours, decimals),
            num(floor, decimals),
            r.map_or_else(String::new, |r| format!("{r:.2}")),
        ]);
    }

    /// A row whose sides are not comparable (no ratio).
    fn apart(&mut self, label: &str, ours: String, floor: String) {
        self.row(vec![label.to_owned(), ours, floor, String::new()]);
    }

    /// Markdown, columns aligned.
    pub(crate) fn render(&self) -> String {
        let cols = self.headers.len();
        let mut widths: Vec<usize> = self.headers.iter().map(|h| h.chars().count()).collect();
        for row in &self.rows {
            for (i, cell) in row.iter().enumerate().take(cols) {
                widths[i] = widths[i].max(cell.chars().count());
            }
        }
        let line = |cells: &[String]| {
            let mut s = String::from("|");
            for (i, w) in widths.iter().enumerate() {
                let cell = cells.get(i).map_or("", String::as_str);
                let pad = w - cell.chars().count();
                if i == 0 {
                    let _ = write!(s, " {cell}{} |", " ".repeat(pad));
                } else {
                    let _ = write!(s, " {}{cell} |", " ".repeat(pad));
                }
            }
            s
        };
        let mut out = format!("### {}\n\n", self.title);
        out.push_str(&line(&self.headers));
        out.push('\n');
        let rule: Vec<String> = widths
            .iter()
            .enumerate()
            .map(|(i, w)| {
                if i == 0 {
                    "-".repeat(w + 2)
                } else {
                    format!("{}:", "-".repeat(w + 1))
                }
            })
            .collect();
        let _ = writeln!(out, "|{}|", rule.join("|"));
        for row in &self.rows {
            out.push_str(&line(row));
            out.push('\n');
        }
        for note in &self.notes {
            let _ = writeln!(out, "\n{note}");
        }
        out
    }
}

const PCTS: [&str; 4] = ["p50", "p90", "p99", "max"];

fn pcts(t: &mut Table, label: &str, ours: &Summary, floor: Option<&Summary>) {
    for p in PCTS {
        t.pair(
            &format!("{label} {p}"),
            ours.get(p),
            floor.and_then(|f| f.get(p)),
            1,
        );
    }
}

fn count(v: usize) -> String {
    v.to_string()
}

/// CPU rows: server (host for the floor), harness, mock, bench, model requests, machine.
fn cost_rows(t: &mut Table, ours: &Cost, floor: Option<&Cost>) {
    let f = |g: fn(&CpuPerTurn) -> Option<f64>| floor.and_then(|c| g(&c.cpu));
    t.apart(
        "server CPU ms/turn (floor: host = this process)",
        num(ours.cpu.server_ms, 2),
        num(f(|c| c.server_ms), 2),
    );
    t.pair(
        "harness CPU ms/turn",
        ours.cpu.harness_ms,
        f(|c| c.harness_ms),
        2,
    );
    t.pair(
        "model (gemini-script) CPU ms/turn",
        ours.cpu.mock_ms,
        f(|c| c.mock_ms),
        2,
    );
    t.apart(
        "bench client CPU ms/turn",
        num(ours.cpu.bench_ms, 2),
        floor.map_or_else(|| "–".into(), |_| "(in host)".into()),
    );
    t.pair("all CPU ms/turn", ours.cpu.total_ms, f(|c| c.total_ms), 2);
    t.pair(
        "model requests/turn",
        ours.model_requests_per_turn,
        floor.and_then(|c| c.model_requests_per_turn),
        2,
    );
    t.apart(
        "CPU utilisation, these processes (2 cores = 1.0) / whole machine",
        format!(
            "{} / {}",
            num(Some(ours.cpu.util_of_machine), 2),
            num(ours.cpu.machine_busy, 2)
        ),
        floor.map_or_else(
            || "–".into(),
            |c| {
                format!(
                    "{} / {}",
                    num(Some(c.cpu.util_of_machine), 2),
                    num(c.cpu.machine_busy, 2)
                )
            },
        ),
    );
}

fn errors_note(label: &str, errors: &std::collections::BTreeMap<String, usize>) -> Option<String> {
    (!errors.is_empty()).then(|| {
        let list: Vec<String> = errors.iter().map(|(m, n)| format!("{n}× {m}")).collect();
        format!("{label} errors: {}", list.join("; "))
    })
}

fn w1_series(
    title: String,
    ours: &w1::Measured<Series>,
    floor: Option<&w1::Measured<FloorSeries>>,
) -> Table {
    let mut t = Table::versus(title);
    let (o, f) = (&ours.stats, floor.map(|f| &f.stats));
    pcts(&mut t, "time to first byte", &o.ttfb_ms, None);
    pcts(&mut t, "time to RUN_STARTED", &o.run_started_ms, None);
    pcts(
        &mut t,
        "time to first text",
        &o.first_content_ms,
        f.map(|f| &f.first_text_ms),
    );
    pcts(
        &mut t,
        "time to end of run/turn",
        &o.terminal_ms,
        f.map(|f| &f.end_ms),
    );
    t.apart(
        "runs ok / attempted",
        format!("{} / {}", o.ok, o.runs),
        f.map_or_else(|| "–".into(), |f| format!("{} / {}", f.ok, f.runs)),
    );
    t.apart(
        "invalid streams / RUN_ERROR / http+exc",
        format!(
            "{} / {} / {}",
            o.invalid_streams,
            o.run_errors,
            o.http_errors + o.exceptions
        ),
        "–".into(),
    );
    t.apart(
        "text mismatches vs the model's reply",
        count(o.text_mismatch),
        f.map_or_else(|| "–".into(), |f| count(f.text_mismatch)),
    );
    t.pair(
        "text events per run (model sends 20 chunks)",
        o.content_events_per_run,
        f.and_then(|f| f.text_deltas_per_run),
        1,
    );
    cost_rows(&mut t, &ours.cost, floor.map(|f| &f.cost));
    t.notes.extend(errors_note("ours", &o.errors));
    if let Some(f) = f {
        t.notes.extend(errors_note("floor", &f.errors));
    }
    t
}

/// W1's tables.
pub(crate) fn w1(w: &W1) -> Vec<Table> {
    let n = w.params.runs;
    let floor = w.floor.as_ref();
    let mut tables = vec![
        w1_series(
            format!("W1 latency, fresh thread per run ({n} sequential runs; ms)"),
            &w.ours.fresh,
            floor.map(|f| &f.fresh),
        ),
        w1_series(
            format!("W1 latency, {n} sequential turns on one thread (ms)"),
            &w.ours.one_thread,
            floor.map(|f| &f.one_thread),
        ),
    ];
    let (h, fh) = (&w.ours.history, floor.map(|f| &f.history));
    let k = h.k;
    let mut t = Table::versus(format!(
        "W1 one thread: cost follows history (turns 1-{k} vs last {k})"
    ));
    t.pair(
        &format!("end of turn p50, turns 1-{k}"),
        h.first_k_end_ms.p50,
        fh.and_then(|f| f.first_k_end_ms.p50),
        1,
    );
    t.pair(
        &format!("end of turn p50, last {k} turns"),
        h.last_k_end_ms.p50,
        fh.and_then(|f| f.last_k_end_ms.p50),
        1,
    );
    t.pair(
        "harness CPU ms/turn, first half",
        h.cost_first_half.cpu.harness_ms,
        fh.and_then(|f| f.cost_first_half.cpu.harness_ms),
        2,
    );
    t.pair(
        "harness CPU ms/turn, second half",
        h.cost_second_half.cpu.harness_ms,
        fh.and_then(|f| f.cost_second_half.cpu.harness_ms),
        2,
    );
    t.apart(
        "server CPU ms/turn, first half / second half",
        format!(
            "{} / {}",
            num(h.cost_first_half.cpu.server_ms, 2),
            num(h.cost_second_half.cpu.server_ms, 2)
        ),
        "–".into(),
    );
    t.apart(
        "RunAgentInput bytes, last turn",
        h.last_request_bytes.map_or_else(|| "–".into(), count),
        "–".into(),
    );
    tables.push(t);
    let (rs, frs) = (
        w.ours.request_shape.as_ref(),
        floor.and_then(|f| f.request_shape.as_ref()),
    );
    let mut t = Table::versus(
        "W1 the model request of a fresh thread's first turn (what the harness config makes)",
    );
    t.pair(
        "request bytes",
        rs.map(|r| r.bytes as f64),
        frs.map(|r| r.bytes as f64),
        0,
    );
    t.pair(
        "system prompt chars (workspace masked)",
        rs.map(|r| r.system_prompt_chars as f64),
        frs.map(|r| r.system_prompt_chars as f64),
        0,
    );
    t.apart(
        "declared functions",
        rs.map_or_else(|| "–".into(), |r| r.declared.len().to_string()),
        frs.map_or_else(|| "–".into(), |r| r.declared.len().to_string()),
    );
    t.apart(
        "system prompt, tools, generation config vs the floor",
        rs.zip(frs)
            .map_or_else(|| "–".into(), |(a, b)| a.compare(b)),
        String::new(),
    );
    if let Some(r) = rs {
        t.notes.push(format!("declared: {}", r.declared.join(", ")));
    }
    tables.push(t);
    let mut t = Table::versus("W1 cold start (warm-up runs right after start; ms)");
    for (i, end) in w.ours.warmup_end_ms.iter().enumerate() {
        let f = floor.and_then(|f| f.warmup_end_ms.get(i).copied().flatten());
        t.pair(&format!("warm-up run {} end", i + 1), *end, f, 1);
    }
    tables.push(t);
    tables
}

/// W2's table; with the resident memory of one started harness (the process floor, MB), each
/// level's harness processes are set against what they take at least.
pub(crate) fn w2(w: &W2, started_harness_rss_mb: f64) -> Vec<Table> {
    let mut t = Table::versus(format!(
        "W2 concurrency (C fresh threads × {} turns, fresh server / pool per level; ms)",
        w.params.turns
    ));
    for pair in &w.levels {
        let (o, f) = (&pair.ours, pair.floor.as_ref());
        let c = o.concurrency;
        t.pair(
            &format!("C={c} throughput turns/s"),
            Some(o.throughput_turns_per_s),
            f.map(|f| f.throughput_turns_per_s),
            2,
        );
        let lat = |t: &mut Table,
                   label: &str,
                   g: fn(&Level<Series>) -> &Summary,
                   gf: fn(&Level<FloorSeries>) -> &Summary,
                   p: &str| {
            t.pair(
                &format!("C={c} {label} {p}"),
                g(o).get(p),
                f.and_then(|f| gf(f).get(p)),
                1,
            );
        };
        // Each figure, both sides: the same field of ours and of the floor.
        type Of<S> = fn(&Level<S>) -> &Summary;
        type Row<'a> = (&'a str, Of<Series>, Of<FloorSeries>, &'a [&'a str]);
        let rows: [Row; 4] = [
            (
                "turn latency",
                |l| &l.turn_ms,
                |l| &l.turn_ms,
                &["p50", "p99"],
            ),
            (
                "first-turn latency (session creation)",
                |l| &l.first_turn_ms,
                |l| &l.first_turn_ms,
                &["p50"],
            ),
            (
                "later-turn latency",
                |l| &l.later_turn_ms,
                |l| &l.later_turn_ms,
                &["p50", "p99"],
            ),
            (
                "thread done (all its turns)",
                |l| &l.thread_done_ms,
                |l| &l.thread_done_ms,
                &["p50", "p90"],
            ),
        ];
        for (label, ours, floor, percentiles) in rows {
            for p in percentiles {
                lat(&mut t, label, ours, floor, p);
            }
        }
        t.apart(
            &format!("C={c} turns ok / attempted"),
            format!("{} / {}", o.ok, o.attempted),
            f.map_or_else(|| "–".into(), |f| format!("{} / {}", f.ok, f.attempted)),
        );
        t.apart(
            &format!("C={c} RUN_ERROR / invalid / http+exc / text mismatch"),
            format!(
                "{} / {} / {} / {}",
                o.stats.run_errors,
                o.stats.invalid_streams,
                o.stats.http_errors + o.stats.exceptions,
                o.stats.text_mismatch
            ),
            f.map_or_else(
                || "–".into(),
                |f| format!("text mismatch {}", f.stats.text_mismatch),
            ),
        );
        let mut costs = Table::versus("");
        cost_rows(&mut costs, &o.cost, f.map(|f| &f.cost));
        for mut row in costs.rows {
            row[0] = format!("C={c} {}", row[0]);
            t.row(row);
        }
        t.apart(
            &format!("C={c} harness processes after"),
            count(o.harness_processes_after),
            f.map_or_else(|| "–".into(), |f| count(f.harness_processes_after)),
        );
        t.apart(
            &format!("C={c} peak tree RSS MB (floor: host + harness)"),
            num(o.peak_tree_rss_mb, 0),
            num(f.and_then(|f| f.peak_tree_rss_mb), 0),
        );
        let at_least = |processes: usize| num(Some(processes as f64 * started_harness_rss_mb), 0);
        t.apart(
            &format!("C={c} harness processes after × one started harness's RSS, MB"),
            at_least(o.harness_processes_after),
            f.map_or_else(|| "–".into(), |f| at_least(f.harness_processes_after)),
        );
        t.notes
            .extend(errors_note(&format!("C={c} ours"), &o.stats.errors));
        if let Some(f) = f {
            t.notes
                .extend(errors_note(&format!("C={c} floor"), &f.stats.errors));
        }
    }
    vec![t]
}

/// W3's table: the live and the hibernated pass side by side.
pub(crate) fn w3(w: &W3) -> Vec<Table> {
    let p = &w.params;
    let mut t = Table::new(
        format!(
            "W3 idle threads (grown {}; live: {} s after the turns, hibernation off; hibernated: \
             --hibernate-after-secs {}, --harness-idle-grace-secs {}, {} s after the turns)",
            p.levels
                .iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join(" → "),
            p.settle_s,
            p.hibernate_after_secs,
            p.harness_idle_grace_secs,
            p.hibernated_settle_s
        ),
        &["metric", "live", "hibernated"],
    );
    let both = |t: &mut Table, label: &str, g: &dyn Fn(&Pass) -> String| {
        t.row(vec![label.to_owned(), g(&w.live), g(&w.hibernated)]);
    };
    both(&mut t, "before any thread: server PSS MB", &|s| {
        num(s.before.server_pss_mb, 1)
    });
    both(&mut t, "before any thread: tree PSS MB", &|s| {
        num(s.before.tree_pss_mb, 1)
    });
    both(&mut t, "before any thread: harness processes", &|s| {
        count(s.before.harness_processes)
    });
    for (i, n) in p.levels.iter().enumerate() {
        let lv = |s: &Pass| s.levels.get(i).cloned();
        let row =
            |t: &mut Table, label: &str, g: &dyn Fn(&crate::workloads::w3::Level) -> String| {
                both(t, &format!("N={n} {label}"), &|s| {
                    lv(s).map_or_else(|| "–".into(), |l| g(&l))
                });
            };
        row(&mut t, "threads ok", &|l| count(l.threads_ok));
        row(&mut t, "server PSS MB", &|l| num(l.memory.server_pss_mb, 1));
        row(&mut t, "tree PSS MB (server + harness)", &|l| {
            num(l.memory.tree_pss_mb, 1)
        });
        row(&mut t, "tree RSS MB", &|l| {
            num(Some(l.memory.tree_rss_mb), 1)
        });
        row(&mut t, "harness processes", &|l| {
            count(l.memory.harness_processes)
        });
        row(&mut t, "tree PSS MB per thread", &|l| {
            num(l.tree_pss_mb_per_thread, 3)
        });
        row(&mut t, "server PSS MB per thread", &|l| {
            num(l.server_pss_mb_per_thread, 3)
        });
        row(&mut t, "tree RSS MB per thread", &|l| {
            num(l.tree_rss_mb_per_thread, 3)
        });
        row(&mut t, "idle CPU % server / harness", &|l| {
            format!(
                "{} / {}",
                num(l.idle_server_cpu_pct, 2),
                num(l.idle_harness_cpu_pct, 2)
            )
        });
        row(&mut t, "opening turn p50 ms", &|l| {
            num(l.open_turn_ms.p50, 1)
        });
    }
    t.notes.extend(errors_note("live", &w.live.errors));
    t.notes
        .extend(errors_note("hibernated", &w.hibernated.errors));
    vec![t]
}

/// W4's table.
pub(crate) fn w4(w: &W4) -> Vec<Table> {
    let o = &w.ours;
    let (now, later) = (
        w.floor.as_ref().map(|f| &f.at_once),
        w.floor.as_ref().map(|f| &f.delayed),
    );
    let d = w.params.floor_answer_delay_ms;
    let mut t = Table::versus(format!(
        "W4 frontend tool park / resume ({} iterations, each a new thread warmed by one plain turn; ms)",
        w.params.iterations
    ));
    t.apart(
        "round trips complete (floor: answering at once / after a think time)",
        count(o.complete_round_trips),
        w.floor.as_ref().map_or_else(
            || "–".into(),
            |f| {
                format!(
                    "{} / {}",
                    f.at_once.complete_round_trips, f.delayed.complete_round_trips
                )
            },
        ),
    );
    for p in PCTS {
        t.pair(
            &format!("run 1 (park) RUN_FINISHED {p} (floor: tool call)"),
            o.run1_finished_ms.get(p),
            now.and_then(|f| f.tool_call_ms.get(p)),
            1,
        );
    }
    t.pair("run 1 first byte p50", o.run1_ttfb_ms.p50, None, 1);
    t.pair(
        "run 1 TOOL_CALL_END p50",
        o.run1_tool_call_end_ms.p50,
        None,
        1,
    );
    t.pair(
        "run 1 TOOL_CALL_END → RUN_FINISHED p50",
        o.run1_tool_end_to_finished_ms.p50,
        None,
        1,
    );
    t.pair("run 2 (resume) first byte p50", o.run2_ttfb_ms.p50, None, 1);
    for (label, f) in [("at once", now), (&*format!("after {d} ms"), later)] {
        t.pair(
            &format!("run 2 first text p50 (floor: answer {label} → first text)"),
            o.run2_first_content_ms.p50,
            f.and_then(|f| f.resume_first_text_ms.p50),
            1,
        );
        for p in ["p50", "p99"] {
            t.pair(
                &format!("run 2 RUN_FINISHED {p} (floor: answer {label} → end of turn)"),
                o.run2_finished_ms.get(p),
                f.and_then(|f| f.resume_ms.get(p)),
                1,
            );
        }
    }
    for (label, f) in [("at once", now), (&*format!("after {d} ms"), later)] {
        for p in ["p50", "p99"] {
            t.pair(
                &format!("park + resume {p} (floor: tool call + resume, answer {label})"),
                o.round_trip_ms.get(p),
                f.and_then(|f| f.round_trip_ms.get(p)),
                1,
            );
        }
    }
    t.apart(
        "invalid streams / RUN_ERROR",
        format!("{} / {}", o.invalid_streams, o.run_errors),
        "–".into(),
    );
    t.notes.extend(errors_note("ours", &o.failures));
    if let Some(f) = &w.floor {
        t.notes
            .extend(errors_note("floor (at once)", &f.at_once.failures));
        t.notes
            .extend(errors_note("floor (think time)", &f.delayed.failures));
    }
    vec![t]
}

pub(crate) fn w5(w: &W5) -> Vec<Table> {
    let mut t = Table::new(
        format!(
            "W5 commands: {} text-only and `run_command true` turns, alternating on one thread (ms)",
            w.params.runs
        ),
        &["metric", "text-only turn", "command turn", "command − text"],
    );
    for p in PCTS {
        t.row(vec![
            format!("RUN_FINISHED {p}"),
            num(w.text.terminal_ms.get(p), 1),
            num(w.command.terminal_ms.get(p), 1),
            num(w.command_minus_text_ms.get(p), 1),
        ]);
    }
    t.row(vec![
        "runs ok".into(),
        format!("{}/{}", w.text.ok, w.text.runs),
        format!("{}/{}", w.command.ok, w.command.runs),
        String::new(),
    ]);
    t.notes
        .extend(errors_note("text-only turns", &w.text.errors));
    t.notes
        .extend(errors_note("command turns", &w.command.errors));
    vec![t]
}

pub(crate) fn w6(w: &W6) -> Vec<Table> {
    let mut t = Table::new(
        format!(
            "W6 forks: {} threads, each a first turn, a second, and a regenerate of the second (a fork) (ms)",
            w.params.runs
        ),
        &[
            "metric",
            "new thread",
            "next turn",
            "fork",
            "fork − new thread",
        ],
    );
    for p in PCTS {
        t.row(vec![
            format!("RUN_FINISHED {p}"),
            num(w.new_thread.terminal_ms.get(p), 1),
            num(w.next_turn.terminal_ms.get(p), 1),
            num(w.fork.terminal_ms.get(p), 1),
            num(w.fork_minus_new_ms.get(p), 1),
        ]);
    }
    t.row(vec![
        "runs ok".into(),
        format!("{}/{}", w.new_thread.ok, w.new_thread.runs),
        format!("{}/{}", w.next_turn.ok, w.next_turn.runs),
        format!("{}/{}", w.fork.ok, w.fork.runs),
        String::new(),
    ]);
    t.notes.extend(errors_note("forks", &w.fork.errors));
    vec![t]
}

/// One phase's figures out of a series of first runs.
type PhaseOf = fn(&Phases) -> &crate::stats::Summary;

/// W8: a new thread's first answer, by phase.
pub(crate) fn w8(w: &W8) -> Vec<Table> {
    let mut t = Table::new(
        format!(
            "W8 a new thread's first answer by phase: {} fresh threads one at a time, {} at once (ms, p50 / p90)",
            w.params.runs, w.params.burst
        ),
        &["phase", "alone", "burst"],
    );
    let both = |s: &crate::stats::Summary| format!("{} / {}", num(s.p50, 1), num(s.p90, 1));
    let rows: [(&str, PhaseOf); 8] = [
        ("POST → the thread has its place", |p| &p.to_placed_ms),
        ("place → conversation open in a harness", |p| {
            &p.placed_to_open_ms
        }),
        ("open → user message sent", |p| &p.open_to_sent_ms),
        ("sent → first model request at the proxy", |p| {
            &p.sent_to_model_ms
        }),
        ("model request → first text at the client", |p| {
            &p.model_to_first_text_ms
        }),
        ("sent → first text (both above)", |p| {
            &p.sent_to_first_text_ms
        }),
        ("first text → RUN_FINISHED", |p| &p.first_text_to_end_ms),
        ("POST → RUN_FINISHED", |p| &p.total_ms),
    ];
    for (label, get) in rows {
        t.row(vec![label.into(), both(get(&w.alone)), both(get(&w.burst))]);
    }
    t.row(vec![
        "runs ok / traced in the server's log".into(),
        format!(
            "{}/{} / {}",
            w.alone_runs.ok, w.alone_runs.runs, w.alone.traced
        ),
        format!(
            "{}/{} / {}",
            w.burst_runs.ok, w.burst_runs.runs, w.burst.traced
        ),
    ]);
    t.notes.push(
        "The server of W8 logs its phases (JSON, info), which the other workloads' servers do not; the model request's phase is not attributed in a burst (the proxy's log line names no thread).".into(),
    );
    t.notes
        .extend(errors_note("first runs", &w.alone_runs.errors));
    t.notes
        .extend(errors_note("burst runs", &w.burst_runs.errors));
    vec![t]
}

/// W7: listing the threads, and the big file's way in and out.
pub(crate) fn w7(w: &W7) -> Vec<Table> {
    let (l, p) = (&w.list, &w.params);
    let mut list = Table::new(
        format!(
            "W7 threads: {} made by PUT ({} at a time), listed {} times, {} a page",
            p.threads, p.concurrency, p.passes, p.limit
        ),
        &["metric", "value"],
    );
    let mut row = |label: &str, value: String| list.row(vec![label.to_owned(), value]);
    row("threads made", format!("{}/{}", l.made, p.threads));
    row("time to make them, s", num(Some(l.make_s), 2));
    row("PUT p50, ms", num(l.put_ms.p50, 2));
    for (label, value) in [
        ("page p50, ms", l.page_ms.p50),
        ("page p95, ms", l.page_p95_ms),
        ("page max, ms", l.page_ms.max),
    ] {
        row(label, num(value, 2));
    }
    row("pages a listing", l.pages_per_listing.to_string());
    row("whole listing p50, ms", num(l.listing_ms.p50, 1));
    row("whole listing max, ms", num(l.listing_ms.max, 1));
    row(
        "listings with each thread once",
        format!("{}/{}", l.complete_listings, l.listings),
    );
    let f = &w.file;
    let mut file = Table::new(
        format!(
            "W7 files: a {} MiB file uploaded by PUT, downloaded by GET (read to the end)",
            p.file_mb
        ),
        &["metric", "ours", "cat", "ours/cat"],
    );
    file.apart("upload, MiB/s", num(f.upload_mib_s, 1), String::new());
    file.pair("download, MiB/s", f.download_mib_s, f.cat_mib_s, 1);
    file.pair("download, s", Some(f.download_s), Some(f.cat_s), 3);
    file.apart(
        "download complete",
        f.download_complete.to_string(),
        String::new(),
    );
    file.apart(
        "server RSS before → peak during, MiB",
        format!(
            "{} → {}",
            num(Some(f.server_rss_before_mib), 1),
            num(Some(f.server_rss_peak_mib), 1)
        ),
        String::new(),
    );
    file.apart(
        "server VmHWM before → after, MiB",
        format!(
            "{} → {}",
            num(Some(f.server_hwm_before_mib), 1),
            num(Some(f.server_hwm_after_mib), 1)
        ),
        String::new(),
    );
    file.notes
        .push(format!("`cat` read {} to /dev/null.", f.cat_of));
    vec![list, file]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tables_render_aligned_markdown_with_ratios() {
        let mut t = Table::versus("T");
        t.pair("a", Some(10.0), Some(4.0), 1);
        t.pair("bb", Some(1.0), None, 1);
        t.apart("c", "x".into(), "y".into());
        t.notes.push("note".into());
        assert_eq!(
            t.render(),
            "### T\n\n\
             | metric | ours | raw floor | ours/floor |\n\
             |--------|-----:|----------:|-----------:|\n\
             | a      | 10.0 |       4.0 |       2.50 |\n\
             | bb     |  1.0 |         – |            |\n\
             | c      |    x |         y |            |\n\
             \nnote\n"
        );
    }

    #[test]
    fn unknown_numbers_are_dashes() {
        assert_eq!(num(None, 1), "–");
        assert_eq!(num(Some(f64::NAN), 1), "–");
        assert_eq!(num(Some(1.234), 2), "1.23");
    }
}
