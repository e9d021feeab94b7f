// The faults, one at a time at random moments (reproducibly from the seed). With one server:
// SIGKILL of a harness and of a sandbox launcher, SIGSTOP of a harness past the stall timeout,
// the server restarted by SIGTERM and by SIGKILL, the volume full for a while. With replicas,
// also: a replica killed (SIGKILL) or stopped (SIGTERM) and restarted with its id, a replica
// added then removed (nginx reloaded with streams open each time), and a replica frozen
// (SIGSTOP of its server and every process below it, as a paused pod) for longer than the
// lease lifetime, then thawed. For the replica faults a probe measures what a user of a thread
// the victim served sees: how long until a message on it is answered again, and the errors met.
import fs from "node:fs";
import { LEASE_TTL_SECS } from "./fleet.mjs";
import { descendants } from "./processes.mjs";
import { count, sleep, violate, world } from "./world.mjs";

/** Every kind of fault (which apply depends on the fleet: see `kinds`). */
const KINDS = ["kill-harness", "kill-launcher", "stall-harness", "volume-full", "restart-term", "restart-kill", "kill-replica", "term-replica", "freeze-replica", "add-remove-replica"];

export class Faults {
  constructor({ fleet, users, rnd, minutes, only }) {
    this.fleet = fleet;
    /** The kinds allowed (all when unset), to replay one finding. */
    this.only = only;
    const unknown = only?.filter((k) => !KINDS.includes(k)) ?? [];
    if (unknown.length) throw new Error(`unknown fault kind(s) ${unknown.join(", ")}; the kinds: ${KINDS.join(", ")}`);
    this.users = users;
    this.rnd = rnd;
    this.minutes = minutes;
    /** What each probe measured: { kind, ms, seen }. */
    this.probes = [];
    /** The probes' threads (their messages are checked like the users'). */
    this.threads = [];
  }

  kinds() {
    const all = this.allKinds();
    return this.only ? all.filter((k) => this.only.includes(k)) : all;
  }

  allKinds() {
    const f = this.fleet;
    const base = ["kill-harness", "kill-launcher", "stall-harness", ...(f.fillable ? ["volume-full"] : [])];
    if (!f.several) {
      // A server restarts only after a third of the soak, so each life is long enough for a slow
      // leak to show in its figures (unless the faults were chosen, to replay a finding).
      const old = this.only || Date.now() - f.replicas[0].since >= (this.minutes * 60_000) / 3;
      return [...base, ...(old ? ["restart-term", "restart-kill"] : [])];
    }
    return [...base, "kill-replica", "term-replica", "freeze-replica", "add-remove-replica"];
  }

  async run(deadline) {
    await sleep(20_000);
    while (Date.now() < deadline - 20_000) {
      await this.one();
      await sleep(this.rnd.int(10_000, 25_000));
    }
  }

  async one() {
    const kinds = this.kinds();
    // With `--faults`, none of the allowed kinds may fit yet (a restart waits a third of the soak).
    if (!kinds.length) return;
    const kind = this.rnd.pick(kinds);
    count(world.tally.faults, kind);
    console.log(`fault: ${kind} at ${Math.round((Date.now() - world.started) / 1000)} s`);
    world.faultClock += 1;
    world.faultActive = true;
    try {
      await this.make(kind);
    } catch (err) {
      violate(`the fault ${kind} could not be made: ${err?.stack ?? err}`);
    } finally {
      // Runs that began during the fault may end a little after it.
      await sleep(2_000);
      world.faultActive = false;
      world.faultClock += 1;
    }
  }

  signal(list, sig) {
    const target = list.length ? this.rnd.pick(list) : undefined;
    if (target) {
      try {
        process.kill(target.pid, sig);
      } catch {
        /* gone meanwhile */
      }
    }
    return target;
  }

  /** A replica other than the last one standing, so that users always have one. */
  victim() {
    const up = this.fleet.up();
    return up.length > 1 ? this.rnd.pick(up) : undefined;
  }

  async make(kind) {
    const f = this.fleet;
    switch (kind) {
      case "kill-harness":
        return void this.signal(f.harnesses(), "SIGKILL");
      case "kill-launcher":
        return void this.signal(f.launchers(), "SIGKILL");
      case "stall-harness": {
        const target = this.signal(f.harnesses(), "SIGSTOP");
        // Past the stall timeout (8 s): the server ends a turn in flight there and kills the process.
        await sleep(10_000);
        if (target) {
          try {
            process.kill(target.pid, "SIGCONT");
          } catch {
            /* the server killed it */
          }
        }
        return;
      }
      case "restart-term":
      case "restart-kill":
        world.losses += 1;
        return f.restart(kind === "restart-kill");
      case "volume-full":
        this.fill();
        await sleep(this.rnd.int(8_000, 15_000));
        fs.rmSync(f.filler, { force: true });
        return;
      case "kill-replica":
      case "term-replica": {
        const r = this.victim();
        if (!r) return;
        const probe = await this.probe(kind, r);
        const down = this.rnd.int(2_000, 8_000);
        const lost = kind === "kill-replica" ? f.kill(r, down) : f.term(r, down);
        await Promise.all([lost, probe?.()]);
        return;
      }
      case "freeze-replica": {
        const r = this.victim();
        if (!r) return;
        const probe = await this.probe(kind, r);
        const frozen = [r.server.pid, ...descendants(r.server.pid).map((p) => p.pid)];
        r.state = "frozen";
        world.losses += 1;
        for (const pid of frozen) stop(pid, "SIGSTOP");
        const measured = probe?.();
        // Longer than a lease lives; then another replica is asked for the probe's thread
        // straight (as a client of another proxy would), takes it over, and the thawed replica
        // must find its lease gone and stop the thread (LEASE_LOST), never drive it on.
        await sleep(LEASE_TTL_SECS * 1000 + 1_500);
        const other = f.up().find((x) => x !== r);
        if (this.probed && other) {
          const thread = this.probed;
          const message = { id: `u-takeover-${thread.id}`, role: "user", content: `s-say ${thread.id}-takeover` };
          thread.messages.push(message);
          const rec = await this.users.post(thread, { via: other });
          const end = rec.events?.find((e) => e.type === "RUN_FINISHED" || e.type === "RUN_ERROR");
          count(world.tally.faults, `frozen replica's thread taken over: ${end?.type === "RUN_FINISHED" ? "answered" : end?.code ?? rec.status ?? "cut"}`);
          if (end?.type === "RUN_FINISHED") thread.answered.add(message.id);
        }
        await sleep(this.rnd.int(0, 3_000));
        for (const pid of frozen) stop(pid, "SIGCONT");
        r.thawedAt = Date.now();
        r.state = "up";
        await measured;
        return;
      }
      case "add-remove-replica": {
        const { r, reload } = await f.add();
        count(world.tally.faults, "nginx reloads");
        world.tally.oldWorkers = (world.tally.oldWorkers ?? 0) + reload.oldWorkers;
        await sleep(this.rnd.int(15_000, 30_000));
        const probe = await this.probe(kind, r);
        const removed = f.remove(r);
        count(world.tally.faults, "nginx reloads");
        await Promise.all([removed, probe?.()]);
        return;
      }
    }
  }

  /**
   * Finds (or makes) a thread nginx routes to replica `r` and returns a function that, from the
   * moment it is called, sends a message on it every quarter second until one is answered:
   * what a user of the victim's threads sees. Undefined if no thread was found on `r`.
   */
  async probe(kind, r) {
    const upstream = `127.0.0.1:${r.port}`;
    let thread;
    for (let i = 0; i < 24 && !thread; i++) {
      const candidate = this.users.newThread(0);
      this.threads.push(candidate);
      const end = await this.users.turn(candidate, `s-say ${candidate.id}-probe-${i}`, world.faultClock, this.rnd);
      const routed = candidate.lastUpstream;
      if (end?.type === "RUN_FINISHED" && routed === upstream) thread = candidate;
    }
    this.probed = thread;
    if (!thread) return undefined;
    return async () => {
      const started = Date.now();
      const seen = {};
      for (let i = 0; Date.now() - started < 90_000; i++) {
        const message = { id: `u-probe-${i}-${thread.id}`, role: "user", content: `s-say ${thread.id}-after-${i}` };
        thread.messages.push(message);
        const rec = await this.users.post(thread, {});
        const end = rec.events?.find((e) => e.type === "RUN_FINISHED" || e.type === "RUN_ERROR");
        const what = end?.type === "RUN_ERROR" ? end.code : rec.status !== 200 && rec.status ? `HTTP ${rec.status}` : rec.cut && !end ? "cut" : undefined;
        if (end?.type === "RUN_FINISHED") {
          thread.answered.add(message.id);
          this.probes.push({ kind, ms: Date.now() - started, seen, by: rec.upstream });
          return;
        }
        if (what) seen[what] = (seen[what] ?? 0) + 1;
        await sleep(250);
      }
      this.probes.push({ kind, ms: undefined, seen });
      violate(`${kind}: a message on ${thread.id} (a thread of ${r.id}) was not answered within 90 s: ${JSON.stringify(seen)}`);
    };
  }

  /** Writes zeros until the volume's tmpfs has no byte left (others write meanwhile, so no size is computed ahead). */
  fill() {
    const fd = fs.openSync(this.fleet.filler, "w");
    const block = Buffer.alloc(1 << 20);
    try {
      for (;;) fs.writeSync(fd, block);
    } catch (err) {
      if (err.code !== "ENOSPC") throw err;
    } finally {
      fs.closeSync(fd);
    }
  }

  /** Per fault kind: probes, the median and longest wait, and what the probe met meanwhile. */
  summary() {
    const rows = [];
    for (const kind of [...new Set(this.probes.map((p) => p.kind))]) {
      const list = this.probes.filter((p) => p.kind === kind);
      const times = list.map((p) => p.ms).filter((ms) => ms !== undefined).sort((a, b) => a - b);
      const seen = {};
      for (const p of list) for (const [k, v] of Object.entries(p.seen)) seen[k] = (seen[k] ?? 0) + v;
      rows.push({ kind, probes: list.length, medianMs: times[Math.floor(times.length / 2)], maxMs: times.at(-1), seen });
    }
    return rows;
  }
}

function stop(pid, sig) {
  try {
    process.kill(pid, sig);
  } catch {
    /* gone meanwhile */
  }
}
