// The offline demo (`--demo`: the embedded scripted model and its `get_weather` server tool),
// behind a bearer token and a small body limit: the server tool, the demo's capabilities, and
// every way a request is refused before a run starts (401, 413, 415, 422).
//
// The demo model is part of the binary, so this file runs the same way in the live gate.
import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import { after, before, describe, test } from "node:test";
import { E2EAgent, ofType, outcome, refused, run, text, toolCalls } from "./lib/client.mjs";
import { checkCapabilities } from "./lib/capabilities.mjs";
import { startServer, stopAll } from "./lib/procs.mjs";

const TOKEN = randomBytes(16).toString("hex");
const AUTH = { Authorization: `Bearer ${TOKEN}` };
const MAX_BODY = 64 * 1024;

let server;

const agent = (opts = {}) => new E2EAgent({ url: server.url, headers: AUTH, ...opts });
const input = (content, threadId = `e2e-raw-${randomBytes(4).toString("hex")}`) => ({
  threadId,
  runId: "run-1",
  messages: [{ id: "m-1", role: "user", content }],
  tools: [],
  context: [],
  state: {},
  forwardedProps: {},
});

/** A raw POST to the agent; returns status, headers and the JSON error body. */
async function post(body, headers = {}) {
  const res = await fetch(server.url, {
    method: "POST",
    headers: { "Content-Type": "application/json", Accept: "text/event-stream", ...headers },
    body: typeof body === "string" ? body : JSON.stringify(body),
  });
  const textBody = await res.text();
  let json;
  try {
    json = JSON.parse(textBody);
  } catch {
    json = undefined;
  }
  return { status: res.status, headers: res.headers, json, text: textBody };
}

describe("demo server", () => {
  before(async () => {
    server = await startServer({
      label: "demo server",
      args: ["--demo", "--auth-token", TOKEN, "--max-body-bytes", String(MAX_BODY)],
      // The demo must not depend on a key from the environment.
      env: { GEMINI_API_KEY: undefined },
    });
  });

  after(async () => {
    const [stopped] = await stopAll(server);
    if (stopped) assert.ok(stopped.harnesses.length > 0, "the leak check saw the server's harness processes");
  });

  test("server tool (get_weather, demo mode)", async () => {
    const a = agent();
    a.say("What's the weather in Tokyo?");
    const rec = await run(a, {}, { log: server.log });
    assert.equal(outcome(rec), "success");
    const [call, ...more] = toolCalls(rec);
    assert.equal(more.length, 0, "one tool call");
    assert.equal(call.name, "get_weather");
    assert.deepEqual(call.args, { location: "Tokyo" });
    const result = JSON.parse(call.result);
    assert.equal(result.location, "Tokyo");
    assert.equal(typeof result.temperature, "number");
    const message = rec.newMessages.find((m) => m.role === "tool" && m.toolCallId === call.id);
    assert.equal(message?.content, call.result, "the client holds the server tool's result");
    assert.match(text(rec), /"location":"Tokyo"/, "the model reported the result");
    assert.deepEqual(rec.finished.pendingToolCallIds ?? [], [], "a server tool never waits for the client");
    assert.ok(ofType(rec, "REASONING_MESSAGE_CONTENT").length > 0, "the demo model reasons first");
  });

  test("capabilities say it is the demo", async () => {
    const caps = await checkCapabilities(`${server.url}/capabilities`, AUTH);
    assert.equal(caps.custom?.demo, true);
    assert.match(caps.custom?.notice ?? "", /demo/i);
    assert.match(caps.identity?.description ?? "", /demo/i);
    assert.deepEqual(caps.tools?.items?.map((t) => t.name), ["get_weather"]);
    assert.equal(caps.transport?.httpBinary, true);
  });

  test("401 without the bearer token or with a wrong one; the right one works", async () => {
    for (const headers of [{}, { Authorization: "Bearer wrong" }, { Authorization: TOKEN }]) {
      const res = await post(input("hello"), headers);
      assert.equal(res.status, 401, `POST with ${JSON.stringify(headers)}`);
      assert.equal(res.headers.get("www-authenticate"), "Bearer");
      assert.equal(res.json?.error, "unauthorized");
    }
    const caps = await fetch(`${server.url}/capabilities`);
    assert.equal(caps.status, 401, "capabilities need the token too");
    const health = await fetch(new URL("/healthz", server.url));
    assert.equal(health.status, 200, "health checks need no token");

    // The official client reports the refusal as an HTTP error.
    const wrong = agent({ headers: { Authorization: "Bearer wrong" } });
    wrong.say("hello");
    assert.equal((await refused(wrong)).status, 401);

    const right = agent();
    right.say("hello");
    const rec = await run(right, {}, { log: server.log });
    assert.equal(outcome(rec), "success");
    assert.match(text(rec), /offline demo model/);
  });

  test("415 for a body that is not JSON by content type", async () => {
    const res = await post(JSON.stringify(input("hello")), { ...AUTH, "Content-Type": "text/plain" });
    assert.equal(res.status, 415);
    assert.match(res.json?.detail ?? "", /application\/json/);
  });

  test("422 for invalid JSON and invalid input, with a precise message", async () => {
    const broken = await post('{"threadId": "t", "runId":', AUTH);
    assert.equal(broken.status, 422);
    assert.equal(broken.json?.error, "invalid RunAgentInput");

    const { runId, ...noRunId } = input("hello");
    const missing = await post(noRunId, AUTH);
    assert.equal(missing.status, 422);
    assert.match(missing.json?.detail ?? "", /runId/);

    const badMessage = await post({ ...input("x"), messages: [{ id: "m-1", role: "wizard", content: "hi" }] }, AUTH);
    assert.equal(badMessage.status, 422);
    assert.match(badMessage.json?.detail ?? "", /messages|role/);

    const badThread = await post(input("hello", "../../etc/passwd"), AUTH);
    assert.equal(badThread.status, 422);
    assert.match(badThread.json?.detail ?? "", /threadId/);
  });

  test("413 for a body over --max-body-bytes", async () => {
    const big = "x".repeat(MAX_BODY + 1);
    const res = await post(input(big), AUTH);
    assert.equal(res.status, 413);
    assert.match(res.json?.detail ?? res.text, /limit|large/i);

    // The official client surfaces it as an HTTP error, not a broken stream.
    const a = agent();
    a.say(big);
    assert.equal((await refused(a)).status, 413);
  });
});
