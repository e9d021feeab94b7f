// Threads that outlive requests, with the official client against the real binary, harness and
// scripted model: a reloaded page connects mid-turn and ends up with the messages of a client
// that never left; connect after a restart shows the whole history; connect on a parked thread
// re-announces its interrupt; stop halts a long command; a client that never reads does not hold
// up the next run; a conversation whose database was deleted is reported lost; a harness that
// freezes mid-turn ends the run after the stall timeout.
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import fs from "node:fs";
import path from "node:path";
import { randomUUID } from "node:crypto";
import { after, before, describe, test } from "node:test";
import { E2EAgent, ofType, outcome, run, text } from "./lib/client.mjs";
import { NEEDS_SCRIPT } from "./lib/mode.mjs";
import { startModel, startServer, stopAll, tempDir } from "./lib/procs.mjs";

const SLOW = Array.from({ length: 12 }, (_, i) => `piece${i} `).join("");
const BIG_WORD = "lorem ".repeat(50_000); // ~300 kB per chunk

const SCRIPT = {
  replies: [
    { name: "slow", repeat: "forever", match: { user_text_contains: "t-slow" }, reply: { text: SLOW, chunking: { words: 1 }, delay_ms: 150 } },
    { name: "hello", repeat: "forever", match: { user_text_contains: "t-hello" }, reply: { thought: "A greeting.", text: "Hello from the thread." } },
    { name: "after stop", repeat: "forever", match: { user_text_contains: "t-after" }, reply: { text: "Still here: {{user_text}}" } },
    { name: "command result", repeat: "forever", match: { function_response: "run_command" }, reply: { text: "The command is done." } },
    {
      name: "long command",
      repeat: "forever",
      match: { user_text_contains: "t-sleep", last_part: "text" },
      reply: { calls: [{ name: "run_command", args: { CommandLine: "sleep 31.5", Cwd: "{{workspace}}", WaitMsBeforeAsync: 60000 } }] },
    },
    { name: "question answered", repeat: "forever", match: { function_response: "ask_question" }, reply: { text: "Noted." } },
    {
      name: "question",
      repeat: "forever",
      match: { user_text_contains: "t-ask", last_part: "text" },
      reply: { text: "One question first.", calls: [{ name: "ask_question", args: { questions: [{ question: "Which fruit?", options: ["Apple", "Pear"], is_multi_select: false }] } }] },
    },
    { name: "big", repeat: "forever", match: { user_text_contains: "t-big" }, reply: { text: BIG_WORD.repeat(8), chunking: { words: 50_000 } } },
  ],
  default: { text: "No scripted answer." },
};

let model;
let server;

const agent = (opts = {}) => new E2EAgent({ url: server.url, ...opts });

/** The messages a client holds, as comparable data. */
const shape = (messages) => messages.map(({ id, role, content, toolCalls, toolCallId }) => ({ id, role, content, toolCalls, toolCallId }));

/** POST <url>/stop for a thread. */
async function stop(threadId) {
  const res = await fetch(`${server.url}/stop`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ threadId }) });
  assert.equal(res.status, 200, await res.clone().text());
  return res.json();
}

/** PIDs of processes whose command line contains `needle`. */
function processesWith(needle) {
  return fs
    .readdirSync("/proc")
    .filter((e) => /^\d+$/.test(e))
    .filter((pid) => {
      try {
        return fs.readFileSync(`/proc/${pid}/cmdline`, "utf8").replaceAll("\0", " ").includes(needle);
      } catch {
        return false;
      }
    });
}

describe("threads that outlive requests", { skip: NEEDS_SCRIPT }, () => {
  before(async () => {
    model = await startModel(SCRIPT);
    server = await startServer({
      label: "threads server",
      args: [
        "--gemini-base-url", model.url, "--api-key", "e2e-key",
        "--builtin-tools", "run_command,ask_question", "--behavior", "interactive",
        "--turn-stall-timeout-secs", "3",
      ],
    });
  });

  after(async () => {
    await stopAll(server, model);
  });

  test("a page reloaded mid-turn connects: history so far, then the rest, as a client that never left", async () => {
    const stayer = agent();
    stayer.say("t-slow: tell me slowly");
    // The client that never leaves runs the turn (unchecked here: the reloaded one is checked).
    // Connect once the reply has begun (however long the harness takes to start).
    let begun;
    const replying = new Promise((resolve) => (begun = resolve));
    const stayed = stayer.runAgent({ runId: `run-${randomUUID()}` }, { onTextMessageContentEvent: () => begun() });
    await replying;
    // The reloaded page: a new client on the same thread, with no messages.
    const reloaded = agent({ threadId: stayer.threadId });
    const rec = await run(reloaded, {}, { connect: true, log: server.log });
    await stayed;
    assert.equal(outcome(rec), "success");
    const types = rec.wireEvents.map((e) => e.type);
    assert.deepEqual(types.slice(0, 3), ["RUN_STARTED", "MESSAGES_SNAPSHOT", "STATE_SNAPSHOT"]);
    const snapshot = ofType(rec, "MESSAGES_SNAPSHOT")[0].messages;
    assert.equal(snapshot[0].role, "user");
    assert.equal(snapshot[0].id, stayer.messages[0].id, "the user message keeps the client's id");
    const partial = snapshot.find((m) => m.role === "assistant")?.content ?? "";
    assert.ok(partial.length > 0 && partial.length < SLOW.length, `the snapshot holds the reply so far (${partial.length} chars)`);
    assert.ok(text(rec).length > 0, "the rest of the live turn follows");
    assert.equal(partial + text(rec), SLOW, "nothing is sent twice and nothing is lost");
    assert.deepEqual(shape(reloaded.messages), shape(stayer.messages), "the reloaded client holds what the one that never left holds");
  });

  test("connect after a server restart shows the whole history", async () => {
    const dir = tempDir("e2e-threads-restart");
    const args = ["--gemini-base-url", model.url, "--api-key", "e2e-key"];
    let srv = await startServer({ label: "restart server (first life)", args, dir });
    try {
      const first = new E2EAgent({ url: srv.url });
      first.say("t-hello: hi");
      assert.equal(outcome(await run(first, {}, { log: srv.log })), "success");
      first.say("t-hello: and again");
      assert.equal(outcome(await run(first, {}, { log: srv.log })), "success");
      await srv.stop();
      srv = await startServer({ label: "restart server (second life)", args, dir });
      const reloaded = new E2EAgent({ url: srv.url, threadId: first.threadId });
      const rec = await run(reloaded, {}, { connect: true, log: srv.log });
      assert.equal(outcome(rec), "success");
      assert.deepEqual(
        shape(reloaded.messages.filter((m) => m.role !== "reasoning")),
        shape(first.messages.filter((m) => m.role !== "reasoning")),
        "every message, under the ids the client had",
      );
      assert.ok(reloaded.messages.some((m) => m.role === "reasoning" && m.content === "A greeting."), "reasoning comes back too");
      // Unknown thread: 404, which the client takes as "no history".
      const stranger = new E2EAgent({ url: srv.url });
      const none = await run(stranger, {}, { connect: true, log: srv.log }).catch((e) => e);
      assert.ok(none instanceof Error || outcome(none) === "none", "an unknown thread has no history");
    } finally {
      await srv.stop();
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });

  test("connect on a parked thread re-announces its interrupt", async () => {
    const asker = agent();
    asker.say("t-ask: help me choose");
    const parked = await run(asker, {}, { log: server.log });
    assert.equal(outcome(parked), "interrupt");
    const [interrupt] = parked.finished.interrupts;
    const reloaded = agent({ threadId: asker.threadId });
    const rec = await run(reloaded, {}, { connect: true, log: server.log });
    assert.equal(outcome(rec), "interrupt");
    assert.deepEqual(rec.finished.interrupts.map((i) => i.id), [interrupt.id], "the same interrupt");
    assert.deepEqual(reloaded.pendingInterrupts.map((i) => i.id), [interrupt.id], "the client holds it open");
    assert.ok(reloaded.messages.some((m) => m.role === "assistant" && m.content === "One question first."));
  });

  test("stop during a long command: cancelled at once, the command gone, the thread goes on", async () => {
    const a = agent();
    a.say("t-sleep: wait for a while");
    const started = Date.now();
    const running = run(a, {}, { log: server.log });
    // Wait until the command runs.
    const deadline = Date.now() + 20_000;
    while (processesWith("sleep 31.5").length === 0 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 100));
    assert.ok(processesWith("sleep 31.5").length > 0, "the command started");
    const stopAt = Date.now();
    assert.deepEqual(await stop(a.threadId), { stopped: true });
    const rec = await running;
    const stoppedIn = Date.now() - stopAt;
    assert.equal(outcome(rec), "cancelled", `ended cancelled (after ${Date.now() - started} ms)`);
    assert.ok(stoppedIn < 2_000, `the run ended ${stoppedIn} ms after the stop`);
    const gone = Date.now() + 3_000;
    while (processesWith("sleep 31.5").length && Date.now() < gone) await new Promise((r) => setTimeout(r, 100));
    assert.deepEqual(processesWith("sleep 31.5"), [], "no command left running");
    assert.deepEqual(await stop(a.threadId), { stopped: false }, "nothing left to stop");
    a.say("t-after: are you there?");
    const next = await run(a, {}, { log: server.log });
    assert.equal(outcome(next), "success");
    assert.match(text(next), /Still here/);
    const [request] = (await model.requests()).filter((r) => JSON.stringify(r.body).includes("t-after")).slice(-1);
    assert.ok(JSON.stringify(request.body).includes("t-sleep"), "the model still has the thread's history");
  });

  test("a client that never reads does not hold up the next run on its thread", async () => {
    const threadId = `e2e-${randomUUID()}`;
    const first = { threadId, runId: `run-${randomUUID()}`, messages: [{ id: "u1", role: "user", content: "t-big: a lot please" }], tools: [], context: [], state: {}, forwardedProps: {} };
    const controller = new AbortController();
    // Sends the run and never reads its body.
    const unread = await fetch(`${server.url}/`, { method: "POST", headers: { "content-type": "application/json", accept: "text/event-stream" }, body: JSON.stringify(first), signal: controller.signal });
    assert.equal(unread.status, 200);
    const started = Date.now();
    const next = new E2EAgent({ url: server.url, threadId });
    next.messages.push(first.messages[0]);
    next.say("t-hello: me again");
    const rec = await run(next, {}, { log: server.log });
    assert.equal(outcome(rec), "success", "not refused as busy");
    assert.ok(Date.now() - started < 25_000, `served after ${Date.now() - started} ms (the busy wait is 30 s)`);
    assert.equal(text(rec), "Hello from the thread.");
    controller.abort();
  });

  test("a conversation whose database was deleted is reported lost, and the thread starts over", async () => {
    const dir = tempDir("e2e-threads-lost");
    const args = ["--gemini-base-url", model.url, "--api-key", "e2e-key"];
    let srv = await startServer({ label: "lost server", args, dir });
    try {
      const a = new E2EAgent({ url: srv.url });
      a.say("t-hello: remember me");
      assert.equal(outcome(await run(a, {}, { log: srv.log })), "success");
      await srv.stop();
      const dbs = execFileSync("find", [dir, "-name", "*.db"], { encoding: "utf8" }).split("\n").filter(Boolean);
      assert.ok(dbs.length > 0, "the harness saved the conversation");
      for (const db of dbs) fs.rmSync(db);
      srv = await startServer({ label: "lost server (database deleted)", args, dir });
      const b = new E2EAgent({ url: srv.url, threadId: a.threadId });
      b.messages.push(...a.messages);
      b.say("t-hello: still there?");
      const lost = await run(b, {}, { log: srv.log });
      assert.equal(outcome(lost), "error");
      assert.equal(lost.runError.code, "CONVERSATION_LOST");
      assert.match(lost.runError.message, /lost/i);
      const again = await run(b, {}, { log: srv.log });
      assert.equal(outcome(again), "success", "the next run starts a new conversation");
      assert.equal(text(again), "Hello from the thread.");
    } finally {
      await srv.stop();
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });

  test("a harness that freezes mid-turn ends the run after the stall timeout", async () => {
    const a = agent();
    a.say("t-slow: slowly again");
    const alive = () => server.harnesses().filter((pid) => fs.existsSync(`/proc/${pid}`));
    // Freeze once the reply has begun: the harness is past its start and mid-turn (a harness
    // frozen while it starts is the boot timeout's case, not the stall's).
    let begun;
    const replying = new Promise((resolve) => (begun = resolve));
    const running = run(a, {}, { log: server.log, timeoutMs: 40_000, subscriber: { onTextMessageContentEvent: () => begun() } });
    await Promise.race([replying, running]);
    const frozen = alive();
    assert.ok(frozen.length > 0, "a harness runs the turn");
    for (const pid of frozen) process.kill(pid, "SIGSTOP");
    const rec = await running;
    assert.equal(outcome(rec), "error");
    assert.equal(rec.runError.code, "TURN_STALLED");
    for (const pid of frozen) {
      try {
        process.kill(pid, "SIGCONT");
      } catch {
        /* killed */
      }
    }
    a.say("t-hello: after the freeze");
    const next = await run(a, {}, { log: server.log });
    assert.equal(outcome(next), "success", `the thread goes on (${JSON.stringify(next.runError)})\n${server.log()}`);
  });
});
