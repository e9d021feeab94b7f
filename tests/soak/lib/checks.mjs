// The checks that read the model's log and the machine: every user message reached the model
// exactly once, no process outlives the server that started it, no sandbox root is left.
import fs from "node:fs";
import path from "node:path";
import { descendants, isLauncher, isHarness, isOurKind, ours, processTable } from "./processes.mjs";
import { TAG, violate, world } from "./world.mjs";

export class ModelLog {
  constructor(model) {
    this.model = model;
    /** Tags of the user messages the model has seen, across every take of its log. */
    this.seen = new Set();
    this.doubled = new Set();
    /** Per tag, the requests in which it was the newest user text (a turn asked for it). */
    this.asks = new Map();
    this.requests = 0;
  }

  /**
   * Reads (and empties) the model's log. Every request carries its thread's whole conversation,
   * so a message the harness was given twice shows as two user contents with its tag in one
   * request; a request the harness retries (a model error) or follows up (a tool's result)
   * carries it once. A message that two drivers sent would show as two requests asking for it
   * (it is the newest user text in both): counted, and a violation unless a retry explains it.
   */
  async take() {
    const requests = await this.model.takeRequests();
    this.requests += requests.length;
    for (const r of requests) {
      const counts = new Map();
      const order = [];
      const contents = r.body?.contents ?? [];
      for (const content of contents) {
        if (content.role !== "user") continue;
        const text = (content.parts ?? []).map((p) => (typeof p.text === "string" ? p.text : "")).join("");
        for (const m of new Set([...text.matchAll(TAG)].map((m) => m[1]))) counts.set(m, (counts.get(m) ?? 0) + 1), order.push(m);
      }
      for (const [tag, n] of counts) {
        this.seen.add(tag);
        if (n > 1 && !this.doubled.has(tag)) {
          this.doubled.add(tag);
          violate(`message ${tag} (${world.journal.get(tag)}) is in the conversation the model was sent ${n} times (its user messages: ${order.map((t) => `${t} (${world.journal.get(t)?.split(" on ")[0]})`).join(" ")})`);
        }
      }
      const last = contents.at(-1);
      if (last?.role === "user") {
        const text = (last.parts ?? []).map((p) => (typeof p.text === "string" ? p.text : "")).join("");
        for (const m of text.matchAll(TAG)) {
          const entry = this.asks.get(m[1]) ?? { n: 0, statuses: [], kind: m[0].split(" ")[0] };
          entry.n += 1;
          entry.statuses.push(r.status);
          this.asks.set(m[1], entry);
        }
      }
    }
  }

  /**
   * Messages the model was asked to answer more than once. A retry after a model error (429,
   * 500, 503) or a request the model never answered (the stall fault's hang) is the harness's
   * own and explained; two successful asks are two turns for one message.
   */
  askedTwice() {
    const twice = [];
    for (const [tag, e] of this.asks) {
      if (e.n < 2) continue;
      const answered = e.statuses.filter((s) => s === 200).length;
      twice.push({ tag, ...e, answered, what: world.journal.get(tag) });
      if (answered > 1 && e.kind !== "s-hang") violate(`message ${tag} (${world.journal.get(tag)}) was asked of the model ${e.n} times (${answered} answered; statuses ${e.statuses.join(", ")})`);
    }
    return twice;
  }

  /** Every message a client saw answered reached the model. */
  answeredReached(threads) {
    let answered = 0;
    for (const thread of threads) {
      for (const message of thread.messages.filter((m) => m.role === "user" && thread.answered.has(m.id))) {
        const tag = message.content.match(/(u\d+-\d+|soak-[\w-]+)/)?.[1];
        answered += 1;
        if (tag && !this.seen.has(tag)) violate(`message ${tag} ("${message.content}" on ${thread.id}) was answered but never reached the model`);
      }
    }
    return answered;
  }
}

/**
 * Every minute: harnesses, launchers and agent commands must belong to a running replica, and
 * a launcher must hold a harness; a process found astray twice in a row (a minute apart) leaked.
 */
export class Leaks {
  constructor(fleet, dir) {
    this.fleet = fleet;
    this.dir = dir;
    this.astray = new Map();
  }

  check() {
    if (this.fleet.restarting) return;
    const table = processTable();
    const live = new Set(this.fleet.replicas.filter((r) => r.state === "up" || r.state === "frozen").flatMap((r) => descendants(r.server.pid, table).map((p) => p.pid)));
    const now = new Map();
    for (const p of table) {
      if (!isOurKind(p)) continue;
      const key = `${p.pid}/${p.start}`;
      let why;
      if (!live.has(p.pid)) {
        if (!ours(p, this.dir)) continue;
        why = "outlived the server that started it";
      } else if (isLauncher(p) && !descendants(p.pid, table).some(isHarness)) {
        why = "is a launcher without a harness";
      } else continue;
      if (this.astray.has(key)) violate(`process ${p.pid} (${p.cmdline.slice(0, 80)}) ${why}, for a minute now`);
      now.set(key, why);
    }
    this.astray = now;
  }

  /** Processes of the soak's kind still running (every server stopped: none may be). */
  leftAfterStop() {
    return processTable().filter((p) => isOurKind(p) && ours(p, this.dir));
  }

  /** At the very end, every server stopped: nothing of the soak's kind may run. */
  final() {
    const left = this.leftAfterStop();
    if (left.length) violate(`processes left after every server stopped: ${left.map((p) => `${p.pid} (${p.cmdline.slice(0, 60)})`).join(", ")}`);
    return left.length;
  }
}

/** Sandbox roots in the servers' temporary directory (a launcher's `hakoniwa-*` or the server's own kind). */
export function sandboxRoots(tmp) {
  try {
    return fs.readdirSync(tmp).filter((name) => /^(hakoniwa-|agui-sandbox-)/.test(name)).map((name) => path.join(tmp, name));
  } catch {
    return [];
  }
}
