//! The harness process floor: what one `localharness` costs before it is given anything to do —
//! its runtime's start-up (package initialisation) and nothing else: no config, no conversation.
//!
//! Every process the server runs (one per owner when confined with identities, one per thread
//! in `thread` mode) pays at least this, so N live processes cannot take less than N times its
//! resident memory, nor N boots less than N times its CPU. The W2 table of a run with owners
//! compares its peak with that bound.

use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

use anyhow::Context as _;
use serde::Serialize;

use crate::procfs;
use crate::report::{Table, num};
use crate::stats::percentile;

/// How many harnesses are started; the figures are their medians.
const SAMPLES: usize = 5;
/// A harness whose CPU time has not moved for this long, sleeping, has finished starting and
/// waits for its config.
const SETTLED: Duration = Duration::from_millis(200);
/// Bounds a harness that never settles (the measurement then fails, naming the binary).
const START_LIMIT: Duration = Duration::from_secs(20);

/// One started, idle harness's cost (medians of [`SAMPLES`] processes).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub(crate) struct ProcessFloor {
    pub(crate) samples: usize,
    /// CPU (user + system) the start-up took, ms.
    pub(crate) cpu_ms: f64,
    /// Resident memory once started, MB.
    pub(crate) rss_mb: f64,
    /// Of it, the binary's file-backed pages (the same pages in every harness: counted again in
    /// each process's resident memory, once in the machine's).
    pub(crate) rss_file_mb: f64,
    /// Of it, anonymous memory (the runtime's heap after start-up), the process's own.
    pub(crate) rss_anon_mb: f64,
}

/// What one harness measured.
#[derive(Debug, Clone, Copy)]
struct Sample {
    cpu_ms: f64,
    memory: procfs::Resident,
}

/// Starts `harness` [`SAMPLES`] times, one at a time, each with an empty environment but `HOME`
/// (`scratch`), as the server starts it, and measures each once it waits for its config.
pub(crate) async fn measure(harness: &Path, scratch: &Path) -> anyhow::Result<ProcessFloor> {
    std::fs::create_dir_all(scratch).with_context(|| format!("creating {}", scratch.display()))?;
    let mut samples = Vec::with_capacity(SAMPLES);
    for _ in 0..SAMPLES {
        samples.push(sample(harness, scratch).await?);
    }
    Ok(summarize(&samples))
}

async fn sample(harness: &Path, scratch: &Path) -> anyhow::Result<Sample> {
    let mut child = tokio::process::Command::new(harness)
        .env_clear()
        .env("HOME", scratch)
        .current_dir(scratch)
        // Its stdin stays open: the harness blocks reading its config there.
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .with_context(|| format!("starting {}", harness.display()))?;
    let pid = child
        .id()
        .with_context(|| format!("{} exited at once", harness.display()))?;
    let started = Instant::now();
    let mut last: Option<(u64, Instant)> = None;
    let settled = loop {
        if let Some(status) = child.try_wait()? {
            anyhow::bail!(
                "{} exited ({status}) before waiting for its config",
                harness.display()
            );
        }
        let now = Instant::now();
        if now - started > START_LIMIT {
            anyhow::bail!(
                "{} still busy starting after {START_LIMIT:?}",
                harness.display()
            );
        }
        if let Some(stat) = procfs::stat(pid) {
            match last {
                Some((ticks, since)) if ticks == stat.cpu_ticks => {
                    if now - since >= SETTLED && procfs::is_sleeping(pid) {
                        break stat;
                    }
                }
                _ => last = Some((stat.cpu_ticks, now)),
            }
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    };
    let memory = procfs::resident(pid)
        .with_context(|| format!("reading the memory of {} ({pid})", harness.display()))?;
    // Closing stdin ends it (no config); the kill only covers a harness that reads on.
    drop(child.stdin.take());
    if tokio::time::timeout(Duration::from_secs(5), child.wait())
        .await
        .is_err()
    {
        child.kill().await?;
    }
    Ok(Sample {
        cpu_ms: procfs::ticks_to_ms(settled.cpu_ticks),
        memory,
    })
}

impl ProcessFloor {
    /// Its table.
    pub(crate) fn table(&self) -> Table {
        let mut t = Table::new(
            format!(
                "Harness process floor (one `localharness` started, waiting for its config; \
                 median of {})",
                self.samples
            ),
            &["metric", "value"],
        );
        let mut row = |label: &str, value: f64, decimals: usize| {
            t.row(vec![label.to_owned(), num(Some(value), decimals)]);
        };
        row("start-up CPU, ms", self.cpu_ms, 0);
        row("resident memory, MB", self.rss_mb, 1);
        row("of it the binary's file pages, MB", self.rss_file_mb, 1);
        row("of it anonymous, MB", self.rss_anon_mb, 1);
        t.notes.push(
            "every harness process pays at least this: N owners' (or, in `thread` mode, \
             threads') live processes take at least N times its resident memory, N boots at \
             least N times its CPU"
                .into(),
        );
        t
    }
}

fn mb(kb: u64) -> f64 {
    kb as f64 / 1024.0
}

fn summarize(samples: &[Sample]) -> ProcessFloor {
    let median = |f: fn(&Sample) -> f64| {
        let mut values: Vec<f64> = samples.iter().map(f).collect();
        values.sort_by(f64::total_cmp);
        percentile(&values, 50.0).unwrap_or(f64::NAN)
    };
    ProcessFloor {
        samples: samples.len(),
        cpu_ms: median(|s| s.cpu_ms),
        rss_mb: median(|s| mb(s.memory.rss_kb)),
        rss_file_mb: median(|s| mb(s.memory.file_kb)),
        rss_anon_mb: median(|s| mb(s.memory.anon_kb)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(cpu_ms: f64, rss_mb: u64) -> Sample {
        Sample {
            cpu_ms,
            memory: procfs::Resident {
                rss_kb: rss_mb * 1024,
                file_kb: rss_mb * 1024 * 2 / 3,
                anon_kb: rss_mb * 1024 / 3,
            },
        }
    }

    /// Measured on the real harness: it starts, waits for its config, and what it holds once
    /// started is its binary's pages and its own heap.
    #[tokio::test]
    async fn a_started_harness_is_measured_waiting_for_its_config() {
        let harness = harness_client::find_binary(None).expect("the harness is installed");
        let scratch = tempfile::tempdir().unwrap();
        let floor = measure(&harness, scratch.path()).await.unwrap();
        assert_eq!(floor.samples, SAMPLES);
        assert!(floor.cpu_ms > 0.0, "{floor:?}");
        assert!(
            floor.rss_file_mb > 1.0 && floor.rss_anon_mb > 1.0,
            "{floor:?}"
        );
        assert!(
            (floor.rss_file_mb + floor.rss_anon_mb - floor.rss_mb).abs() < 0.05 * floor.rss_mb,
            "{floor:?}"
        );
    }

    /// A binary that exits instead of waiting for a config is an error naming it, not a floor
    /// of zero.
    #[tokio::test]
    async fn a_binary_that_does_not_wait_for_a_config_is_an_error() {
        let scratch = tempfile::tempdir().unwrap();
        let error = measure(Path::new("/bin/true"), scratch.path())
            .await
            .unwrap_err();
        let message = format!("{error:#}");
        assert!(message.contains("/bin/true"), "{message}");
    }

    /// One slow start (a disturbed machine) does not move the floor: each figure is a median.
    #[test]
    fn the_floor_is_the_median_start_not_the_slowest() {
        let floor = summarize(&[
            sample(140.0, 105),
            sample(900.0, 300),
            sample(130.0, 102),
            sample(150.0, 108),
            sample(135.0, 104),
        ]);
        assert_eq!(floor.samples, 5);
        assert_eq!(floor.cpu_ms, 140.0);
        assert_eq!(floor.rss_mb, 105.0);
        assert_eq!(floor.rss_file_mb, 70.0);
        assert_eq!(floor.rss_anon_mb, 35.0);
    }
}
