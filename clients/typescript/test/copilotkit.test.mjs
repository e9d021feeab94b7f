// AntigravityRunner in CopilotKit's v2 runtime (its fetch handler, in this process) against the
// real server, harness and scripted model: /info shows the agent's capabilities; connect gets a
// thread from the server — one this runtime never ran, and after a new runtime took over — where
// CopilotKit's own runner has nothing; stop through the runtime stops the server's turn, also one
// the runtime only rejoined; CopilotKit's thread endpoints (what `useThreads()` reads) list the
// server's threads, in a new runtime too, follow the server's changes, read a thread's messages
// from the server, and with the runner's hooks rename, archive and delete it there; an edit
// through the runtime reaches the server as sent, and the thread's messages follow its branches.
import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { after, describe, test } from "node:test";
import { HttpAgent } from "@ag-ui/client";
import { CopilotRuntime, InMemoryAgentRunner, createCopilotRuntimeHandler } from "@copilotkit/runtime/v2";
import { AntigravityAgent } from "@agui-antigravity/client";
import { AntigravityRunner } from "@agui-antigravity/client/copilotkit";
import { eventually, shape, useServer } from "./lib/fixture.mjs";

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

  const runners = [];
  after(() => runners.forEach((runner) => runner.close?.()));

  /**
   * A CopilotKit runtime serving `agents` through `runner` (default: ours), with the runner's
   * hooks unless `hooks` is false. `call(path, body, method)`: GET without a body, else POST.
   */
  function runtime(agents, runner = new AntigravityRunner({ agents }), { hooks = true } = {}) {
    runners.push(runner);
    const handler = createCopilotRuntimeHandler({ runtime: new CopilotRuntime({ agents, runner }), basePath: BASE, ...(hooks && runner.hooks ? { hooks: runner.hooks } : {}) });
    const call = (path, body, method = body === undefined ? "GET" : "POST") =>
      handler(
        new Request(`http://runtime${BASE}${path}`, body === undefined ? { method } : { method, headers: { "content-type": "application/json" }, body: JSON.stringify(body) }),
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

  /** An agent run directly against the server on a new thread, with `text`. */
  async function directThread(text) {
    const direct = new AntigravityAgent({ url: url(), threadId: `c-${randomUUID()}` });
    direct.messages.push(user(text));
    await direct.runAgent();
    return direct;
  }

  const listed = async (call, query = "agentId=antigravity") => (await (await call(`/threads?${query}`)).json()).threads;

  test("CopilotKit's /threads lists the server's threads, in a new runtime too; a thread's messages come from the server", async () => {
    const direct = await directThread("c-hello: listed by the runtime");
    const first = runtime({ antigravity: new AntigravityAgent({ url: url() }) });
    const record = (await listed(first.call)).find((t) => t.id === direct.threadId);
    assert.deepEqual(
      { name: record?.name, agentId: record?.agentId, archived: record?.archived },
      { name: "c-hello: listed by the runtime", agentId: "antigravity", archived: false },
      "a thread this runtime never ran, with the server's title",
    );
    const info = await (await first.call("/info")).json();
    assert.deepEqual(info.threadEndpoints, { list: true, inspect: true, mutations: true, realtimeMetadata: false }, "pages are told renames and archiving work");

    // A new runtime (a restart, another replica) lists the same threads, from the server.
    const second = runtime({ antigravity: new AntigravityAgent({ url: url() }) });
    assert.ok((await listed(second.call)).some((t) => t.id === direct.threadId), "listed by a new runtime at once");
    const { messages } = await (await second.call(`/threads/${direct.threadId}/messages`)).json();
    assert.deepEqual(
      messages.filter((m) => m.role === "user" || m.role === "assistant").map((m) => [m.role, m.content]),
      [
        ["user", "c-hello: listed by the runtime"],
        ["assistant", "Hello from the server."],
      ],
    );
    assert.deepEqual(second.runner.getThreadMessages(direct.threadId).map((m) => m.id), messages.map((m) => m.id), "the runner's synchronous answer is what the endpoint gave");
    const state = await (await second.call(`/threads/${direct.threadId}/state`)).json();
    assert.ok("state" in state);

    const stock = runtime({ antigravity: new AntigravityAgent({ url: url() }) }, new InMemoryAgentRunner());
    assert.ok(!(await listed(stock.call)).some((t) => t.id === direct.threadId), "CopilotKit's in-memory runner lists only its own runs");
  });

  test("an edit run through the runtime reaches the server as sent (the thread forks); the thread's messages follow the edit and a switch back", async () => {
    const direct = await directThread("c-hello: before the edit");
    const threadId = direct.threadId;
    const { call, runner } = runtime({ antigravity: new AntigravityAgent({ url: url() }) });
    await listed(call);
    const texts = (messages) => messages.filter((m) => m.role === "user" || m.role === "assistant").map((m) => m.content);
    const { messages } = await (await call(`/threads/${threadId}/messages`)).json();
    assert.deepEqual(texts(messages), ["c-hello: before the edit", "Hello from the server."]);

    // CopilotKit's page edits by resending the message under its id, the rest dropped.
    const edited = { ...messages.find((m) => m.role === "user"), content: "c-hello: after the edit" };
    const ran = await sseEvents(await call("/agent/antigravity/run", input(threadId, [edited]))).done;
    assert.equal(ran.at(-1).type, "RUN_FINISHED", JSON.stringify(ran.at(-1)));
    const forked = await direct.listBranches();
    assert.deepEqual(forked.branches.map((b) => b.leftAt), [edited.id], "the server took it for an edit and forked");
    await eventually(() => texts(runner.getThreadMessages(threadId))[0] === "c-hello: after the edit", 10_000, "the runner's messages of the new branch");

    // A switch made elsewhere: the same number of messages, another branch.
    await direct.switchBranch(threadId, forked.branches[0].id);
    await eventually(() => texts(runner.getThreadMessages(threadId))[0] === "c-hello: before the edit", 10_000, "the runner's messages of the branch switched to");
    const after = await (await call(`/threads/${threadId}/messages`)).json();
    assert.deepEqual(texts(after.messages), ["c-hello: before the edit", "Hello from the server."]);
  });

  test("rename, archive, unarchive and delete through CopilotKit's endpoints reach the server", async () => {
    const direct = await directThread("c-hello: change me");
    const threadId = direct.threadId;
    const { call } = runtime({ antigravity: new AntigravityAgent({ url: url() }) });
    const server = new AntigravityAgent({ url: url() }).threads;

    const renamed = await call(`/threads/${threadId}`, { agentId: "antigravity", name: "Renamed in CopilotKit" }, "PATCH");
    assert.equal(renamed.status, 200);
    assert.equal((await renamed.json()).name, "Renamed in CopilotKit");
    assert.equal((await server.getThread(threadId)).title, "Renamed in CopilotKit", "the server has the new title");
    assert.equal((await listed(call)).find((t) => t.id === threadId)?.name, "Renamed in CopilotKit", "and the list at once");

    const archived = await call(`/threads/${threadId}/archive`, { agentId: "antigravity" });
    assert.deepEqual(await archived.json(), { threadId, archived: true });
    assert.equal((await server.getThread(threadId)).archived, true, "archived on the server");
    assert.ok(!(await listed(call)).some((t) => t.id === threadId), "not listed without includeArchived");
    assert.equal((await listed(call, "agentId=antigravity&includeArchived=true")).find((t) => t.id === threadId)?.archived, true);

    await call(`/threads/${threadId}`, { agentId: "antigravity", archived: false }, "PATCH");
    assert.equal((await server.getThread(threadId)).archived, false, "unarchived on the server");

    const refused = await call(`/threads/${threadId}`, { agentId: "antigravity", name: " " }, "PATCH");
    assert.equal(refused.status, 422, "the server's refusal of an empty title");
    assert.equal(typeof (await refused.json()).error, "string");

    const deleted = await call(`/threads/${threadId}`, { agentId: "antigravity" }, "DELETE");
    assert.deepEqual(await deleted.json(), { threadId, deleted: true });
    await assert.rejects(server.getThread(threadId), (error) => error.status === 404, "gone from the server");
    assert.ok(!(await listed(call, "agentId=antigravity&includeArchived=true")).some((t) => t.id === threadId));
    assert.equal((await call(`/threads/${threadId}`, { agentId: "antigravity" }, "DELETE")).status, 404);
  });

  test("without the hooks, CopilotKit lists the server's threads once they are read; its mutations are refused as CopilotKit refuses them", async () => {
    const direct = await directThread("c-hello: no hooks");
    const agents = { antigravity: new AntigravityAgent({ url: url() }) };
    const { call, runner } = runtime(agents, new AntigravityRunner({ agents }), { hooks: false });
    await runner.threadsReady();
    assert.ok((await listed(call)).some((t) => t.id === direct.threadId));
    const info = await (await call("/info")).json();
    assert.equal(info.threadEndpoints.mutations, false);
    const refused = await call(`/threads/${direct.threadId}`, { agentId: "antigravity", name: "x" }, "PATCH");
    assert.equal(refused.status, 422, "CopilotKit 1.75 serves mutations with Intelligence only");
  });

  test("the runtime's list follows the server: threads made and renamed elsewhere show without a restart", async () => {
    const { call, runner } = runtime({ antigravity: new AntigravityAgent({ url: url() }) });
    const heard = [];
    const unsubscribe = runner.subscribeThreads((change, agentId) => heard.push([change.type, change.thread.id, agentId]));
    await runner.threadsReady();
    const direct = await directThread("c-hello: made elsewhere");
    await eventually(() => runner.listThreads().some((t) => t.id === direct.threadId), 10_000, "the new thread in the runtime's list");
    await new AntigravityAgent({ url: url() }).threads.renameThread(direct.threadId, "Renamed elsewhere");
    await eventually(async () => (await listed(call)).find((t) => t.id === direct.threadId)?.name === "Renamed elsewhere", 10_000, "the new title");
    assert.ok(heard.some(([type, id, agentId]) => type === "created" && id === direct.threadId && agentId === "antigravity"), "listeners heard it");
    unsubscribe();
  });
});
