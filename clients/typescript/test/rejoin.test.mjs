// How a /connect stream is spliced onto a run whose stream broke (dist/open-blocks.js), case by
// case: what the client already holds open is not reopened, what ended while the stream was down
// is closed before the live events, the connect's RUN_STARTED is dropped. Each result is also
// checked by @ag-ui/client's own verifier as one run.
import assert from "node:assert/strict";
import { test } from "node:test";
import { lastValueFrom, from, toArray } from "rxjs";
import { verifyEvents } from "@ag-ui/client";
import { OpenBlocks, Rejoin } from "../dist/open-blocks.js";

const started = { type: "RUN_STARTED", threadId: "t", runId: "r" };
const finished = { type: "RUN_FINISHED", threadId: "t", runId: "r" };
const snapshot = { type: "MESSAGES_SNAPSHOT", messages: [] };
/** What the client gets before a snapshot without activity or reasoning: an empty one. */
const emptied = { type: "MESSAGES_SNAPSHOT", messages: [] };
const state = { type: "STATE_SNAPSHOT", snapshot: {} };
const textStart = (id) => ({ type: "TEXT_MESSAGE_START", messageId: id, role: "assistant" });
const text = (id, delta) => ({ type: "TEXT_MESSAGE_CONTENT", messageId: id, delta });
const textEnd = (id) => ({ type: "TEXT_MESSAGE_END", messageId: id });
const toolStart = (id) => ({ type: "TOOL_CALL_START", toolCallId: id, toolCallName: "run_command", parentMessageId: "m1" });
const toolEnd = (id) => ({ type: "TOOL_CALL_END", toolCallId: id });
const subagentStart = (id) => ({ type: "SUBAGENT_STARTED", subagentRunId: id, name: "subagent", parentToolCallId: "c1" });
const subagentEnd = (id) => ({ type: "SUBAGENT_FINISHED", subagentRunId: id });

const CASES = [
  {
    name: "a message still streaming is continued, not reopened",
    before: [started, textStart("m1"), text("m1", "Hel")],
    connect: [started, snapshot, state, textStart("m1"), text("m1", "lo"), textEnd("m1"), finished],
    passed: [emptied, snapshot, state, text("m1", "lo"), textEnd("m1"), finished],
  },
  {
    name: "a message that ended while the stream was down is closed before the run ends",
    before: [started, textStart("m1"), text("m1", "Hel")],
    connect: [started, snapshot, state, finished],
    passed: [emptied, snapshot, state, textEnd("m1"), finished],
  },
  {
    name: "blocks opened while the stream was down are opened, ended ones closed innermost first",
    before: [started, subagentStart("s1"), textStart("m1"), toolStart("c1")],
    connect: [started, snapshot, state, subagentStart("s1"), textStart("m2"), text("m2", "next"), textEnd("m2"), subagentEnd("s1"), finished],
    passed: [emptied, snapshot, state, toolEnd("c1"), textEnd("m1"), textStart("m2"), text("m2", "next"), textEnd("m2"), subagentEnd("s1"), finished],
  },
  {
    name: "nothing open: the restatement, then the live events",
    before: [started, textStart("m1"), textEnd("m1")],
    connect: [started, snapshot, state, textStart("m2"), textEnd("m2"), finished],
    passed: [emptied, snapshot, state, textStart("m2"), textEnd("m2"), finished],
  },
];

for (const { name, before, connect, passed } of CASES) {
  test(name, async () => {
    const open = new OpenBlocks();
    for (const event of before) open.apply(event);
    const rejoin = new Rejoin(open);
    const out = [];
    for (const event of connect) {
      for (const taken of rejoin.take(event)) {
        open.apply(taken);
        out.push(taken);
      }
    }
    assert.deepEqual(out, passed);
    // The client sees one valid run: what it got before the cut, then what was passed on.
    const verified = await lastValueFrom(from([...before, ...out]).pipe(verifyEvents(false), toArray()));
    assert.equal(verified.length, before.length + out.length);
  });
}
