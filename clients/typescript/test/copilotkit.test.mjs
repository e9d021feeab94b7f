// AntigravityRunner in CopilotKit's v2 runtime (its fetch handler, in this process) against the
// real server, harness and scripted model: /info shows the agent's capabilities; connect gets a
// thread from the server — one this runtime never ran, and after a new runtime took over — where
// CopilotKit's own runner has nothing; stop through the runtime stops the server's turn, also one
// the runtime only rejoined.
import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { describe, test } from "node:test";
import { HttpAgent } from "@ag-ui/client";
import { CopilotRuntime, InMemoryAgentRunner, createCopilotRuntimeHandler } from "@copilotkit/runtime/v2";
import { AntigravityAgent } from "@agui-antigravity/client";
import { AntigravityRunner } from "@agui-antigravity/client/copilotkit";
import { shape, useServer } from "./lib/fixture.mjs";

process.env.COPILOTKIT_TELEMETRY_DISABLED = "true";

const BASE = "/api/copilotkit";

/** The runtime's events of one SSE response, as they arrive; `until(type)` resolves on the first of a type. */
function sseEvents(response) {
  const events = [];
  const waiters = [];
  const done = (async () => {
    const decoder = new TextDecoder();
    let buffer = "";
    for await (const chunk of response.body) {
      buffer += decoder.decode(chunk, { stream: true });
      const frames = buffer.split("\n\n");
      buffer = frames.pop();
      for (const frame of frames) {
        const data = frame
          .split("\n")
          .filter((line) => line.startsWith("data:"))
          .map((line) => line.slice(5).trimStart())
          .join("\n");
        if (!data) continue;
        const event = JSON.parse(data);
        events.push(event);
        for (const waiter of waiters.splice(0)) if (!waiter(event)) waiters.push(waiter);
      }
    }
    return events;
  })();
  const until = (predicate) =>
    new Promise((resolve) => {
      const found = events.find(predicate);
      if (found) resolve(found);
      else waiters.push((event) => (predicate(event) ? (resolve(event), true) : false));
    });
  return { events, done, until };
}

describe("AntigravityRunner in CopilotKit's runtime", () => {
  const handles = useServer();
  const url = () => `${handles.server.url}/`;

  /** A CopilotKit runtime serving `agents` through `runner` (default: ours). */
  function runtime(agents, runner = new AntigravityRunner({ agents })) {
    const handler = createCopilotRuntimeHandler({ runtime: new CopilotRuntime({ agents, runner }), basePath: BASE });
    const call = (path, body) =>
      handler(
        new Request(`http://runtime${BASE}${path}`, body === undefined ? { method: "GET" } : { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(body) }),
      );
    return { call, runner };
  }

  const input = (threadId, messages = []) => ({ threadId, runId: `r-${randomUUID()}`, messages, tools: [], context: [], state: {}, forwardedProps: {} });
  const user = (content) => ({ id: `u-${randomUUID()}`, role: "user", content });
  const snapshotOf = (events) => events.find((e) => e.type === "MESSAGES_SNAPSHOT")?.messages;

  test("/info lists the agent with the server's capabilities and description", async () => {
    const { call } = runtime({ antigravity: new AntigravityAgent({ url: url() }) });
    const info = await (await call("/info")).json();
    const described = info.agents.antigravity;
    assert.equal(described.className, "AntigravityAgent");
    assert.equal(described.capabilities?.identity?.type, "antigravity");
    assert.equal(described.capabilities?.custom?.threads?.connect, true);
    assert.match(described.description, /Antigravity/);
  });

  test("connect gets the thread from the server, also one this runtime never ran; CopilotKit's runner has nothing", async () => {
    const direct = new AntigravityAgent({ url: url(), threadId: `c-${randomUUID()}` });
    direct.messages.push(user("c-hello: from elsewhere"));
    await direct.runAgent();

    const ours = runtime({ antigravity: new AntigravityAgent({ url: url() }) });
    const { events, done } = sseEvents(await ours.call("/agent/antigravity/connect", input(direct.threadId)));
    await done;
    assert.deepEqual(
      events.map((e) => e.type),
      ["RUN_STARTED", "MESSAGES_SNAPSHOT", "STATE_SNAPSHOT", "RUN_FINISHED"],
    );
    assert.deepEqual(shape(snapshotOf(events)), shape(direct.messages), "the server's history, ids included");

    const stock = runtime({ antigravity: new AntigravityAgent({ url: url() }) }, new InMemoryAgentRunner());
    const replay = sseEvents(await stock.call("/agent/antigravity/connect", input(direct.threadId)));
    assert.deepEqual(await replay.done, [], "CopilotKit's in-memory runner knows only its own runs");
  });

  test("a thread run through one runtime is restored by a new one (a restart, another replica)", async () => {
    const threadId = `c-${randomUUID()}`;
    const first = runtime({ antigravity: new AntigravityAgent({ url: url() }) });
    const ran = sseEvents(await first.call("/agent/antigravity/run", input(threadId, [user("c-hello: through the runtime")])));
    const runEvents = await ran.done;
    assert.equal(runEvents.at(-1).type, "RUN_FINISHED");

    const second = runtime({ antigravity: new AntigravityAgent({ url: url() }) });
    const restored = sseEvents(await second.call("/agent/antigravity/connect", input(threadId)));
    const messages = snapshotOf(await restored.done);
    assert.deepEqual(
      messages.map((m) => [m.role, m.content]),
      [
        ["user", "c-hello: through the runtime"],
        ["reasoning", "A greeting."],
        ["assistant", "Hello from the server."],
      ],
    );
  });

  test("a stop through the runtime stops the server's turn", async () => {
    const threadId = `c-${randomUUID()}`;
    const { call } = runtime({ antigravity: new AntigravityAgent({ url: url() }) });
    const running = sseEvents(await call("/agent/antigravity/run", input(threadId, [user("c-sleep: wait a while")])));
    await running.until((e) => e.type === "ACTIVITY_SNAPSHOT" && e.content?.state === "running");
    const stoppedAt = Date.now();
    const answer = await (await call(`/agent/antigravity/stop/${threadId}`, {})).json();
    assert.equal(answer.stopped, true);
    const events = await running.done;
    assert.ok(Date.now() - stoppedAt < 5_000, `the run ended ${Date.now() - stoppedAt} ms after the stop`);
    assert.equal(events.at(-1).type, "RUN_FINISHED");
    const checker = new AntigravityAgent({ url: url() });
    assert.equal(await checker.stopThread(threadId), false, "nothing left running on the server");
  });

  test("a stop through the runtime reaches a turn it only rejoined through connect", async () => {
    const direct = new AntigravityAgent({ url: url(), threadId: `c-${randomUUID()}` });
    direct.messages.push(user("c-sleep: wait a while"));
    let commandRunning;
    const started = new Promise((resolve) => (commandRunning = resolve));
    const directRun = direct.runAgent({}, { onEvent: ({ event }) => event.type === "ACTIVITY_SNAPSHOT" && event.content?.state === "running" && commandRunning() });
    await started;

    const { call } = runtime({ antigravity: new AntigravityAgent({ url: url() }) });
    const rejoined = sseEvents(await call("/agent/antigravity/connect", input(direct.threadId)));
    await rejoined.until((e) => e.type === "MESSAGES_SNAPSHOT");
    const answer = await (await call(`/agent/antigravity/stop/${direct.threadId}`, {})).json();
    assert.equal(answer.stopped, true, "the runtime stopped the server's turn");
    const events = await rejoined.done;
    assert.equal(events.at(-1).type, "RUN_FINISHED", "the rejoined stream ends with the turn");
    await directRun;
    assert.equal(await direct.stopThread(direct.threadId), false);
  });

  test("an agent of another kind keeps CopilotKit's in-memory connect", async () => {
    const direct = new AntigravityAgent({ url: url(), threadId: `c-${randomUUID()}` });
    direct.messages.push(user("c-hello: plain"));
    await direct.runAgent();
    const { call } = runtime({ plain: new HttpAgent({ url: url() }) });
    const replay = sseEvents(await call("/agent/plain/connect", input(direct.threadId)));
    assert.deepEqual(await replay.done, []);
  });
});
