// Resources over time, per server life: RSS, descriptors, OS threads, async tasks, sessions and
// harness processes of every running replica every few seconds, and the shared volume's size.
// Judged flat after warm-up: in each life, the last third's median within 1.5 × the first
// third's plus a slack.
import fs from "node:fs";
import { find } from "../../e2e/lib/workspace.mjs";
import { violate } from "./world.mjs";

/** Bytes of the files under `root` (`skip` aside). */
function du(root, skip) {
  let bytes = 0;
  for (const file of find(root, (_, full) => full !== skip)) {
    try {
      bytes += fs.lstatSync(file).size;
    } catch {
      /* removed meanwhile */
    }
  }
  return bytes;
}

export class Resources {
  constructor(fleet, metricsToken) {
    this.fleet = fleet;
    this.metricsToken = metricsToken;
    this.samples = [];
    this.started = Date.now();
  }

  async sample() {
    const t = Math.round((Date.now() - this.started) / 1000);
    const volumeMb = (du(this.fleet.saveDir, this.fleet.filler) + du(this.fleet.workspaceRoot)) / 1024 / 1024;
    for (const r of this.fleet.up()) {
      try {
        const status = fs.readFileSync(`/proc/${r.server.pid}/status`, "utf8");
        const field = (name) => Number(status.match(new RegExp(`^${name}:\\s+(\\d+)`, "m"))?.[1]);
        const res = await fetch(`${r.server.url}/metrics`, { headers: { authorization: `Bearer ${this.metricsToken}` }, signal: AbortSignal.timeout(5_000) });
        const metrics = await res.text();
        const gauge = (name) => metrics.split("\n").filter((l) => l.startsWith(name)).reduce((sum, l) => sum + Number(l.split(" ").at(-1)), 0);
        this.samples.push({
          t,
          replica: r.id,
          life: r.life,
          rssMb: field("VmRSS") / 1024,
          fds: fs.readdirSync(`/proc/${r.server.pid}/fd`).length,
          threads: field("Threads"),
          tasks: gauge("agui_runtime_tasks"),
          sessions: gauge("agui_sessions"),
          harnesses: this.fleet.harnesses(r).length,
          volumeMb,
        });
      } catch {
        /* the replica is stopping or frozen */
      }
    }
  }

  /** The last sample of each running replica, for the minute's line. */
  latest() {
    const last = new Map();
    for (const s of this.samples) last.set(s.replica, s);
    return [...last.values()].filter((s) => this.fleet.up().some((r) => r.life === s.life));
  }

  /**
   * Flat after warm-up, per server life; the volume (with the workspaces) over the whole soak,
   * as it outlives restarts: threads are deleted as fast as they are made, so it too must level off.
   */
  flatness() {
    const rows = [];
    // A 12 MB reply in flight holds ~36 MB (the harness's frames, the translator, the message
    // log) until its thread is deleted; the server gives large buffers back once freed (its
    // malloc tuning), so this slack covers the replies in flight at a sample, not a level kept.
    const slack = { rssMb: 60, fds: 20, threads: 8, tasks: 40, sessions: 10, volumeMb: 60 };
    const judge = (key, label, life) => {
      if (life.length < 9) return;
      const third = Math.floor(life.length / 3);
      const first = median(life.slice(1, third + 1).map((s) => s[key]));
      const last = median(life.slice(-third).map((s) => s[key]));
      const bound = first * 1.5 + slack[key];
      rows.push({ key, life: label, first, last, bound, samples: life.length });
      if (last > bound) violate(`${key} (${label}) grew from ${first.toFixed(1)} to ${last.toFixed(1)} (bound ${bound.toFixed(1)})`);
    };
    const lives = [...new Set(this.samples.map((s) => s.life))];
    for (const key of Object.keys(slack).filter((k) => k !== "volumeMb")) {
      for (const life of lives) judge(key, life, this.samples.filter((s) => s.life === life));
    }
    // One volume figure per sampling round.
    const rounds = [...new Map(this.samples.map((s) => [s.t, s])).values()];
    judge("volumeMb", "whole soak", rounds);
    return rows;
  }

  /** Resources over time per replica: one row per replica and period (`periods` equal slices). */
  overTime(periods = 6) {
    const end = Math.max(1, ...this.samples.map((s) => s.t));
    const rows = [];
    for (const replica of [...new Set(this.samples.map((s) => s.replica))]) {
      for (let p = 0; p < periods; p++) {
        const lo = (end * p) / periods;
        const hi = (end * (p + 1)) / periods;
        const slice = this.samples.filter((s) => s.replica === replica && s.t >= lo && s.t < hi + (p === periods - 1 ? 1 : 0));
        if (!slice.length) continue;
        const m = (key) => median(slice.map((s) => s[key]));
        rows.push({ replica, from: Math.round(lo), to: Math.round(hi), lives: [...new Set(slice.map((s) => s.life))].join(", "), rssMb: m("rssMb"), fds: m("fds"), threads: m("threads"), tasks: m("tasks"), sessions: m("sessions"), harnesses: m("harnesses"), volumeMb: m("volumeMb") });
      }
    }
    return rows;
  }
}

/** The middle value: a level that one spike (a 12 MB reply in flight) does not move. */
export function median(values) {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)];
}

