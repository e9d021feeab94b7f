// AntigravityAgent with the @ag-ui/client CopilotKit pins (0.0.59; ag-ui-client-1.test.mjs runs
// the same tests with 1.x), against the real server,
// harness and scripted model, with an auth token: capabilities and identity, the routing header
// and token on every request, connect (history, unknown thread), a stop that stops the server's
// turn although the server detaches leaving clients, and a run whose stream is cut carried on
// through /connect — where a plain HttpAgent fails.
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { randomUUID } from "node:crypto";
import { once } from "node:events";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { describe, test } from "node:test";
import { HttpAgent } from "@ag-ui/client";
import { AntigravityAgent, AntigravityHttpError } from "@agui-antigravity/client";
import { AG_UI_CLIENT_VERSION } from "./lib/client-version.mjs";
import { SLOW_TEXT, hostPort, shape, startRelay, startTestServer, useServer } from "./lib/fixture.mjs";

const TOKEN = "client-test-token";
const here = path.dirname(fileURLToPath(import.meta.url));

describe(`AntigravityAgent with @ag-ui/client ${AG_UI_CLIENT_VERSION}`, () => {
  const handles = useServer({ args: ["--auth-token", TOKEN] });
  const url = () => handles.server.url;

  /** An agent on a fresh thread whose requests are recorded (URL, method, headers). */
  function agent({ threadId = `c-${randomUUID()}`, ...config } = {}) {
    const requests = [];
    const created = new AntigravityAgent({
      url: url(),
      threadId,
      authToken: TOKEN,
      fetch: (input, init) => {
        requests.push({ url: String(input), method: init?.method ?? "GET", headers: new Headers(init?.headers) });
        return fetch(input, init);
      },
      ...config,
    });
    created.requests = requests;
    return created;
  }

  const say = (target, content) => target.messages.push({ id: `u-${randomUUID()}`, role: "user", content });

  /** Runs the agent (with `params`, e.g. tools); returns its events and how it ended. */
  async function runOnce(target, subscriber = {}, params = {}) {
    const events = [];
    let failure;
    try {
      await target.runAgent(params, { ...subscriber, onEvent: (p) => (events.push(p.event), subscriber.onEvent?.(p)) });
    } catch (error) {
      failure = error;
    }
    return { events, failure, types: events.map((e) => e.type) };
  }

  /** A subscriber whose `started` resolves once the run's command runs (its activity says so). */
  function commandRunning() {
    let resolve;
    const started = new Promise((r) => (resolve = r));
    const subscriber = { onEvent: ({ event }) => event.type === "ACTIVITY_SNAPSHOT" && event.content?.state === "running" && resolve() };
    return { started, subscriber };
  }

  /** The thread as the server shows it to a fresh client (connect). */
  async function serverHistory(threadId) {
    const fresh = agent({ threadId });
    await fresh.connectAgent();
    return shape(fresh.messages);
  }

  test("capabilities come from the server, with its description; a request without the token is refused", async () => {
    const a = agent();
    const capabilities = await a.getCapabilities();
    assert.equal(capabilities.identity?.type, "antigravity");
    assert.equal(capabilities.custom?.threads?.stop, true);
    assert.equal(a.description, capabilities.identity?.description, "the description is the server's");
    assert.match(a.description, /Antigravity/);
    assert.equal(a.requests[0].headers.get("authorization"), `Bearer ${TOKEN}`);
    assert.ok(a.requests[0].url.endsWith("/capabilities"));

    const described = agent({ description: "Mine" });
    await described.getCapabilities();
    assert.equal(described.description, "Mine", "a configured description is kept");

    const anonymous = agent({ authToken: undefined });
    await assert.rejects(anonymous.getCapabilities(), (error) => error instanceof AntigravityHttpError && error.status === 401);
  });

  test("a run streams the reply and sends the routing key and token", async () => {
    const a = agent();
    say(a, "c-hello: hi");
    const { failure, types } = await runOnce(a);
    assert.equal(failure, undefined);
    assert.equal(types[0], "RUN_STARTED");
    assert.equal(types.at(-1), "RUN_FINISHED");
    assert.equal(a.messages.at(-1).content, "Hello from the server.");
    const [request] = a.requests;
    assert.equal(request.method, "POST");
    assert.equal(request.headers.get("x-thread-id"), a.threadId);
    assert.equal(request.headers.get("authorization"), `Bearer ${TOKEN}`);
  });

  test("a token in the headers is replaced by the configured one, never sent twice", async () => {
    const a = agent({ headers: { authorization: "Bearer stale", "X-Custom": "kept" } });
    say(a, "c-hello: hi");
    const { failure } = await runOnce(a);
    assert.equal(failure, undefined);
    assert.equal(a.requests[0].headers.get("authorization"), `Bearer ${TOKEN}`);
    assert.equal(a.requests[0].headers.get("x-custom"), "kept");
  });

  test("connect restores a thread's history in a new client; an unknown thread has none", async () => {
    const a = agent();
    say(a, "c-hello: remember me");
    assert.equal((await runOnce(a)).failure, undefined);

    const reloaded = agent({ threadId: a.threadId });
    await reloaded.connectAgent();
    assert.deepEqual(shape(reloaded.messages), shape(a.messages), "the same messages, ids included");
    const connect = reloaded.requests.find((r) => r.url.endsWith("/connect"));
    assert.ok(connect, "connect went to <url>/connect");
    assert.equal(connect.headers.get("x-thread-id"), a.threadId);

    const stranger = agent();
    await stranger.connectAgent();
    assert.deepEqual(stranger.messages, [], "no history, no error");
  });

  test("a run that ends owing a frontend tool's result, then its resumption; a plain 0.0.x HttpAgent refuses that end", async () => {
    const tools = [
      { name: "change_background", description: "Change the page's background.", parameters: { type: "object", properties: { background: { type: "string" } }, required: ["background"] } },
    ];
    const a = agent();
    say(a, "c-frontend: make it red");
    const parked = await runOnce(a, {}, { tools });
    assert.equal(parked.failure, undefined);
    assert.equal(parked.types.at(-1), "RUN_FINISHED");
    const call = a.messages.flatMap((m) => m.toolCalls ?? []).find((c) => c.function.name === "change_background");
    assert.ok(call, "the model called the frontend tool");
    a.messages.push({ id: `t-${randomUUID()}`, role: "tool", toolCallId: call.id, content: "The background is red." });
    const resumed = await runOnce(a, {}, { tools });
    assert.equal(resumed.failure, undefined);
    assert.equal(a.messages.at(-1).content, "Background changed.");

    const plain = new HttpAgent({ url: url(), threadId: `c-${randomUUID()}`, headers: { Authorization: `Bearer ${TOKEN}` } });
    say(plain, "c-frontend: make it red");
    const stock = await runOnce(plain, {}, { tools });
    if (AG_UI_CLIENT_VERSION.startsWith("0.0.")) {
      // @ag-ui/core 0.0.x: a RUN_FINISHED outcome is a strict object (src/events.ts:261-277).
      assert.match(String(stock.failure?.message), /pendingToolCallIds/, "the stock client refuses the outcome's pendingToolCallIds");
    } else {
      assert.equal(stock.failure, undefined, "1.x strips what it does not know");
    }
  });

  test("abortRun stops the turn on the server, which detaches leaving clients by default", async () => {
    const a = agent();
    say(a, "c-sleep: wait a while");
    const { started, subscriber } = commandRunning();
    const running = runOnce(a, subscriber);
    await started;
    const abortedAt = Date.now();
    a.abortRun();
    const { failure, events } = await running;
    assert.equal(failure, undefined);
    assert.ok(Date.now() - abortedAt < 5_000, `the run ended ${Date.now() - abortedAt} ms after abortRun`);
    const last = events.at(-1);
    assert.equal(last.type, "RUN_FINISHED", "the server's own end of the stopped run, not a cut request");
    assert.ok(a.requests.some((r) => r.url.endsWith("/stop") && r.method === "POST"));
    assert.equal(await a.stopThread(a.threadId), false, "no turn left running on the server");
  });

  test("abortRun with no run in flight stops no turn on the server", async () => {
    const a = agent();
    say(a, "c-sleep: wait a while");
    const { started, subscriber } = commandRunning();
    const running = runOnce(a, subscriber);
    await started;
    const bystander = agent({ threadId: a.threadId });
    bystander.abortRun();
    await new Promise((resolve) => setTimeout(resolve, 300));
    assert.ok(!bystander.requests.some((r) => r.url.endsWith("/stop")), "no stop posted");
    a.abortRun();
    assert.equal((await running).failure, undefined);
  });

  test("a plain HttpAgent's abort leaves the turn running on a detaching server", async () => {
    const plain = new HttpAgent({ url: url(), threadId: `c-${randomUUID()}`, headers: { Authorization: `Bearer ${TOKEN}` } });
    say(plain, "c-sleep: wait a while");
    const { started, subscriber } = commandRunning();
    const running = runOnce(plain, subscriber);
    await started;
    plain.abortRun();
    await running;
    const checker = agent({ threadId: plain.threadId });
    assert.equal(await checker.stopThread(plain.threadId), true, "the turn was still running (stopped now)");
  });

  test("a run whose stream is cut is carried on through connect and ends on the server's history", async () => {
    const relay = await startRelay(hostPort(url()));
    try {
      const a = agent({ url: `${relay.url}/` });
      say(a, "c-slow: tell me slowly");
      let pieces = 0;
      const result = runOnce(a, {
        onTextMessageContentEvent: () => {
          pieces += 1;
          if (pieces === 4) relay.cut();
        },
      });
      const { failure, types } = await result;
      assert.equal(failure, undefined, "the run did not fail");
      assert.equal(types.filter((t) => t === "RUN_STARTED").length, 1, "one run, as the client sees it");
      assert.ok(types.includes("MESSAGES_SNAPSHOT"), "the history was restated");
      assert.equal(types.at(-1), "RUN_FINISHED");
      assert.equal(a.messages.at(-1).content, SLOW_TEXT, "the whole reply, nothing twice");
      assert.deepEqual(shape(a.messages), await serverHistory(a.threadId), "the client's messages are the server's");
      assert.equal(a.requests.filter((r) => r.url.endsWith("/connect")).length, 1, "one connect");
    } finally {
      await relay.stop();
    }
  });

  test("a cut run whose turn ended while the stream was down ends on the history, open blocks closed", async () => {
    const relay = await startRelay(hostPort(url()));
    try {
      const a = agent({ url: `${relay.url}/`, reconnect: { attempts: 5, delayMs: 4_000 } });
      say(a, "c-work: do some work");
      let pieces = 0;
      const { failure, types, events } = await runOnce(a, {
        onTextMessageContentEvent: () => {
          pieces += 1;
          if (pieces === 2) relay.cut();
        },
      });
      assert.equal(failure, undefined, "the run did not fail");
      const restated = types.indexOf("STATE_SNAPSHOT");
      assert.ok(restated > 0, "the thread was restated");
      assert.equal(
        events[restated + 1].type,
        "TEXT_MESSAGE_END",
        "the message open at the cut is closed (it ended while the stream was down)",
      );
      assert.equal(types.at(-1), "RUN_FINISHED");
      assert.equal(a.messages.at(-1).content, "The command is done.");
      assert.deepEqual(shape(a.messages), await serverHistory(a.threadId));
    } finally {
      await relay.stop();
    }
  });

  test("a plain HttpAgent's run fails with a network error when its stream is cut, and its Node process dies", async () => {
    const relay = await startRelay(hostPort(url()));
    try {
      const child = spawn(process.execPath, [path.join(here, "fixtures/plain-http-agent-run.mjs"), `${relay.url}/`, TOKEN, "c-slow: tell me slowly"], {
        stdio: ["ignore", "pipe", "pipe"],
      });
      let stdout = "";
      let stderr = "";
      child.stdout.on("data", (chunk) => {
        stdout += chunk;
        if (stdout.includes("piece 4\n") && !relay.cutDone) {
          relay.cutDone = true;
          relay.cut();
        }
      });
      child.stderr.on("data", (chunk) => (stderr += chunk));
      const [code] = await once(child, "exit");
      assert.match(stdout, /failed: terminated/, "the run failed with the network error");
      assert.doesNotMatch(stdout, /exiting normally/, "the process did not get to its end");
      assert.notEqual(code, 0);
      // @ag-ui/client's run/http-request.ts rethrows the error of cancelling the broken body.
      assert.match(stderr, /terminated/, "an unhandled rejection of the same error ended it");
    } finally {
      await relay.stop();
    }
  });

  test("a run whose server dies mid-reply ends on the history of the server that replaces it", async () => {
    const first = await startTestServer(handles.model, { args: ["--auth-token", TOKEN], label: "server that dies" });
    const relay = await startRelay(hostPort(first.url));
    let second;
    try {
      const a = agent({ url: `${relay.url}/` });
      say(a, "c-slow: tell me slowly");
      let pieces = 0;
      const { failure, types } = await runOnce(a, {
        onTextMessageContentEvent: () => {
          pieces += 1;
          if (pieces !== 3) return;
          // A crash: nothing saved on the way out; the replacement reads the same save dir.
          void first.kill().then(async () => {
            second = await startTestServer(handles.model, { args: ["--auth-token", TOKEN], label: "replacement server", dir: first.dir });
            relay.target = hostPort(second.url);
          });
        },
      });
      assert.equal(failure, undefined, "the run did not fail");
      assert.equal(types.at(-1), "RUN_FINISHED");
      assert.ok(a.requests.filter((r) => r.url.endsWith("/connect")).length >= 1);
      const fresh = agent({ threadId: a.threadId, url: `${second.url}/` });
      await fresh.connectAgent();
      assert.deepEqual(shape(a.messages), shape(fresh.messages), "the client's messages are the replacement's history");
    } finally {
      await relay.stop();
      await second?.stop();
      // Last: it removes the data directory the replacement used.
      await first.stop();
    }
  });

  test("a cut run fails once its reconnect attempts are used up, or at once with reconnect off", async () => {
    for (const reconnect of [{ attempts: 2, delayMs: 50 }, false]) {
      const relay = await startRelay(hostPort(url()));
      try {
        const a = agent({ url: `${relay.url}/`, reconnect });
        say(a, "c-slow: tell me slowly");
        let pieces = 0;
        const { failure } = await runOnce(a, {
          onTextMessageContentEvent: () => {
            pieces += 1;
            if (pieces === 2) {
              relay.refuse = true;
              relay.cut();
            }
          },
        });
        assert.ok(failure, `the run failed (reconnect ${JSON.stringify(reconnect)})`);
        const connects = a.requests.filter((r) => r.url.endsWith("/connect")).length;
        if (reconnect) assert.match(String(failure.message), /connecting to thread .* failed after 2 attempts: fetch failed/);
        assert.equal(connects, reconnect ? 2 : 0);
      } finally {
        await relay.stop();
      }
    }
  });
});
