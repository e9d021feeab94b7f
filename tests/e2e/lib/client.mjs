// Driving the server with the official @ag-ui/client 1.0 HttpAgent and turning everything the
// client could object to into a test failure.
//
// The official pipeline (transport parse -> compatibility boundary -> enforceEvents -> chunk
// transform -> verifyEvents -> reducer) throws on hard violations but only *warns* (console.warn /
// console.error) on tolerated ones, and it does not check that a stream ends with exactly one
// terminal event or that ids are echoed. So a run here is "clean" only when:
//   - runAgent resolved (no transport, schema or verify error);
//   - the client printed no warning or error at all while the run was active;
//   - the body, decoded independently from the wire, carries exactly the events the client
//     consumed, starts with RUN_STARTED and ends with its only terminal event;
//   - RUN_STARTED / RUN_FINISHED echo the request's threadId and runId;
//   - the transport is the one asked for (exact protobuf media type for binary).
import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import fs from "node:fs";
import path from "node:path";
import { tap } from "rxjs/operators";
import { AGUIConnectNotImplementedError, HttpAgent, buildResumeArray, runHttpRequest, transformHttpEventStream } from "@ag-ui/client";
import { catchError, throwError } from "rxjs";
import * as proto from "@ag-ui/proto";
import { GEMINI } from "./mode.mjs";

export const PROTO = proto.AGUI_MEDIA_TYPE; // "application/vnd.ag-ui.event+proto"
export { buildResumeArray };

// ---------------------------------------------------------------- console capture
// The client reports tolerated deviations only through the console. Capture them for the run
// in progress; outside a run they pass through untouched.
let current;
for (const level of ["warn", "error"]) {
  const original = console[level].bind(console);
  console[level] = (...args) => {
    if (!current) return original(...args);
    current.warnings.push(`${level}: ${args.map((a) => (a instanceof Error ? a.message : typeof a === "string" ? a : JSON.stringify(a))).join(" ")}`);
  };
}

/** HttpAgent with a tapped fetch (wire bytes), tapped transport output and a chosen Accept. */
export class E2EAgent extends HttpAgent {
  /**
   * @param {object} o
   * @param {string} o.url        the agent endpoint
   * @param {string} [o.threadId] default: a fresh one
   * @param {"sse"|"proto"} [o.transport]
   * @param {Record<string,string>} [o.headers]
   */
  constructor({ url, threadId = `e2e-${randomUUID()}`, transport = "sse", headers = {} }) {
    super({ url, threadId, headers, fetch: (u, init) => tappedFetch(u, init) });
    this.transport = transport;
  }

  requestInit(input) {
    const init = super.requestInit(input);
    // HttpAgent 1.0 always asks for SSE; binary needs the proto type in Accept. The client
    // then picks its parser from the response Content-Type on its own.
    if (this.transport === "proto") init.headers = { ...init.headers, Accept: PROTO };
    if (current) current.request = JSON.parse(init.body);
    return init;
  }

  run(input) {
    const rec = current;
    // Events exactly as the transport decoded them, before any client processing.
    return super.run(input).pipe(tap((event) => rec?.clientEvents.push({ event: structuredClone(event), at: Date.now() })));
  }

  /**
   * `POST <url>/connect` with the run input, as the unreleased client convention does (the
   * published HttpAgent 1.0 has no connect): 404/405 mean "no history".
   */
  connect(input) {
    const url = new URL(this.url);
    url.pathname = `${url.pathname.replace(/\/+$/, "")}/connect`;
    const rec = current;
    return transformHttpEventStream(runHttpRequest(() => this.fetch(url.toString(), this.requestInit(input))), this.debugLogger)
      .pipe(
        catchError((e) => throwError(() => (e?.status === 404 || e?.status === 405 ? new AGUIConnectNotImplementedError() : e))),
        tap((event) => rec?.clientEvents.push({ event: structuredClone(event), at: Date.now() })),
      );
  }

  /** Adds a user message to the conversation. */
  say(content) {
    const message = { id: `u-${randomUUID()}`, role: "user", content };
    this.messages.push(message);
    return message;
  }

  /** Answers a frontend tool call with a tool message. */
  answerTool(toolCallId, content) {
    this.messages.push({ id: `t-${randomUUID()}`, role: "tool", toolCallId, content });
  }
}

async function tappedFetch(url, init) {
  const rec = current;
  const res = await fetch(url, init);
  if (!rec) return res;
  rec.http = { status: res.status, contentType: res.headers.get("content-type") };
  if (!res.body) return res;
  const [forClient, forUs] = res.body.tee();
  rec.bodyDone = (async () => {
    const parts = [];
    for await (const chunk of forUs) parts.push(Buffer.from(chunk));
    rec.wire = Buffer.concat(parts);
  })().catch((err) => (rec.wireError = String(err?.message ?? err)));
  return new Response(forClient, { status: res.status, statusText: res.statusText, headers: res.headers });
}

// --------------------------------------------------------------- wire decoding
/** SSE body -> events, framed the way the client frames it (split on "\n\n", data: lines). */
export function decodeSse(text) {
  const events = [];
  for (const block of text.split("\n\n")) {
    const data = block
      .split("\n")
      .filter((line) => line.startsWith("data:"))
      .map((line) => line.slice(5).replace(/^ /, ""));
    if (data.length) events.push(JSON.parse(data.join("\n")));
  }
  return events;
}

/** Protobuf body -> events (4-byte big-endian length + ag_ui.Event per frame). */
export function decodeProto(buf) {
  const events = [];
  let off = 0;
  while (off + 4 <= buf.length) {
    const len = buf.readUInt32BE(off);
    assert.ok(off + 4 + len <= buf.length, `protobuf frame at byte ${off} is truncated`);
    events.push(proto.decode(new Uint8Array(buf.subarray(off + 4, off + 4 + len))));
    off += 4 + len;
  }
  assert.equal(off, buf.length, `${buf.length - off} trailing bytes do not form a frame`);
  return events;
}

const TERMINAL = new Set(["RUN_FINISHED", "RUN_ERROR"]);

/**
 * One run through the official client. Returns a record; throws (with the event list and the
 * server log tail) on any protocol violation.
 *
 * @param {E2EAgent} agent
 * @param {object} [params]  RunAgentParameters (tools, resume, forwardedProps, runId …)
 * @param {object} [opts]
 * @param {number} [opts.timeoutMs]
 * @param {() => string} [opts.log]  server log tail, added to failure messages
 * @param {object} [opts.subscriber]  more `AgentSubscriber` callbacks for this run (e.g. to act
 *   mid-run once the reply has begun)
 */
export async function run(agent, params = {}, { timeoutMs = GEMINI ? 180_000 : 60_000, log, connect = false, subscriber = {} } = {}) {
  assert.equal(current, undefined, "runs must not overlap (console capture is per run)");
  const runId = params.runId ?? `run-${randomUUID()}`;
  const rec = (current = { runId, threadId: agent.threadId, clientEvents: [], warnings: [], started: Date.now() });
  const before = new Set(agent.messages.map((m) => m.id));
  const timer = setTimeout(() => {
    rec.timedOut = true;
    agent.abortRun();
  }, timeoutMs);
  try {
    const go = connect ? agent.connectAgent.bind(agent) : agent.runAgent.bind(agent);
    await go({ ...params, runId }, {
      ...subscriber,
      onRunFinishedEvent: (p) => {
        rec.finished = { outcome: p.outcome, interrupts: p.interrupts, pendingToolCallIds: p.pendingToolCallIds, result: p.result };
      },
      onRunErrorEvent: ({ event }) => {
        rec.runError = structuredClone(event);
      },
    });
  } catch (err) {
    rec.failure = err;
  } finally {
    clearTimeout(timer);
    await rec.bodyDone;
    current = undefined;
  }
  rec.ms = Date.now() - rec.started;
  rec.newMessages = agent.messages.filter((m) => !before.has(m.id));
  rec.events = rec.clientEvents.map((e) => e.event);
  check(rec, agent, log);
  keepStream(rec, agent);
  return rec;
}

// ------------------------------------------------------------- streams kept for ag-ui-validate
let kept = 0;

/**
 * Writes the response of a checked run into `$E2E_STREAMS_DIR` (set by `cargo xtask e2e`), where
 * the independent validator `ag-ui-validate` checks every one after the suite: an SSE body as
 * received (its framing is checked too), a protobuf body as JSONL of the decoded events (the
 * validator reads no protobuf).
 */
function keepStream(rec, agent) {
  const dir = process.env.E2E_STREAMS_DIR;
  if (!dir || !rec.wire) return;
  kept += 1;
  const base = path.join(dir, `${process.pid}-${String(kept).padStart(4, "0")}-${rec.runId}`);
  if (agent.transport === "proto") {
    fs.writeFileSync(`${base}.jsonl`, rec.wireEvents.map((e) => JSON.stringify(e)).join("\n") + "\n");
  } else {
    fs.writeFileSync(`${base}.sse`, rec.wire);
  }
}

function describe(rec, log) {
  const types = (rec.wireEvents ?? rec.events).map((e) => e.type).join(" ");
  const error = rec.runError ? `\n  RUN_ERROR ${rec.runError.code}: ${rec.runError.message}` : "";
  return `\n  thread ${rec.threadId} run ${rec.runId}\n  events: ${types || "(none)"}${error}${rec.wire && !rec.wireEvents ? `\n  body: ${rec.wire.toString("utf8").slice(0, 2000)}` : ""}${log ? `\n--- server log\n${log()}` : ""}`;
}

function check(rec, agent, log) {
  const fail = (what) => assert.fail(`${what}${describe(rec, log)}`);
  if (rec.timedOut) fail(`no terminal event within the timeout (client aborted)`);
  if (rec.failure) fail(`the official client failed the run: ${rec.failure?.stack ?? rec.failure}`);
  if (rec.warnings.length) fail(`the official client warned:\n  ${rec.warnings.join("\n  ")}`);
  if (rec.wireError) fail(`reading the body failed: ${rec.wireError}`);
  assert.ok(rec.http, "no HTTP response was seen");
  if (rec.http.status !== 200) fail(`HTTP ${rec.http.status}`);

  // Transport: the client parses binary only on this exact media type.
  if (agent.transport === "proto") {
    if (rec.http.contentType !== PROTO) fail(`asked for protobuf, got Content-Type '${rec.http.contentType}'`);
    rec.wireEvents = decodeProto(rec.wire);
  } else {
    if (!/^text\/event-stream(;|$)/.test(rec.http.contentType ?? "")) fail(`SSE run got Content-Type '${rec.http.contentType}'`);
    const text = rec.wire.toString("utf8");
    if (text.includes("\r")) fail("SSE body contains CR (the client splits only on \\n\\n)");
    if (text.length && !text.endsWith("\n\n")) fail("SSE body does not end with a blank line");
    rec.wireEvents = decodeSse(text);
  }
  if (rec.wireEvents.length !== rec.events.length) {
    fail(`the body carries ${rec.wireEvents.length} events but the client consumed ${rec.events.length}`);
  }
  const consumed = rec.events.map((e) => e.type).join(" ");
  if (rec.wireEvents.map((e) => e.type).join(" ") !== consumed) fail(`the client consumed other events than the body carries: ${consumed}`);

  // Framing: RUN_STARTED first, exactly one terminal event, last.
  const events = rec.wireEvents;
  if (events[0]?.type !== "RUN_STARTED") fail("the first event is not RUN_STARTED");
  const terminals = events.filter((e) => TERMINAL.has(e.type));
  if (terminals.length !== 1) fail(`${terminals.length} terminal events (want exactly 1)`);
  if (!TERMINAL.has(events.at(-1).type)) fail("the last event is not RUN_FINISHED or RUN_ERROR");

  // Ids echoed.
  for (const e of events.filter((e) => e.type === "RUN_STARTED" || e.type === "RUN_FINISHED")) {
    if (e.threadId !== rec.threadId || e.runId !== rec.runId) {
      fail(`${e.type} carries threadId '${e.threadId}' runId '${e.runId}', not the request's '${rec.threadId}' '${rec.runId}'`);
    }
  }
  if (rec.request && (rec.request.threadId !== rec.threadId || rec.request.runId !== rec.runId)) fail("the client sent other ids than asked");
}

/**
 * A run the client must refuse (an HTTP error, or a precondition such as an unanswered
 * interrupt). Returns the error; what the client logs about it is captured, not printed.
 */
export async function refused(agent, params = {}) {
  assert.equal(current, undefined, "runs must not overlap (console capture is per run)");
  current = { clientEvents: [], warnings: [] };
  try {
    await agent.runAgent({ runId: `run-${randomUUID()}`, ...params });
  } catch (err) {
    return err;
  } finally {
    current = undefined;
  }
  assert.fail("the client ran what it should have refused");
}

// ------------------------------------------------------------------- accessors
/** Events of `type` (from the wire). */
export const ofType = (rec, type) => rec.wireEvents.filter((e) => e.type === type);

/** Concatenated assistant text of a run. */
export const text = (rec) => ofType(rec, "TEXT_MESSAGE_CONTENT").map((e) => e.delta).join("");

/** Concatenated reasoning text of a run. */
export const reasoning = (rec) => ofType(rec, "REASONING_MESSAGE_CONTENT").map((e) => e.delta).join("");

/** Tool calls of a run: [{ id, name, args (parsed), result? }]. */
export function toolCalls(rec) {
  const calls = new Map();
  for (const e of rec.wireEvents) {
    if (e.type === "TOOL_CALL_START") calls.set(e.toolCallId, { id: e.toolCallId, name: e.toolCallName, argsText: "" });
    if (e.type === "TOOL_CALL_ARGS") calls.get(e.toolCallId).argsText += e.delta;
    if (e.type === "TOOL_CALL_RESULT") {
      const call = calls.get(e.toolCallId) ?? { id: e.toolCallId };
      call.result = e.content;
      calls.set(e.toolCallId, call);
    }
  }
  return [...calls.values()].map((c) => ({ ...c, args: c.argsText ? JSON.parse(c.argsText) : undefined }));
}

/** The run's terminal outcome type: "success" | "interrupt" | "error". */
export const outcome = (rec) => (rec.runError ? "error" : (rec.finished?.outcome ?? "none"));
