// Events as the installed @ag-ui/client (0.0.59 here) takes them (dist/events.js): what its older
// schema refuses of the server's AG-UI 1.1 is dropped, nothing else; what no schema accepts fails.
import assert from "node:assert/strict";
import { test } from "node:test";
import { toClientEvent } from "../dist/events.js";
import { InvalidEventError } from "../dist/sse.js";

const run = { threadId: "t", runId: "r" };

const ACCEPTED = [
  ["a plain event, unchanged", { type: "TEXT_MESSAGE_CONTENT", messageId: "m", delta: "hi" }, { type: "TEXT_MESSAGE_CONTENT", messageId: "m", delta: "hi" }],
  [
    "a run owing frontend tool results: the outcome without pendingToolCallIds",
    { type: "RUN_FINISHED", ...run, outcome: { type: "success", pendingToolCallIds: ["c1"] } },
    { type: "RUN_FINISHED", ...run, outcome: { type: "success" } },
  ],
  ["a stopped run: a plain RUN_FINISHED", { type: "RUN_FINISHED", ...run, outcome: { type: "cancelled" } }, { type: "RUN_FINISHED", ...run }],
  [
    "an interrupt outcome, kept",
    { type: "RUN_FINISHED", ...run, outcome: { type: "interrupt", interrupts: [{ id: "i1", reason: "antigravity:ask_question" }] } },
    { type: "RUN_FINISHED", ...run, outcome: { type: "interrupt", interrupts: [{ id: "i1", reason: "antigravity:ask_question" }] } },
  ],
];

for (const [name, wire, expected] of ACCEPTED) {
  test(name, () => {
    const event = toClientEvent(structuredClone(wire));
    for (const [key, value] of Object.entries(expected)) assert.deepEqual(event[key], value, key);
    if (!("outcome" in expected)) assert.equal(event.outcome, undefined);
  });
}

const REFUSED = [
  ["not an object", [1, 2]],
  ["no type", { messageId: "m" }],
  ["a known event missing a required field", { type: "TEXT_MESSAGE_CONTENT", delta: "hi" }],
];

for (const [name, wire] of REFUSED) {
  test(`refused: ${name}`, () => {
    assert.throws(() => toClientEvent(wire), InvalidEventError);
  });
}
