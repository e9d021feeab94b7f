// The soak: the release server, the real harness and the scripted model, driven for N minutes by
// M simulated users acting at random (reproducibly from the seed) while faults are injected; the
// invariants are checked every minute and at the end. Run by `cargo xtask soak` (which builds the
// binaries and sets AGUI_BIN, GEMINI_SCRIPT_BIN and ANTIGRAVITY_HARNESS_PATH).
//
//   node tests/soak/soak.mjs --minutes N [--seed S] [--users M] [--out FILE]
//
// Users (each its own identity, so each owner has its own confined harness processes): new
// threads and several turns on them; a frontend tool parked then answered now, late or never; a
// question and a tool approval (for `list_dir`, and for `run_command`, whose command a fault
// may catch running) answered now, late or never; stop mid-turn; a client that
// disconnects mid-stream then reconnects; connect; delete; a 12 MB reply in 512 KB chunks;
// malformed requests; replies the model fails (500), rate-limits (429, retried by the harness)
// or never sends (the stall timeout ends the turn).
// Faults: SIGKILL of a harness process and of a sandbox launcher, SIGSTOP of a harness past the
// stall timeout, the server restarted by SIGTERM and by SIGKILL (once a server has lived a third
// of the soak, so each life is long enough to show a slow leak), and (as root, on a size-limited
// tmpfs) a full save dir for a while.
// Checked every minute: no user message reached the model twice; no harness, launcher or agent
// command outlives the server that started it; no launcher without its harness. At the end, also:
// every run ended with exactly one terminal event (a run cut by a killed server excepted) and
// without an error unless a fault or the script explains it; every answered message reached the
// model; every thread answers a last message and its connect shows every message it answered;
// nothing is left once the server stops; the server's RSS, open file descriptors, OS threads,
// async tasks and sessions, and the save dir's size, stay flat after warm-up (bounds printed).
import fs from "node:fs";
import path from "node:path";
import { execFileSync } from "node:child_process";
import { randomUUID } from "node:crypto";
import { decodeSse } from "../e2e/lib/client.mjs";
import { startModel, startServer, tempDir } from "../e2e/lib/procs.mjs";
import { find } from "../e2e/lib/workspace.mjs";

// ------------------------------------------------------------------ options and randomness
function options() {
  const args = process.argv.slice(2);
  const value = (name, fallback) => {
    const i = args.indexOf(`--${name}`);
    return i >= 0 ? args[i + 1] : fallback;
  };
  const minutes = Number(value("minutes", "3"));
  const users = Number(value("users", "4"));
  const seed = Number(value("seed", String(Date.now() % 1_000_000)));
  if (!(minutes > 0) || !(users > 0) || !Number.isInteger(users) || !Number.isInteger(seed)) {
    throw new Error("usage: soak.mjs --minutes N (> 0) [--seed S (integer)] [--users M (integer > 0)] [--out FILE]");
  }
  return { minutes, users, seed, out: value("out", undefined) };
}

/** mulberry32: a small seeded generator, so a seed replays the same choices. */
function generator(seed) {
  let a = seed >>> 0;
  const next = () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
  return { next, pick: (list) => list[Math.floor(next() * list.length)], int: (lo, hi) => lo + Math.floor(next() * (hi - lo + 1)) };
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const SLOW = Array.from({ length: 30 }, (_, i) => `w${i} `).join("");
/** 12 MB of text, sent by the model in 512 KB chunks. */
const BIG = "lorem ".repeat(2_000_000);
const BIG_CHUNK = 512 * 1024;
/** The agent command run within its turn. Its odd length marks it as the soak's. */
const COMMAND = "sleep 4.5";
/**
 * The agent command left running in the background: the run ends with the model's reply, and
 * the harness's answer to the command's end is a turn of its own.
 */
const COMMAND_LEFT_RUNNING = "sleep 2.75";
const TOOLS = [{ name: "set_color", description: "Sets the page color.", parameters: { type: "object", properties: { color: { type: "string" } }, required: ["color"] } }];
const SCRIPT = {
  replies: [
    { name: "say", repeat: "forever", match: { user_text_contains: "s-say", last_part: "text" }, reply: { text: "Echo: {{user_text}}" } },
    { name: "slow", repeat: "forever", match: { user_text_contains: "s-slow", last_part: "text" }, reply: { text: SLOW, chunking: { words: 1 }, delay_ms: 100 } },
    { name: "park", repeat: "forever", match: { user_text_contains: "s-park", last_part: "text" }, reply: { text: "Setting it.", calls: [{ name: "set_color", args: { color: "teal" } }] } },
    { name: "answered", repeat: "forever", match: { function_response: "set_color" }, reply: { text: "The page answered." } },
    { name: "ask", repeat: "forever", match: { user_text_contains: "s-ask", last_part: "text" }, reply: { text: "One question first.", calls: [{ name: "ask_question", args: { questions: [{ question: "Which fruit?", options: ["Apple", "Pear"], is_multi_select: false }] } }] } },
    { name: "asked", repeat: "forever", match: { function_response: "ask_question" }, reply: { text: "Noted." } },
    { name: "list", repeat: "forever", match: { user_text_contains: "s-list", last_part: "text" }, reply: { calls: [{ name: "list_dir", args: { DirectoryPath: "{{workspace}}" } }] } },
    { name: "listed", repeat: "forever", match: { function_response: "list_dir" }, reply: { text: "Listed." } },
    { name: "command", repeat: "forever", match: { user_text_contains: "s-cmd", last_part: "text" }, reply: { calls: [{ name: "run_command", args: { CommandLine: COMMAND, Cwd: "{{workspace}}", WaitMsBeforeAsync: 30_000 } }] } },
    { name: "command left running", repeat: "forever", match: { user_text_contains: "s-bgcmd", last_part: "text" }, reply: { calls: [{ name: "run_command", args: { CommandLine: COMMAND_LEFT_RUNNING, Cwd: "{{workspace}}", WaitMsBeforeAsync: 100 } }] } },
    { name: "command runs", repeat: "forever", match: { function_response: "run_command" }, reply: { text: "It runs on." } },
    { name: "big", repeat: "forever", match: { user_text_contains: "s-big", last_part: "text" }, reply: { text: BIG, chunking: { chars: BIG_CHUNK } } },
    { name: "fail", repeat: "forever", match: { user_text_contains: "s-fail", last_part: "text" }, reply: { error: { code: 500, message: "Internal error." } } },
    { name: "limited", match: { user_text_contains: "s-limit", last_part: "text" }, reply: { error: { code: 429 } } },
    { name: "after the limit", repeat: "forever", match: { user_text_contains: "s-limit", last_part: "text" }, reply: { text: "Recovered." } },
    { name: "hang", repeat: "forever", match: { user_text_contains: "s-hang", last_part: "text" }, reply: { text: "Too late.", hang: 20_000 } },
  ],
  default: { text: "No scripted answer." },
};
/** Errors a fault leaves behind on a thread's next run, whenever that comes. */
const AFTER_A_FAULT = ["TURN_INTERRUPTED", "HARNESS_LOST", "TURN_STALLED", "CONVERSATION_LOST"];

// -------------------------------------------------------------------------- the world
const opts = options();
/** One generator per user and one for the faults, so a seed replays each one's choices whatever the timing. */
const userRnd = (n) => generator(opts.seed * 1000 + n + 1);
const faultRnd = generator(opts.seed * 1000);
const dir = tempDir("soak");
const saveDir = path.join(dir, "s");
const FILLER = path.join(saveDir, ".soak-filler");
const identities = Array.from({ length: opts.users }, (_, n) => ({ name: `u${n}`, token: `soak-${n}-${randomUUID()}` }));
// Threads hibernate and idle harnesses stop within seconds, so the live set settles early and
// what keeps growing after warm-up is a leak, not load (and hibernation and resume run often).
const ARGS = [
  "--api-key", "soak-key",
  "--auth-tokens", identities.map((i) => `${i.name}=${i.token}`).join(","),
  "--builtin-tools", "list_dir,ask_question,run_command", "--behavior", "interactive", "--tool-approval",
  "--turn-stall-timeout-secs", "8", "--hibernate-after-secs", "10", "--harness-idle-grace-secs", "5",
];
/** What each user's action was, by its tag: a violation names the actions behind it. */
const journal = new Map();
const started = Date.now();
const tally = { actions: {}, faults: {}, runs: 0, cutByServer: 0, faultedErrors: 0 };
const violations = [];
const samples = [];
const count = (map, key) => (map[key] = (map[key] ?? 0) + 1);
const violate = (what) => {
  violations.push({ at: Date.now(), what });
  console.error(`VIOLATION: ${what}`);
};

let model;
let server;
/** Bumped on every server (re)start: a run that began under an earlier one may be cut. */
let epoch = 0;
let restarting = false;
/** Bumped when a fault starts and when it ends: an action that saw it change may fail. */
let faultClock = 0;
let faultActive = false;
/** Whether the save dir can be filled (root, on a tmpfs of its own). */
let fillable = false;

/** When the running server started: it is restarted only once it has lived a third of the soak. */
let serverSince = 0;

async function start() {
  server = await startServer({ label: `soak server #${epoch + 1}`, dir, args: ["--gemini-base-url", model.url, ...ARGS] });
  serverSince = Date.now();
  epoch += 1;
}

const auth = (thread) => ({ authorization: `Bearer ${thread.token}` });

/** One thread of a user: its id, its owner's token and the messages a client that never left holds. */
function newThread(user) {
  return { id: `soak-${user}-${randomUUID().slice(0, 8)}`, token: identities[user].token, messages: [], answered: new Set() };
}

/** Events of an SSE text, complete ones only (a cut stream may end inside one). */
const events = (text) => decodeSse(text.slice(0, text.lastIndexOf("\n\n") + 2));

/** POSTs a run (or a connect) and reads its stream to the end (or aborts it at `abortAt` events). */
async function post(thread, { route = "", body, abortAt, resume } = {}) {
  const startedEpoch = epoch;
  const input = body ?? { threadId: thread.id, runId: `run-${randomUUID()}`, messages: thread.messages, tools: TOOLS, context: [], state: {}, forwardedProps: {}, ...(resume ? { resume } : {}) };
  const controller = new AbortController();
  let res;
  try {
    res = await fetch(`${server.url}${route}`, {
      method: "POST",
      headers: { "content-type": "application/json", accept: "text/event-stream", ...auth(thread) },
      body: typeof input === "string" ? input : JSON.stringify(input),
      signal: controller.signal,
    });
  } catch (err) {
    return { cut: true, epoch: startedEpoch, error: String(err) };
  }
  if (res.status !== 200) return { status: res.status, text: await res.text(), epoch: startedEpoch };
  const decoder = new TextDecoder();
  let text = "";
  try {
    for await (const chunk of res.body) {
      text += decoder.decode(chunk, { stream: true });
      if (abortAt !== undefined && events(text).length >= abortAt) {
        controller.abort();
        return { aborted: true, events: events(text), epoch: startedEpoch };
      }
    }
  } catch (err) {
    return { cut: true, events: events(text), epoch: startedEpoch, error: String(err) };
  }
  return { status: 200, events: events(text), epoch: startedEpoch };
}

/** Checks one finished stream: exactly one terminal event, unless its server was killed meanwhile. */
function terminals(rec, what) {
  tally.runs += 1;
  if (rec.cut || rec.epoch !== epoch || restarting) {
    tally.cutByServer += 1;
    return undefined;
  }
  const ends = rec.events.filter((e) => e.type === "RUN_FINISHED" || e.type === "RUN_ERROR");
  if (ends.length !== 1) violate(`${what}: ${ends.length} terminal events (${rec.events.map((e) => e.type).join(" ")})`);
  return ends.at(-1);
}

/** Whether a fault (or a restart) ran during an action that began at `since`: it may explain a failure. */
const faulted = (since) => since !== faultClock || faultActive || restarting;

/**
 * Judges an error ending: the codes a fault leaves behind are always allowed, `expected` ones
 * when the script asked for them, any when a fault ran during the action.
 */
function judge(end, what, since, expected = []) {
  if (end?.type !== "RUN_ERROR" || AFTER_A_FAULT.includes(end.code) || expected.includes(end.code)) return;
  if (faulted(since)) {
    tally.faultedErrors += 1;
    return;
  }
  violate(`${what}: RUN_ERROR ${end.code} ${end.message}`);
}

/** Judges a refused request the same way: a refusal during a fault is explained by it. */
function judgeStatus(rec, what, since) {
  if (!rec.status || rec.status === 200) return;
  if (faulted(since)) {
    tally.faultedErrors += 1;
    return;
  }
  violate(`${what} answered HTTP ${rec.status}: ${rec.text?.slice(0, 200)}`);
}

/** The answer a user gives an interrupt, or undefined to leave it open. */
function answer(interrupt, rnd) {
  if (interrupt.reason.endsWith("ask_question")) return { interruptId: interrupt.id, status: "resolved", payload: { responses: [{ selected_option_ids: ["1"] }] } };
  if (interrupt.reason.endsWith("tool_approval")) return { interruptId: interrupt.id, status: "resolved", payload: { approved: rnd.next() < 0.8 } };
  return { interruptId: interrupt.id, status: "cancelled" };
}

/**
 * Runs a user message to its end: interrupts are answered now or late (up to three rounds), or
 * left open; a frontend tool call is answered the same way. The message counts as answered
 * when the last run of the chain succeeds.
 */
async function turn(thread, words, since, rnd, expected = []) {
  const message = { id: `u-${randomUUID()}`, role: "user", content: words };
  thread.messages.push(message);
  let rec = await post(thread);
  for (let round = 0; ; round += 1) {
    judgeStatus(rec, `run on ${thread.id} (${words.slice(0, 24)})`, since);
    const end = rec.events ? terminals(rec, `run on ${thread.id} (${words.slice(0, 24)})`) : undefined;
    judge(end, `run on ${thread.id} (${words.slice(0, 24)})`, since, expected);
    if (end?.type !== "RUN_FINISHED") return end;
    const interrupts = end.outcome?.type === "interrupt" ? end.outcome.interrupts : [];
    const call = rec.events.find((e) => e.type === "TOOL_CALL_START" && e.toolCallName === "set_color");
    const pending = end.outcome?.pendingToolCallIds?.length || (call && !interrupts.length);
    if (!interrupts.length && !pending) {
      thread.answered.add(message.id);
      return end;
    }
    const when = round < 3 ? rnd.pick(["now", "now", "late", "never"]) : "never";
    count(tally.actions, `answer ${when}`);
    if (when === "never") return end;
    if (when === "late") await sleep(rnd.int(500, 4000));
    if (interrupts.length) {
      rec = await post(thread, { resume: interrupts.map((i) => answer(i, rnd)) });
    } else {
      thread.messages.push({ id: `a-${randomUUID()}`, role: "assistant", toolCalls: [{ id: call.toolCallId, type: "function", function: { name: "set_color", arguments: "{\"color\":\"teal\"}" } }] });
      // The result names no prompt's tag: after a restart it reaches the model as text (a late result).
      thread.messages.push({ id: `t-${randomUUID()}`, role: "tool", toolCallId: call.toolCallId, content: "teal" });
      rec = await post(thread);
    }
  }
}

async function remove(thread) {
  const res = await fetch(`${server.url}/threads/${encodeURIComponent(thread.id)}`, { method: "DELETE", headers: auth(thread) }).catch((err) => ({ status: 0, err }));
  return res.status;
}

// --------------------------------------------------------------------------- users
/** Each user: its live threads, and every thread it ever had (for the exactly-once check). */
async function user(n, deadline) {
  const rnd = userRnd(n);
  const threads = [newThread(n)];
  const all = [...threads];
  let k = 0;
  while (Date.now() < deadline) {
    while (restarting) await sleep(200);
    const since = faultClock;
    let action = rnd.pick(["say", "say", "say", "park", "ask", "list", "cmd", "bgcmd", "stop", "disconnect", "connect", "malformed", "fail", "limit", "delete", "hang", "big"]);
    // Big replies and stalls are rare; a user keeps at most six threads.
    if ((action === "big" || action === "hang") && rnd.next() < 0.6) action = "say";
    if (threads.length >= 6) action = "delete";
    if (action !== "delete" && rnd.next() < 0.15) threads.push(newThread(n)), all.push(threads.at(-1));
    const thread = rnd.pick(threads);
    count(tally.actions, action);
    k += 1;
    const tag = `u${n}-${k}`;
    journal.set(tag, `${action} on ${thread.id} at ${Math.round((Date.now() - started) / 1000)} s`);
    try {
      switch (action) {
        case "say":
        case "park":
        case "ask":
        case "list":
        case "cmd":
        case "bgcmd":
        case "limit":
          await turn(thread, `s-${action} ${tag}`, since, rnd);
          break;
        case "fail":
          await turn(thread, `s-fail ${tag}`, since, rnd, ["AGENT_ERROR"]);
          break;
        case "hang":
          await turn(thread, `s-hang ${tag}`, since, rnd, ["TURN_STALLED", "AGENT_ERROR"]);
          break;
        case "big": {
          // A thread of its own, deleted after: its 12 MB stay out of the other threads' history.
          const big = newThread(n);
          all.push(big);
          const end = await turn(big, `s-big ${tag}`, since, rnd);
          if (end?.type === "RUN_FINISHED") {
            const rec = await post(big, { route: "/connect" });
            const reply = rec.events?.find((e) => e.type === "MESSAGES_SNAPSHOT")?.messages?.find((m) => m.role === "assistant");
            if (rec.status === 200 && reply?.content?.length !== BIG.length && !faulted(since)) violate(`the 12 MB reply on ${big.id} came back from connect as ${reply?.content?.length} characters`);
          }
          const status = await remove(big);
          if (status !== 200 && status !== 404 && !faulted(since)) violate(`deleting ${big.id} answered HTTP ${status}`);
          break;
        }
        case "stop": {
          const message = { id: `u-${randomUUID()}`, role: "user", content: `s-slow ${tag}` };
          thread.messages.push(message);
          const running = post(thread);
          await sleep(rnd.int(300, 1200));
          await fetch(`${server.url}/stop`, { method: "POST", headers: { "content-type": "application/json", ...auth(thread) }, body: JSON.stringify({ threadId: thread.id }) }).catch(() => {});
          // A stop may come before the message reached the model: it is not counted as answered.
          const rec = await running;
          if (rec.events) judge(terminals(rec, `stopped run on ${thread.id}`), `stopped run on ${thread.id}`, since);
          break;
        }
        case "disconnect": {
          const message = { id: `u-${randomUUID()}`, role: "user", content: `s-slow ${tag}` };
          thread.messages.push(message);
          await post(thread, { abortAt: rnd.int(2, 8) });
          // The turn goes on detached; a connect shows it through to its end.
          const rec = await post(thread, { route: "/connect" });
          const end = rec.events ? terminals(rec, `connect after a disconnect on ${thread.id}`) : undefined;
          judge(end, `connect after a disconnect on ${thread.id}`, since);
          // Answered when the reply's last word shows, in the history or streamed live (a connect
          // to a turn a fault ended shows the history and finishes too).
          const shown = rec.events?.some((e) => (e.type === "TEXT_MESSAGE_CONTENT" && e.delta.includes("w29")) || (e.type === "MESSAGES_SNAPSHOT" && e.messages.some((m, i) => m.role === "assistant" && String(m.content).includes("w29") && e.messages.slice(0, i).some((u) => u.id === message.id))));
          if (end?.type === "RUN_FINISHED" && shown) thread.answered.add(message.id);
          break;
        }
        case "connect": {
          const rec = await post(thread, { route: "/connect" });
          if (rec.status === 404) break; // a thread whose first run was cut: nothing to show yet
          judgeStatus(rec, `connect on ${thread.id}`, since);
          if (rec.events) judge(terminals(rec, `connect on ${thread.id}`), `connect on ${thread.id}`, since);
          break;
        }
        case "delete": {
          if (threads.length < 2) break;
          const gone = threads.splice(Math.floor(rnd.next() * threads.length), 1)[0];
          const status = await remove(gone);
          if (status !== 200 && status !== 404 && !faulted(since)) violate(`deleting ${gone.id} answered HTTP ${status}`);
          if (status === 200) {
            const rec = await post(gone, { route: "/connect" });
            if (rec.status !== 404 && !faulted(since)) violate(`${gone.id} was deleted but connect answers ${rec.status}`);
          }
          gone.deleted = true;
          break;
        }
        case "malformed": {
          const bad = rnd.pick(["{not json", JSON.stringify({ threadId: "", messages: 3 }), JSON.stringify({ threadId: "x/../y", runId: "r", messages: [] })]);
          const rec = await post(thread, { body: bad });
          if (!rec.status || rec.status < 400 || rec.status >= 500) {
            if (!rec.cut) violate(`a malformed request was answered ${rec.status ?? "without a status"} (${bad.slice(0, 40)})`);
          }
          break;
        }
      }
    } catch (err) {
      violate(`user ${n} ${action}: ${err?.stack ?? err}`);
    }
    await sleep(rnd.int(50, 600));
  }
  return { threads, all };
}

// --------------------------------------------------------------------------- processes
function processTable() {
  const table = [];
  for (const entry of fs.readdirSync("/proc")) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = fs.readFileSync(`/proc/${entry}/stat`, "utf8");
      const end = stat.lastIndexOf(")");
      const fields = stat.slice(end + 2).split(" ");
      const cmdline = fs.readFileSync(`/proc/${entry}/cmdline`, "utf8").replaceAll("\0", " ").trim();
      table.push({ pid: Number(entry), ppid: Number(fields[1]), start: fields[19], comm: stat.slice(stat.indexOf("(") + 1, end), cmdline });
    } catch {
      /* exited meanwhile */
    }
  }
  return table;
}

function descendants(root, table = processTable()) {
  const found = [];
  const frontier = [root];
  while (frontier.length) {
    const parent = frontier.pop();
    for (const p of table) if (p.ppid === parent) (found.push(p), frontier.push(p.pid));
  }
  return found;
}

const isHarness = (p) => p.comm === "localharness";
const isLauncher = (p) => p.cmdline.includes("__sandbox-exec");
const isCommand = (p) => p.cmdline === COMMAND || p.cmdline === COMMAND_LEFT_RUNNING;
const harnesses = () => descendants(server.pid).filter(isHarness);
const launchers = () => descendants(server.pid).filter(isLauncher);

/** Whether a process belongs to this soak: its environment or command line names the soak's directory. */
function ours(p) {
  try {
    return p.cmdline.includes(dir) || fs.readFileSync(`/proc/${p.pid}/environ`, "utf8").includes(dir);
  } catch {
    return false;
  }
}

/** Processes found astray at the previous check: a process still astray a minute later leaked. */
let astray = new Map();
/** Every minute: harnesses, launchers and agent commands must belong to the live server, and a launcher must hold a harness. */
function leaks() {
  if (restarting) return;
  const table = processTable();
  const live = new Set(descendants(server.pid, table).map((p) => p.pid));
  const now = new Map();
  for (const p of table) {
    if (!(isHarness(p) || isLauncher(p) || isCommand(p))) continue;
    const key = `${p.pid}/${p.start}`;
    let why;
    if (!live.has(p.pid)) {
      if (!ours(p)) continue;
      why = "outlived the server that started it";
    } else if (isLauncher(p) && !descendants(p.pid, table).some(isHarness)) {
      why = "is a launcher without a harness";
    } else continue;
    if (astray.has(key)) violate(`process ${p.pid} (${p.cmdline.slice(0, 80)}) ${why}, for a minute now`);
    now.set(key, why);
  }
  astray = now;
}

// --------------------------------------------------------------------------- faults
async function fault() {
  // A server restarts only after a third of the soak, so each life is long enough for a slow
  // leak to show in its figures; the other faults come all the time.
  const restarts = Date.now() - serverSince >= (opts.minutes * 60_000) / 3 ? ["restart-term", "restart-kill"] : [];
  const kinds = ["kill-harness", "kill-launcher", "stall-harness", ...restarts, ...(fillable ? ["disk-full"] : [])];
  const kind = faultRnd.pick(kinds);
  count(tally.faults, kind);
  console.log(`fault: ${kind}`);
  faultClock += 1;
  faultActive = true;
  const signal = (list, sig) => {
    const target = list.length ? faultRnd.pick(list) : undefined;
    if (target) process.kill(target.pid, sig);
    return target;
  };
  try {
    switch (kind) {
      case "kill-harness":
        signal(harnesses(), "SIGKILL");
        break;
      case "kill-launcher":
        signal(launchers(), "SIGKILL");
        break;
      case "stall-harness": {
        const target = signal(harnesses(), "SIGSTOP");
        // Past the stall timeout (8 s): the server ends a turn in flight there and kills the process.
        await sleep(10_000);
        if (target) {
          try {
            process.kill(target.pid, "SIGCONT");
          } catch {
            /* the server killed it */
          }
        }
        break;
      }
      case "restart-term":
      case "restart-kill": {
        restarting = true;
        try {
          if (kind === "restart-kill") {
            await server.kill();
            await server.stop().catch((e) => violate(`after SIGKILL: ${e.message.split("\n")[0]}`));
          } else {
            await server.stop().catch((e) => violate(`SIGTERM stop: ${e.message.split("\n")[0]}`));
          }
          await start();
        } finally {
          restarting = false;
        }
        break;
      }
      case "disk-full": {
        fill();
        await sleep(faultRnd.int(8_000, 15_000));
        fs.rmSync(FILLER, { force: true });
        break;
      }
    }
  } catch (err) {
    violate(`the fault ${kind} could not be made: ${err?.stack ?? err}`);
  } finally {
    // Runs that began during the fault may end a little after it.
    await sleep(2_000);
    faultActive = false;
    faultClock += 1;
  }
}

/** Writes zeros until the save dir's tmpfs has no byte left (others write meanwhile, so no size is computed ahead). */
function fill() {
  const fd = fs.openSync(FILLER, "w");
  const block = Buffer.alloc(1 << 20);
  try {
    for (;;) fs.writeSync(fd, block);
  } catch (err) {
    if (err.code !== "ENOSPC") throw err;
  } finally {
    fs.closeSync(fd);
  }
}

// -------------------------------------------------------------------------- resources
/** Bytes of the files under `root` (the filler aside). */
function du(root) {
  let bytes = 0;
  for (const file of find(root, (_, full) => full !== FILLER)) {
    try {
      bytes += fs.lstatSync(file).size;
    } catch {
      /* removed meanwhile */
    }
  }
  return bytes;
}

async function sample(startedAt) {
  if (restarting) return;
  try {
    const status = fs.readFileSync(`/proc/${server.pid}/status`, "utf8");
    const field = (name) => Number(status.match(new RegExp(`^${name}:\\s+(\\d+)`, "m"))?.[1]);
    const metrics = await (await fetch(`${server.url}/metrics`, { headers: { authorization: `Bearer ${identities[0].token}` } })).text();
    const gauge = (name) => metrics.split("\n").filter((l) => l.startsWith(name)).reduce((sum, l) => sum + Number(l.split(" ").at(-1)), 0);
    samples.push({
      t: Math.round((Date.now() - startedAt) / 1000),
      epoch,
      rssMb: field("VmRSS") / 1024,
      fds: fs.readdirSync(`/proc/${server.pid}/fd`).length,
      threads: field("Threads"),
      tasks: gauge("agui_runtime_tasks"),
      sessions: gauge("agui_sessions"),
      harnesses: harnesses().length,
      saveMb: (du(saveDir) + du(path.join(dir, "w"))) / 1024 / 1024,
    });
  } catch {
    /* the server is restarting */
  }
}

/** The middle value: a level that one spike (a 12 MB reply in flight) does not move. */
function median(values) {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)];
}

/**
 * Flat after warm-up: in each server life, the last third's median within 1.5 × the first third's
 * plus a slack. The save dir (with the workspaces) is judged over the whole soak, as it outlives
 * restarts: threads are deleted as fast as they are made, so it too must level off.
 */
function flatness() {
  const rows = [];
  // A 12 MB reply in flight holds ~36 MB (the harness's frames, the translator, the message
  // log) until its thread is deleted; the server gives large buffers back once freed (its
  // malloc tuning), so this slack covers the replies in flight at a sample, not a level kept.
  const slack = { rssMb: 60, fds: 20, threads: 8, tasks: 40, sessions: 10, saveMb: 60 };
  const judge = (key, label, life) => {
    if (life.length < 9) return;
    const third = Math.floor(life.length / 3);
    const first = median(life.slice(1, third + 1).map((s) => s[key]));
    const last = median(life.slice(-third).map((s) => s[key]));
    const bound = first * 1.5 + slack[key];
    rows.push({ key, life: label, first, last, bound });
    if (last > bound) violate(`${key} (${label}) grew from ${first.toFixed(1)} to ${last.toFixed(1)} (bound ${bound.toFixed(1)})`);
  };
  for (const key of Object.keys(slack).filter((k) => k !== "saveMb")) {
    for (const e of [...new Set(samples.map((s) => s.epoch))]) judge(key, `server #${e}`, samples.filter((s) => s.epoch === e));
  }
  judge("saveMb", "whole soak", samples);
  return rows;
}

// ----------------------------------------------------------------------------- checks
/** Tags of the user messages the model has seen, across every take of its log. */
const seen = new Set();
const doubled = new Set();
let modelRequests = 0;
const TAG = /s-(?:say|slow|park|ask|list|cmd|bgcmd|big|fail|limit|hang) (u\d+-\d+|soak-[\w-]+)/g;
/**
 * Reads (and empties) the model's log. Every request carries its thread's whole conversation, so
 * a message the harness was given twice shows as two user contents with its tag in one request;
 * a request the harness retries (a model error) or follows up (a tool's result) carries it once.
 */
async function exactlyOnce() {
  const requests = await model.takeRequests();
  modelRequests += requests.length;
  for (const r of requests) {
    const counts = new Map();
    const order = [];
    for (const content of r.body?.contents ?? []) {
      if (content.role !== "user") continue;
      const text = (content.parts ?? []).map((p) => (typeof p.text === "string" ? p.text : "")).join("");
      for (const m of new Set([...text.matchAll(TAG)].map((m) => m[1]))) counts.set(m, (counts.get(m) ?? 0) + 1), order.push(m);
    }
    for (const [tag, n] of counts) {
      seen.add(tag);
      if (n > 1 && !doubled.has(tag)) {
        doubled.add(tag);
        violate(`message ${tag} (${journal.get(tag)}) is in the conversation the model was sent ${n} times (its user messages: ${order.map((t) => `${t} (${journal.get(t)?.split(" on ")[0]})`).join(" ")})`);
      }
    }
  }
}

function answeredReachedTheModel(threads) {
  let answered = 0;
  for (const thread of threads) {
    for (const message of thread.messages.filter((m) => m.role === "user" && thread.answered.has(m.id))) {
      const tag = message.content.match(/(u\d+-\d+|soak-[\w-]+)/)?.[1];
      answered += 1;
      if (tag && !seen.has(tag)) violate(`message ${tag} ("${message.content}" on ${thread.id}) was answered but never reached the model`);
    }
  }
  return answered;
}

async function lastWords(threads) {
  const rnd = generator(opts.seed * 1000 - 1);
  for (const thread of threads) {
    const since = faultClock;
    const end = await turn(thread, `s-say ${thread.id}-last`, since, rnd);
    if (end?.type !== "RUN_FINISHED") {
      // One retry: the thread's last turn may have been interrupted by a fault.
      const again = await turn(thread, `s-say ${thread.id}-again`, since, rnd);
      if (again?.type !== "RUN_FINISHED") violate(`${thread.id} does not answer a last message: ${JSON.stringify(again)}`);
    }
    const rec = await post(thread, { route: "/connect" });
    const snapshot = rec.events?.find((e) => e.type === "MESSAGES_SNAPSHOT");
    const shown = new Set((snapshot?.messages ?? []).filter((m) => m.role === "user").map((m) => m.id));
    for (const id of thread.answered) if (!shown.has(id)) violate(`${thread.id}: connect does not show answered message ${id}`);
  }
}

// ------------------------------------------------------------------------------ main
/** As root, the save dir is a tmpfs of its own, so the soak can fill it without filling the machine. */
function mountSaveDir() {
  if (process.getuid?.() !== 0) {
    console.log("not root: the full-save-dir fault is skipped (it needs a tmpfs of its own)");
    return;
  }
  fs.mkdirSync(saveDir, { recursive: true });
  try {
    execFileSync("mount", ["-t", "tmpfs", "-o", "size=3g,mode=0700", "soak-save", saveDir]);
    fillable = true;
  } catch (err) {
    console.log(`the save dir could not be mounted as a tmpfs (${String(err).split("\n")[0]}): the full-save-dir fault is skipped`);
  }
}

function unmountSaveDir() {
  if (!fillable) return;
  fillable = false;
  try {
    execFileSync("umount", ["--lazy", saveDir]);
  } catch (err) {
    console.error(`umount ${saveDir}: ${err}`);
  }
}

async function main() {
  const startedAt = Date.now();
  console.log(`soak: ${opts.minutes} min, ${opts.users} users, seed ${opts.seed}, dir ${dir}`);
  mountSaveDir();
  model = await startModel(SCRIPT);
  await start();
  const deadline = startedAt + opts.minutes * 60_000;
  const sampler = setInterval(() => sample(startedAt), 5_000);
  const minute = setInterval(async () => {
    leaks();
    await exactlyOnce().catch((err) => violate(`reading the model's log: ${err}`));
    const last = samples.at(-1);
    console.log(
      `t=${last?.t ?? 0}s runs=${tally.runs} violations=${violations.length} rss=${last?.rssMb?.toFixed(1)}MB fds=${last?.fds} threads=${last?.threads} tasks=${last?.tasks} sessions=${last?.sessions} harnesses=${last?.harnesses} save=${last?.saveMb?.toFixed(1)}MB`,
    );
  }, 60_000);
  const faults = (async () => {
    await sleep(20_000);
    while (Date.now() < deadline - 20_000) {
      await fault();
      await sleep(faultRnd.int(15_000, 35_000));
    }
  })();
  const users = await Promise.all(Array.from({ length: opts.users }, (_, n) => user(n, deadline)));
  await faults;
  clearInterval(minute);
  // Resources are judged over the users' phase: the last words below resume every thread at
  // once, a load of its own.
  await sample(startedAt);
  clearInterval(sampler);
  const flat = flatness();
  const live = users.flatMap((u) => u.threads);
  await lastWords(live);
  await exactlyOnce();
  const answered = answeredReachedTheModel(users.flatMap((u) => u.all));
  leaks();
  // The last server stops: no harness, launcher or agent command may outlive it.
  const left = descendants(server.pid).filter((p) => isHarness(p) || isLauncher(p) || isCommand(p));
  await server.stop().catch((e) => violate(`final stop: ${e.message.split("\n")[0]}`));
  // A sandbox's launchers exit after its harness: give them a few seconds.
  const stopped = Date.now();
  for (let i = 0; i < 20 && left.some((p) => fs.existsSync(`/proc/${p.pid}`)); i += 1) await sleep(500);
  console.log(`the last server's harnesses and launchers were gone ${Date.now() - stopped} ms after it stopped`);
  const orphans = left.filter((p) => fs.existsSync(`/proc/${p.pid}`));
  if (orphans.length) violate(`processes left after the server stopped: ${orphans.map((p) => `${p.pid} (${p.cmdline.slice(0, 60)})`).join(", ")}`);
  await model.stop();
  unmountSaveDir();

  const threads = users.reduce((n, u) => n + u.all.length, 0);
  const report = { ...opts, threads, ...tally, modelRequests, answered, violations, flatness: flat, samples };
  console.log("\n| figure | value |\n|---|---|");
  console.log(`| minutes / users / seed | ${opts.minutes} / ${opts.users} / ${opts.seed} |`);
  console.log(`| threads (live at the end) | ${threads} (${live.length}) |`);
  console.log(`| runs (cut by a killed server; errors a fault explains) | ${tally.runs} (${tally.cutByServer}; ${tally.faultedErrors}) |`);
  console.log(`| actions | ${Object.entries(tally.actions).map(([k, v]) => `${k} ${v}`).join(", ")} |`);
  console.log(`| faults | ${Object.entries(tally.faults).map(([k, v]) => `${k} ${v}`).join(", ")} |`);
  console.log(`| model requests / messages answered | ${modelRequests} / ${answered} |`);
  console.log(`| violations | ${violations.length} |`);
  console.log("\n| resource (life) | first third median | last third median | bound |\n|---|---|---|---|");
  for (const r of flat) console.log(`| ${r.key} (${r.life}) | ${r.first.toFixed(1)} | ${r.last.toFixed(1)} | ${r.bound.toFixed(1)} |`);
  const out = opts.out ?? path.join(process.cwd(), "target", "soak", `soak-${Date.now()}.json`);
  fs.mkdirSync(path.dirname(out), { recursive: true });
  fs.writeFileSync(out, JSON.stringify(report, null, 2));
  console.log(`\nreport: ${out}`);
  // The servers' logs stay for a soak that found something.
  if (violations.length) console.log(`the servers' logs: ${dir}/server-*.log`);
  else fs.rmSync(dir, { recursive: true, force: true });
  for (const v of violations) console.log(`VIOLATION: ${v.what}`);
  process.exitCode = violations.length ? 1 : 0;
}

// Whatever ends the soak, the tmpfs it mounted goes.
process.on("exit", unmountSaveDir);
process.on("SIGINT", () => process.exit(130));

main().catch((err) => {
  console.error(err?.stack ?? err);
  unmountSaveDir();
  process.exit(2);
});
