// The parking gate (run by `cargo xtask live-gate`, not by the regular suite, because it waits):
// a frontend tool call parks the turn, the run ends and no client is attached for PARK_SECONDS
// (default 45), then a new run carrying the tool result resumes the same turn and the model
// finishes with what the tool returned.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { setTimeout as sleep } from "node:timers/promises";
import { E2EAgent, outcome, run, text, toolCalls } from "../lib/client.mjs";
import { GEMINI, modelFlags } from "../lib/mode.mjs";
import { startModel, startServer, stopAll } from "../lib/procs.mjs";

const PARK_SECONDS = Number(process.env.PARK_SECONDS ?? 45);
assert.ok(Number.isFinite(PARK_SECONDS) && PARK_SECONDS >= 0, `PARK_SECONDS=${process.env.PARK_SECONDS} is not a number of seconds`);

const TOOL = {
  name: "lookup_booking_code",
  description: "Looks up the user's booking code in the page. Returns the code.",
  parameters: { type: "object", properties: { reason: { type: "string", description: "why you need it" } }, required: ["reason"] },
};
const CODE = "ALBATROSS-7731";

const SCRIPT = {
  replies: [
    { name: "park", match: { last_part: "text" }, reply: { text: "Let me look that up.", calls: [{ name: TOOL.name, args: { reason: "the user asked" } }] } },
    { name: "resume", match: { function_response: TOOL.name }, reply: { text: "Your booking code is {{tool_output}}" } },
  ],
};

let model;
let server;

/** The server's `agui_parked_sessions` gauge, summed over agents. */
async function parkedSessions() {
  const body = await (await fetch(`${server.url}/metrics`)).text();
  return body
    .split("\n")
    .filter((line) => line.startsWith("agui_parked_sessions"))
    .reduce((sum, line) => sum + Number(line.split(" ").at(-1)), 0);
}

describe("parking gate", () => {
  before(async () => {
    if (!GEMINI) model = await startModel(SCRIPT);
    const { args, env } = modelFlags(model);
    server = await startServer({ label: "parking server", args: [...args, "--builtin-tools", "none"], env });
  });

  after(async () => {
    const [stopped] = await stopAll(server, model);
    if (stopped) assert.ok(stopped.harnesses.length > 0, "the leak check saw the server's harness processes");
  });

  test(`frontend tool parked ${PARK_SECONDS} s with no client attached, then resumed`, { timeout: (PARK_SECONDS + 180) * 1000 }, async () => {
    const a = new E2EAgent({ url: server.url });
    a.say(GEMINI ? `Call ${TOOL.name} to get my booking code, then tell me the code exactly as it returns it.` : "What is my booking code?");
    const first = await run(a, { tools: [TOOL] }, { log: server.log });
    assert.equal(outcome(first), "success");
    const [call] = toolCalls(first).filter((c) => c.name === TOOL.name);
    assert.ok(call, "the model called the frontend tool");
    assert.deepEqual(first.finished.pendingToolCallIds, [call.id]);

    // The run's stream is closed: nobody is attached while the turn waits.
    assert.equal(await parkedSessions(), 1, "the server holds the turn parked");
    const harnessesBefore = server.harnesses();
    await sleep(PARK_SECONDS * 1000);
    assert.equal(await parkedSessions(), 1, `still parked after ${PARK_SECONDS} s`);
    if (!GEMINI) assert.equal((await model.requests()).length, 1, "the model was not called again while parked");

    a.answerTool(call.id, CODE);
    const second = await run(a, { tools: [TOOL] }, { log: server.log });
    assert.equal(outcome(second), "success");
    assert.deepEqual(second.finished.pendingToolCallIds ?? [], []);
    assert.match(text(second), new RegExp(CODE), "the model got the tool result after the park");
    assert.equal(await parkedSessions(), 0, "nothing is parked any more");
    assert.ok(harnessesBefore.length > 0, "a harness served the turn");
    if (!GEMINI) {
      const requests = await model.requests();
      assert.equal(requests.length, 2, "one request to park, one to finish");
      assert.equal(requests[1].answered_by?.name, "resume");
    }
  });
});
