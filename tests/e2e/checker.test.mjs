// The suite's own violation checks, proven against a tiny in-process AG-UI endpoint that
// misbehaves on purpose: if these did not fail, a clean run elsewhere would prove nothing.
import assert from "node:assert/strict";
import http from "node:http";
import { after, before, describe, test } from "node:test";
import { E2EAgent, run } from "./lib/client.mjs";

/** Streams, by name; each gets the request's ids. */
const STREAMS = {
  good: (t, r) => [started(t, r), { type: "TEXT_MESSAGE_CHUNK", messageId: "m", delta: "hi" }, { type: "RUN_FINISHED", threadId: t, runId: r }],
  "no-terminal": (t, r) => [started(t, r), { type: "TEXT_MESSAGE_CHUNK", messageId: "m", delta: "hi" }],
  "two-terminals": (t, r) => [started(t, r), { type: "RUN_FINISHED", threadId: t, runId: r }, { type: "RUN_ERROR", message: "late" }],
  "wrong-run-id": (t) => [started(t, "other"), { type: "RUN_FINISHED", threadId: t, runId: "other" }],
  "content-before-start": (t, r) => [started(t, r), { type: "TEXT_MESSAGE_CONTENT", messageId: "m", delta: "x" }, { type: "RUN_FINISHED", threadId: t, runId: r }],
  "unknown-event": (t, r) => [started(t, r), { type: "SOMETHING_NEW" }, { type: "RUN_FINISHED", threadId: t, runId: r }],
};
const started = (threadId, runId) => ({ type: "RUN_STARTED", threadId, runId, protocolVersion: "1.0" });

let server;
let url;

describe("the suite's violation checks", () => {
  before(async () => {
    server = http.createServer((req, res) => {
      let body = "";
      req.on("data", (c) => (body += c));
      req.on("end", () => {
        const input = JSON.parse(body);
        const events = STREAMS[input.forwardedProps.stream](input.threadId, input.runId);
        res.writeHead(200, { "Content-Type": "text/event-stream" });
        // Timestamped as the server's are, so the validator's tally stays clean of hygiene notes.
        res.end(events.map((e) => `data: ${JSON.stringify({ ...e, timestamp: Date.now() })}\n\n`).join(""));
      });
    });
    await new Promise((resolve) => server.listen(0, "127.0.0.1", resolve));
    url = `http://127.0.0.1:${server.address().port}/`;
  });

  after(() => new Promise((resolve) => server.close(resolve)));

  const attempt = (stream, transport = "sse") => run(new E2EAgent({ url, transport }), { forwardedProps: { stream } }, { timeoutMs: 5_000 });

  test("a valid stream passes", async () => {
    const rec = await attempt("good");
    assert.equal(rec.wireEvents.length, 3);
  });

  for (const [stream, expected] of [
    ["no-terminal", /0 terminal events|not RUN_FINISHED or RUN_ERROR/],
    ["two-terminals", /official client failed|2 terminal events/],
    ["wrong-run-id", /not the request's/],
    ["content-before-start", /official client failed.*TEXT_MESSAGE_CONTENT/s],
    ["unknown-event", /official client warned.*SOMETHING_NEW/s],
  ]) {
    test(`catches: ${stream}`, async () => {
      await assert.rejects(attempt(stream), expected);
    });
  }

  test("catches: SSE where protobuf was asked for", async () => {
    await assert.rejects(attempt("good", "proto"), /asked for protobuf/);
  });
});
