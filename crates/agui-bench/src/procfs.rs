//! Process figures from `/proc`, read exactly as the reference benchmark (`agui_bench.py`)
//! reads them: CPU is `utime + stime` of `/proc/<pid>/stat`; descendants are found through
//! their parent pids and split by `comm` (the harness is `localharness`, everything else is
//! "other"); a descendant that exits during a window counts with its last sampled CPU; RSS is
//! `VmRSS` of `/proc/<pid>/status`, PSS is `Pss` of `/proc/<pid>/smaps_rollup`.
//!
//! Added here: the whole machine's busy share from `/proc/stat`, so a window disturbed by
//! other work on the machine shows it.

use parking_lot::Mutex;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, mpsc};
use std::time::{Duration, Instant};

use serde::Serialize;

/// The harness binary's process name.
pub(crate) const HARNESS_COMM: &str = "localharness";

/// The fields of `/proc/<pid>/stat` the benchmark uses.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Stat {
    pub(crate) comm: String,
    pub(crate) ppid: u32,
    /// `utime + stime`, clock ticks.
    pub(crate) cpu_ticks: u64,
    /// `cutime + cstime` (reaped children), clock ticks.
    pub(crate) children_ticks: u64,
}

fn clock_ticks_per_sec() -> f64 {
    nix::unistd::sysconf(nix::unistd::SysconfVar::CLK_TCK)
        .ok()
        .flatten()
        .map_or(100.0, |t| t as f64)
}

/// Clock ticks as milliseconds.
pub(crate) fn ticks_to_ms(ticks: u64) -> f64 {
    ticks_to_secs(ticks) * 1000.0
}

fn ticks_to_secs(ticks: u64) -> f64 {
    static TCK: std::sync::OnceLock<f64> = std::sync::OnceLock::new();
    ticks as f64 / *TCK.get_or_init(clock_ticks_per_sec)
}

/// `/proc/<pid>/stat`, parsed; `None` once the process is gone.
pub(crate) fn stat(pid: u32) -> Option<Stat> {
    let stat = process(pid)?.stat().ok()?;
    Some(Stat {
        comm: stat.comm,
        ppid: u32::try_from(stat.ppid).ok()?,
        cpu_ticks: stat.utime + stat.stime,
        // Reaped children's times are never negative; the kernel's type is signed.
        children_ticks: u64::try_from(stat.cutime + stat.cstime).ok()?,
    })
}

fn process(pid: u32) -> Option<::procfs::process::Process> {
    ::procfs::process::Process::new(i32::try_from(pid).ok()?).ok()
}

/// Peak resident set size (`VmHWM`) in kB.
pub(crate) fn hwm_kb(pid: u32) -> Option<u64> {
    process(pid)?.status().ok()?.vmhwm
}

/// Whether the process is asleep (waiting on something, using no CPU).
pub(crate) fn is_sleeping(pid: u32) -> bool {
    process(pid)
        .and_then(|p| p.stat().ok())
        .is_some_and(|s| s.state == 'S')
}

/// A process's resident memory, kB: all of it, and its file-backed and anonymous parts.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Resident {
    pub(crate) rss_kb: u64,
    pub(crate) file_kb: u64,
    pub(crate) anon_kb: u64,
}

/// `VmRSS`, `RssFile` and `RssAnon` of `/proc/<pid>/status`.
pub(crate) fn resident(pid: u32) -> Option<Resident> {
    let status = process(pid)?.status().ok()?;
    Some(Resident {
        rss_kb: status.vmrss?,
        file_kb: status.rssfile?,
        anon_kb: status.rssanon?,
    })
}

/// Resident set size in kB.
pub(crate) fn rss_kb(pid: u32) -> Option<u64> {
    process(pid)?.status().ok()?.vmrss
}

/// Proportional set size in kB.
pub(crate) fn pss_kb(pid: u32) -> Option<u64> {
    let rollup = process(pid)?.smaps_rollup().ok()?;
    let pss = rollup
        .memory_map_rollup
        .0
        .first()?
        .extension
        .map
        .get("Pss")?;
    Some(pss / 1024)
}

/// Total memory of the machine in kB.
pub(crate) fn mem_total_kb() -> Option<u64> {
    use ::procfs::Current as _;
    Some(::procfs::Meminfo::current().ok()?.mem_total / 1024)
}

fn all_pids() -> Vec<u32> {
    ::procfs::process::all_processes()
        .into_iter()
        .flatten()
        .filter_map(|p| u32::try_from(p.ok()?.pid).ok())
        .collect()
}

/// Every descendant of `pid` (children, grandchildren, …), with its stat.
pub(crate) fn descendants(pid: u32) -> Vec<(u32, Stat)> {
    let stats: Vec<(u32, Stat)> = all_pids()
        .into_iter()
        .filter_map(|p| Some((p, stat(p)?)))
        .collect();
    descendants_in(pid, &stats)
}

/// The descendants of `root` among `(pid, stat)` pairs (pure, for tests).
pub(crate) fn descendants_in(root: u32, stats: &[(u32, Stat)]) -> Vec<(u32, Stat)> {
    let mut kids: HashMap<u32, Vec<usize>> = HashMap::new();
    for (i, (_, s)) in stats.iter().enumerate() {
        kids.entry(s.ppid).or_default().push(i);
    }
    let mut out = Vec::new();
    let mut todo = vec![root];
    while let Some(p) = todo.pop() {
        for &i in kids.get(&p).into_iter().flatten() {
            let (pid, s) = &stats[i];
            if *pid != root {
                out.push((*pid, s.clone()));
                todo.push(*pid);
            }
        }
    }
    out
}

/// How many processes on the machine are named `comm`.
pub(crate) fn count_named(comm: &str) -> usize {
    all_pids()
        .into_iter()
        .filter(|p| stat(*p).is_some_and(|s| s.comm == comm))
        .count()
}

/// `(busy, total)` jiffies of all CPUs (busy excludes idle and iowait; guest time is inside
/// user time, so it is not added again).
fn machine_cpu() -> Option<(u64, u64)> {
    use ::procfs::CurrentSI as _;
    let cpu = ::procfs::KernelStats::current().ok()?.total;
    let idle = cpu.idle + cpu.iowait.unwrap_or(0);
    let busy = cpu.user
        + cpu.nice
        + cpu.system
        + cpu.irq.unwrap_or(0)
        + cpu.softirq.unwrap_or(0)
        + cpu.steal.unwrap_or(0);
    Some((busy, busy + idle))
}

/// Load average (1, 5, 15 minutes).
pub(crate) fn loadavg() -> Option<[f64; 3]> {
    use ::procfs::Current as _;
    let load = ::procfs::LoadAverage::current().ok()?;
    Some([load.one, load.five, load.fifteen].map(f64::from))
}

/// CPU counters at one instant.
#[derive(Debug, Clone)]
pub(crate) struct CpuSnapshot {
    t: Instant,
    client_s: f64,
    server_s: Option<f64>,
    server_reaped_s: Option<f64>,
    /// Descendants of the server: cpu seconds and comm.
    desc: HashMap<u32, (f64, String)>,
    mock_s: Option<f64>,
    machine: Option<(u64, u64)>,
}

/// CPU spent between two snapshots, by component (seconds), as the reference computes it.
#[derive(Debug, Clone, Copy, Default, Serialize)]
pub(crate) struct CpuDelta {
    pub(crate) wall_s: f64,
    /// This benchmark process (the host too, for the raw floor).
    pub(crate) client_s: f64,
    pub(crate) server_s: Option<f64>,
    /// CPU of the server's children that it reaped (`cutime + cstime`).
    pub(crate) server_reaped_s: Option<f64>,
    pub(crate) harness_s: Option<f64>,
    pub(crate) other_desc_s: Option<f64>,
    pub(crate) desc_vanished: usize,
    pub(crate) mock_s: Option<f64>,
    /// server + harness + other descendants + mock (+ client when it is not the server).
    pub(crate) total_s: f64,
    /// `total_s / wall_s / cores`.
    pub(crate) util_of_machine: f64,
    /// Busy share of all cores from `/proc/stat`: everything on the machine, ours or not.
    pub(crate) machine_busy: Option<f64>,
}

/// Memory of the server and its descendants.
#[derive(Debug, Clone, Copy, Default, Serialize)]
pub(crate) struct Memory {
    pub(crate) server_rss_mb: f64,
    pub(crate) tree_rss_mb: f64,
    pub(crate) harness_rss_mb: f64,
    pub(crate) harness_processes: usize,
    pub(crate) descendant_processes: usize,
    pub(crate) localharness_systemwide: usize,
    pub(crate) server_pss_mb: Option<f64>,
    pub(crate) tree_pss_mb: Option<f64>,
    pub(crate) harness_pss_mb: Option<f64>,
}

/// Watches the CPU and memory of a server (or, for the raw floor, this process as the host),
/// its descendants, the model mock and this process.
pub(crate) struct ProcWatch {
    server_pid: Option<u32>,
    mock_pid: Option<u32>,
    /// The server is this process (raw floor): its CPU is not added twice.
    host_is_client: bool,
    last: Arc<Mutex<HashMap<u32, (f64, String)>>>,
    peak_tree_rss_kb: Arc<AtomicU64>,
    sampler: Option<(mpsc::Sender<()>, std::thread::JoinHandle<()>)>,
}

impl ProcWatch {
    /// Watches `server_pid` (with its descendants, except the mock) and `mock_pid`.
    pub(crate) fn new(server_pid: Option<u32>, mock_pid: Option<u32>) -> Self {
        Self {
            server_pid,
            mock_pid,
            host_is_client: server_pid == Some(std::process::id()),
            last: Arc::default(),
            peak_tree_rss_kb: Arc::default(),
            sampler: None,
        }
    }

    /// Descendants of the server, without the mock (a child of this process in floor runs).
    fn server_descendants(server: u32, mock: Option<u32>) -> Vec<(u32, Stat)> {
        descendants(server)
            .into_iter()
            .filter(|(p, _)| Some(*p) != mock)
            .collect()
    }

    /// The counters now.
    pub(crate) fn snapshot(&self) -> CpuSnapshot {
        snapshot(self.server_pid, self.mock_pid)
    }

    /// Starts sampling every second in the background: descendants that exit before the next
    /// snapshot keep their last CPU figure, and the peak tree RSS is tracked.
    pub(crate) fn start(&mut self) {
        self.stop();
        self.last.lock().clear();
        self.peak_tree_rss_kb.store(0, Ordering::Relaxed);
        let (Some(server), mock) = (self.server_pid, self.mock_pid) else {
            return;
        };
        let (tx, rx) = mpsc::channel::<()>();
        let last = self.last.clone();
        let peak = self.peak_tree_rss_kb.clone();
        let thread = std::thread::spawn(move || {
            let sample = || {
                let s = snapshot(Some(server), mock);
                last.lock().extend(s.desc);
                peak.fetch_max(tree_rss_kb(server, mock), Ordering::Relaxed);
            };
            // Every second, and once more when stopped (a window shorter than a second still
            // sees its processes).
            loop {
                sample();
                if !matches!(
                    rx.recv_timeout(Duration::from_secs(1)),
                    Err(mpsc::RecvTimeoutError::Timeout)
                ) {
                    sample();
                    return;
                }
            }
        });
        self.sampler = Some((tx, thread));
    }

    /// Stops the background sampling.
    pub(crate) fn stop(&mut self) {
        if let Some((tx, thread)) = self.sampler.take() {
            drop(tx);
            let _ = thread.join();
        }
    }

    /// The peak tree RSS seen since [`ProcWatch::start`], MB.
    pub(crate) fn peak_tree_rss_mb(&self) -> f64 {
        self.peak_tree_rss_kb.load(Ordering::Relaxed) as f64 / 1024.0
    }

    /// CPU spent between `a` and `b`.
    pub(crate) fn delta(&self, a: &CpuSnapshot, b: &CpuSnapshot) -> CpuDelta {
        let mut seen = self.last.lock().clone();
        seen.extend(b.desc.clone());
        cpu_delta(a, b, &seen, self.host_is_client)
    }

    /// Memory of the server tree now (PSS too when `with_pss`).
    pub(crate) fn memory(&self, with_pss: bool) -> Memory {
        let Some(server) = self.server_pid else {
            return Memory::default();
        };
        let desc = Self::server_descendants(server, self.mock_pid);
        let mb = |kb: u64| kb as f64 / 1024.0;
        let srv_rss = rss_kb(server).unwrap_or(0);
        let rss: Vec<(bool, u64)> = desc
            .iter()
            .map(|(p, s)| (s.comm == HARNESS_COMM, rss_kb(*p).unwrap_or(0)))
            .collect();
        let mut memory = Memory {
            server_rss_mb: mb(srv_rss),
            tree_rss_mb: mb(srv_rss + rss.iter().map(|(_, r)| r).sum::<u64>()),
            harness_rss_mb: mb(rss.iter().filter(|(h, _)| *h).map(|(_, r)| r).sum()),
            harness_processes: rss.iter().filter(|(h, _)| *h).count(),
            descendant_processes: desc.len(),
            localharness_systemwide: count_named(HARNESS_COMM),
            ..Memory::default()
        };
        if with_pss {
            let srv = pss_kb(server).unwrap_or(0);
            let pss: Vec<(bool, u64)> = desc
                .iter()
                .map(|(p, s)| (s.comm == HARNESS_COMM, pss_kb(*p).unwrap_or(0)))
                .collect();
            memory.server_pss_mb = Some(mb(srv));
            memory.tree_pss_mb = Some(mb(srv + pss.iter().map(|(_, r)| r).sum::<u64>()));
            memory.harness_pss_mb = Some(mb(pss.iter().filter(|(h, _)| *h).map(|(_, r)| r).sum()));
        }
        memory
    }

    /// Live harness processes under the server.
    pub(crate) fn harness_processes(&self) -> usize {
        self.server_pid.map_or(0, |s| {
            Self::server_descendants(s, self.mock_pid)
                .iter()
                .filter(|(_, st)| st.comm == HARNESS_COMM)
                .count()
        })
    }
}

impl Drop for ProcWatch {
    fn drop(&mut self) {
        self.stop();
    }
}

fn tree_rss_kb(server: u32, mock: Option<u32>) -> u64 {
    rss_kb(server).unwrap_or(0)
        + ProcWatch::server_descendants(server, mock)
            .iter()
            .map(|(p, _)| rss_kb(*p).unwrap_or(0))
            .sum::<u64>()
}

fn snapshot(server_pid: Option<u32>, mock_pid: Option<u32>) -> CpuSnapshot {
    let own = stat(std::process::id());
    let server = server_pid.and_then(stat);
    let desc = server_pid.map_or_else(HashMap::new, |s| {
        ProcWatch::server_descendants(s, mock_pid)
            .into_iter()
            .map(|(p, st)| (p, (ticks_to_secs(st.cpu_ticks), st.comm)))
            .collect()
    });
    CpuSnapshot {
        t: Instant::now(),
        client_s: own.map_or(0.0, |s| ticks_to_secs(s.cpu_ticks)),
        server_s: server.as_ref().map(|s| ticks_to_secs(s.cpu_ticks)),
        server_reaped_s: server.as_ref().map(|s| ticks_to_secs(s.children_ticks)),
        desc,
        mock_s: mock_pid.and_then(stat).map(|s| ticks_to_secs(s.cpu_ticks)),
        machine: machine_cpu(),
    }
}

/// The delta between snapshots; `seen` holds every descendant's latest CPU (live ones from
/// `b`, vanished ones from the last background sample).
fn cpu_delta(
    a: &CpuSnapshot,
    b: &CpuSnapshot,
    seen: &HashMap<u32, (f64, String)>,
    host_is_client: bool,
) -> CpuDelta {
    let wall_s = b.t.duration_since(a.t).as_secs_f64();
    let mut d = CpuDelta {
        wall_s,
        client_s: b.client_s - a.client_s,
        mock_s: a.mock_s.zip(b.mock_s).map(|(a, b)| b - a),
        ..CpuDelta::default()
    };
    if let (Some(sa), Some(sb)) = (a.server_s, b.server_s) {
        d.server_s = Some(sb - sa);
        let (mut harness, mut other) = (0.0, 0.0);
        for (pid, (cpu, comm)) in seen {
            let spent = cpu - a.desc.get(pid).map_or(0.0, |(c, _)| *c);
            if !b.desc.contains_key(pid) {
                d.desc_vanished += 1;
            }
            if comm == HARNESS_COMM {
                harness += spent;
            } else {
                other += spent;
            }
        }
        d.harness_s = Some(harness);
        d.other_desc_s = Some(other);
        d.server_reaped_s = a.server_reaped_s.zip(b.server_reaped_s).map(|(a, b)| b - a);
    }
    d.total_s = d.server_s.unwrap_or(0.0)
        + d.harness_s.unwrap_or(0.0)
        + d.other_desc_s.unwrap_or(0.0)
        + d.mock_s.unwrap_or(0.0)
        + if host_is_client { 0.0 } else { d.client_s };
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get()) as f64;
    d.util_of_machine = d.total_s / wall_s.max(1e-9) / cores;
    if let (Some((ba, ta)), Some((bb, tb))) = (a.machine, b.machine)
        && tb > ta
    {
        d.machine_busy = Some((bb - ba) as f64 / (tb - ta) as f64);
    }
    d
}

/// CPU milliseconds per turn, by component.
#[derive(Debug, Clone, Copy, Default, Serialize)]
pub(crate) struct CpuPerTurn {
    pub(crate) turns: usize,
    pub(crate) server_ms: Option<f64>,
    pub(crate) harness_ms: Option<f64>,
    pub(crate) other_ms: Option<f64>,
    pub(crate) mock_ms: Option<f64>,
    pub(crate) bench_ms: Option<f64>,
    pub(crate) total_ms: Option<f64>,
    pub(crate) util_of_machine: f64,
    pub(crate) machine_busy: Option<f64>,
    pub(crate) wall_s: f64,
}

impl CpuPerTurn {
    /// `delta` divided over `turns`.
    pub(crate) fn of(delta: &CpuDelta, turns: usize) -> Self {
        let per = |s: Option<f64>| {
            (turns > 0)
                .then_some(s)
                .flatten()
                .map(|s| s * 1000.0 / turns as f64)
        };
        Self {
            turns,
            server_ms: per(delta.server_s),
            harness_ms: per(delta.harness_s),
            other_ms: per(delta.other_desc_s),
            mock_ms: per(delta.mock_s),
            bench_ms: per(Some(delta.client_s)),
            total_ms: per(Some(delta.total_s)),
            util_of_machine: delta.util_of_machine,
            machine_busy: delta.machine_busy,
            wall_s: delta.wall_s,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn this_process_reads_its_own_figures() {
        let me = std::process::id();
        let stat = stat(me).unwrap();
        assert_eq!(stat.ppid, std::os::unix::process::parent_id());
        assert!(rss_kb(me).unwrap() > 0);
        assert!(pss_kb(me).unwrap() > 0);
        assert!(mem_total_kb().unwrap() > 0);
        let (busy, total) = machine_cpu().unwrap();
        assert!(busy <= total && total > 0);
        assert!(all_pids().contains(&me));
    }

    #[test]
    fn descendants_follow_parent_pids() {
        let st = |ppid, comm: &str| Stat {
            comm: comm.into(),
            ppid,
            cpu_ticks: 0,
            children_ticks: 0,
        };
        let stats = vec![
            (10, st(1, "server")),
            (11, st(10, "localharness")),
            (12, st(11, "sh")),
            (13, st(1, "other")),
            (14, st(10, "localharness")),
        ];
        let mut pids: Vec<u32> = descendants_in(10, &stats).iter().map(|(p, _)| *p).collect();
        pids.sort_unstable();
        assert_eq!(pids, [11, 12, 14]);
        assert!(descendants_in(13, &stats).is_empty());
    }

    #[test]
    fn deltas_split_harness_and_other_and_keep_vanished_processes() {
        let t = Instant::now();
        let snap = |at: u64, client, server, desc: &[(u32, f64, &str)], mock| CpuSnapshot {
            t: t + Duration::from_secs(at),
            client_s: client,
            server_s: Some(server),
            server_reaped_s: Some(0.0),
            desc: desc
                .iter()
                .map(|(p, c, n)| (*p, (*c, (*n).to_owned())))
                .collect(),
            mock_s: Some(mock),
            machine: Some((at * 100, at * 200)),
        };
        let a = snap(0, 1.0, 2.0, &[(5, 1.0, HARNESS_COMM), (6, 0.5, "sh")], 0.1);
        // pid 6 exited (last sampled at 0.7); pid 7 is new.
        let b = snap(
            2,
            1.5,
            2.25,
            &[(5, 1.75, HARNESS_COMM), (7, 0.25, HARNESS_COMM)],
            0.2,
        );
        let mut seen: HashMap<u32, (f64, String)> = HashMap::from([(6, (0.7, "sh".to_owned()))]);
        seen.extend(b.desc.clone());
        let d = cpu_delta(&a, &b, &seen, false);
        assert!((d.harness_s.unwrap() - 1.0).abs() < 1e-9);
        assert!((d.other_desc_s.unwrap() - 0.2).abs() < 1e-9);
        assert_eq!(d.desc_vanished, 1);
        assert!((d.server_s.unwrap() - 0.25).abs() < 1e-9);
        assert!((d.total_s - (0.25 + 1.0 + 0.2 + 0.1 + 0.5)).abs() < 1e-9);
        assert_eq!(d.machine_busy, Some(0.5));
        let host = cpu_delta(&a, &b, &seen, true);
        assert!((host.total_s - (d.total_s - 0.5)).abs() < 1e-9);
        let per = CpuPerTurn::of(&d, 4);
        assert!((per.harness_ms.unwrap() - 250.0).abs() < 1e-9);
        assert_eq!(CpuPerTurn::of(&d, 0).harness_ms, None);
    }
}
