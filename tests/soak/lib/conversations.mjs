// The harness's own files, watched: `localharness` keeps each conversation in a SQLite file,
// `<storage dir>/<conversation id>.db` (in the owner's tree on the shared volume), open while
// the conversation is loaded and closed when it is hibernated. So one `.db` open in two harness
// processes at once is two drivers of one conversation — whichever replicas they belong to,
// and also when one is an orphan of a killed replica. The sampler reads every harness's open
// files from /proc several times a second; it also counts how often an owner's tree (its
// `HOME`) has harnesses of several replicas at once, which is by design (an owner's threads
// hash to different replicas) and only safe if no conversation is ever open in two of them.
// At the end every conversation file must pass SQLite's own integrity check.
import { execFileSync } from "node:child_process";
import fs from "node:fs";
import { find } from "../../e2e/lib/workspace.mjs";
import { environ, processTable } from "./processes.mjs";
import { violate } from "./world.mjs";

/** How long a thawed replica may keep a conversation another one took over open. */
const THAW_GRACE_MS = 3_000;

export class ConversationWatch {
  /** `volume`: where the conversations live; `fleet`: whose replicas the harnesses belong to. */
  constructor(volume, fleet) {
    this.volume = volume;
    this.fleet = fleet;
    this.samples = 0;
    /** Samples in which some owner's tree had live harnesses of two replicas or more. */
    this.sharedSamples = 0;
    /** The most harnesses seen at once in one tree, and of how many replicas. */
    this.most = { harnesses: 0, replicas: 0 };
    /** Trees ever shared by harnesses of several replicas. */
    this.sharedTrees = new Set();
    /** Conversations seen open in two processes, with the first evidence of each. */
    this.doubled = new Map();
    this.homes = new Map();
    /** Conversations open in a frozen replica's harness and in another one's at once. */
    this.frozenOverlap = new Set();
    /** The same, just after the frozen replica thawed: conversation → first seen (ms). */
    this.thawOverlap = new Map();
    /** The longest such overlap seen after a thaw, in ms. */
    this.longestThawOverlapMs = 0;
    this.timer = undefined;
  }

  start(everyMs = 250) {
    this.timer = setInterval(() => this.sample(), everyMs);
    this.timer.unref();
  }

  stop() {
    clearInterval(this.timer);
  }

  /** The replica a process descends from (its server's pid), or "orphan". */
  owner(pid, byPid) {
    const servers = new Map(this.fleet.replicas.filter((r) => r.server).map((r) => [r.server.pid, r.life]));
    for (let p = byPid.get(pid), hops = 0; p && hops < 20; p = byPid.get(p.ppid), hops++) {
      if (servers.has(p.ppid)) return servers.get(p.ppid);
    }
    return "orphan";
  }

  sample() {
    this.samples += 1;
    const table = processTable();
    const byPid = new Map(table.map((p) => [p.pid, p]));
    const byDb = new Map();
    const byHome = new Map();
    for (const p of table) {
      if (p.comm !== "localharness" || p.state === "Z") continue;
      // A child the harness forks for a command is named like it, with all its descriptors,
      // until its exec closes them (close-on-exec): not a second harness.
      if (byPid.get(p.ppid)?.comm === "localharness") continue;
      const key = `${p.pid}/${p.start}`;
      if (!this.homes.has(key)) this.homes.set(key, environ(p.pid, "HOME"));
      const home = this.homes.get(key);
      const replica = this.owner(p.pid, byPid);
      if (home) byHome.set(home, [...(byHome.get(home) ?? []), replica]);
      let fds = [];
      try {
        fds = fs.readdirSync(`/proc/${p.pid}/fd`);
      } catch {
        continue;
      }
      for (const fd of fds) {
        try {
          const target = fs.readlinkSync(`/proc/${p.pid}/fd/${fd}`);
          if (target.startsWith(this.volume) && target.endsWith(".db")) {
            const list = byDb.get(target) ?? [];
            if (!list.some((x) => x.pid === p.pid)) list.push({ pid: p.pid, replica, stopped: p.state === "T", thawed: this.justThawed(replica) });
            byDb.set(target, list);
          }
        } catch {
          /* closed meanwhile */
        }
      }
    }
    let shared = false;
    for (const [home, replicas] of byHome) {
      const distinct = new Set(replicas).size;
      if (replicas.length > this.most.harnesses) this.most = { harnesses: replicas.length, replicas: distinct };
      if (distinct > 1) {
        shared = true;
        this.sharedTrees.add(home);
      }
    }
    if (shared) this.sharedSamples += 1;
    for (const [db, holders] of byDb) {
      if (holders.length < 2) continue;
      // A holder frozen with its replica (SIGSTOP) drives nothing while frozen: counted apart;
      // once thawed, its replica must stop it before it writes (then it shows here, running).
      if (holders.filter((h) => !h.stopped).length < 2) {
        this.frozenOverlap.add(db);
        continue;
      }
      // A frozen replica's harness runs again the moment it thaws, with its server: the server
      // finds its lease run out and closes the conversation at once, so for that moment it is
      // open twice. Allowed for THAW_GRACE_MS after the thaw, never longer.
      if (holders.filter((h) => !h.stopped && !h.thawed).length < 2) {
        const since = this.thawOverlap.get(db) ?? Date.now();
        this.thawOverlap.set(db, since);
        this.longestThawOverlapMs = Math.max(this.longestThawOverlapMs, Date.now() - since);
        continue;
      }
      const seen = this.doubled.get(db);
      if (seen) {
        seen.samples += 1;
        continue;
      }
      const evidence = { at: new Date().toISOString(), holders: holders.map((h) => `pid ${h.pid} of ${h.replica}`).join(", "), samples: 1 };
      this.doubled.set(db, evidence);
      violate(`conversation ${db.split("/").at(-1)} is open in ${holders.length} harness processes at once: ${evidence.holders} (${db})`);
    }
  }

  /** Whether replica life `label` thawed from a freeze less than THAW_GRACE_MS ago. */
  justThawed(label) {
    const r = this.fleet.replicas.find((x) => x.life === label);
    return r?.thawedAt !== undefined && Date.now() - r.thawedAt < THAW_GRACE_MS;
  }

  /** What the sampler saw, for the report. */
  summary() {
    return {
      samples: this.samples,
      sharedTreeSamples: this.sharedSamples,
      sharedTrees: this.sharedTrees.size,
      mostHarnessesInOneTree: this.most,
      openWhileAHolderWasFrozen: this.frozenOverlap.size,
      openJustAfterAThaw: this.thawOverlap.size,
      longestOverlapAfterAThawMs: this.longestThawOverlapMs,
      conversationsOpenTwice: [...this.doubled].map(([db, e]) => ({ db, ...e })),
    };
  }
}

/** SQLite's integrity check of every conversation file under `root` (every process stopped). */
export function checkConversationFiles(root) {
  const files = [...find(root, (name) => name.endsWith(".db"))];
  if (!files.length) return { files: 0, bad: [] };
  const script = `
import json, sqlite3, sys
bad = []
for path in json.load(sys.stdin):
    try:
        db = sqlite3.connect(path)
        result = [row[0] for row in db.execute("PRAGMA integrity_check")]
        db.close()
        if result != ["ok"]:
            bad.append([path, "; ".join(result[:3])])
    except Exception as e:
        bad.append([path, str(e)])
print(json.dumps(bad))
`;
  const out = execFileSync("python3", ["-c", script], { input: JSON.stringify(files), encoding: "utf8" });
  const bad = JSON.parse(out);
  for (const [file, why] of bad) violate(`conversation file ${file} fails SQLite's integrity check: ${why}`);
  return { files: files.length, bad };
}
