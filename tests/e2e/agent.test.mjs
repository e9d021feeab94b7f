// One agent on the scripted model (or on Gemini in the live gate): streaming text, reasoning,
// a built-in tool, a frontend tool parked and resumed, an ask_question interrupt and resume,
// a 429 then success, a model 400, the protobuf transport and the agent's capabilities.
//
// One server and one model serve every test of this file; each test has its own thread and its
// own prompt tag, which the script keys its replies on, so tests stay independent.
import assert from "node:assert/strict";
import fs from "node:fs";
import path from "node:path";
import { after, before, describe, test } from "node:test";
import { E2EAgent, buildResumeArray, ofType, outcome, reasoning, refused, run, text, toolCalls } from "./lib/client.mjs";
import { checkCapabilities } from "./lib/capabilities.mjs";
import { GEMINI, NEEDS_SCRIPT, modelFlags } from "./lib/mode.mjs";
import { workspaceOf } from "./lib/workspace.mjs";
import { startModel, startServer, stopAll } from "./lib/procs.mjs";

const STREAMED = "The quick brown fox jumps over the lazy dog, one piece at a time.";

/** The model's replies, keyed on a tag in each test's prompt. */
const SCRIPT = {
  replies: [
    {
      name: "text",
      match: { user_text_contains: "e2e-text" },
      reply: { text: STREAMED, chunking: { words: 2 }, delay_ms: 40 },
    },
    {
      name: "reasoning",
      match: { user_text_contains: "e2e-reasoning" },
      reply: { thought: ["Two apples plus ", "three apples is five apples."], text: "You have five apples.", chunking: { words: 2 } },
    },
    // Tool results first: a tool result request still carries the prompt's tag.
    {
      name: "list_dir result",
      repeat: "forever",
      match: { function_response: "list_dir" },
      reply: { thought: "The listing is back.", text: "I found: {{tool_output}}" },
    },
    {
      name: "list_dir",
      repeat: "forever",
      match: { user_text_contains: "e2e-list", last_part: "text" },
      // The prompt is the directory's path, whose name carries the tag.
      reply: { thought: "I'll list that folder.", calls: [{ name: "list_dir", args: { DirectoryPath: "{{user_text}}" } }] },
    },
    {
      name: "frontend result",
      match: { function_response: "set_page_color" },
      reply: { text: "The page answered: {{tool_output}}" },
    },
    {
      name: "frontend",
      match: { user_text_contains: "e2e-frontend", last_part: "text" },
      reply: { text: "Changing the color.", calls: [{ name: "set_page_color", args: { color: "teal" } }] },
    },
    {
      name: "question answered",
      match: { function_response: "ask_question" },
      reply: { text: "Noted: {{tool_output}}" },
    },
    {
      name: "question",
      match: { user_text_contains: "e2e-ask", last_part: "text" },
      reply: {
        text: "Let me ask you first.",
        calls: [{ name: "ask_question", args: { questions: [{ question: "Which color?", options: ["Red", "Green", "Blue"], is_multi_select: false }] } }],
      },
    },
    { name: "rate limited", match: { user_text_contains: "e2e-429" }, reply: { error: { code: 429 } } },
    { name: "after the rate limit", match: { user_text_contains: "e2e-429" }, reply: { text: "Recovered after a rate limit." } },
    {
      name: "bad request",
      match: { user_text_contains: "e2e-400" },
      reply: { error: { code: 400, message: "Request contains an invalid argument." } },
    },
  ],
  default: { text: "No scripted answer." },
};

/** Built-in calls are shown under the harness's own tool names (`list_directory` for the model's
 * `list_dir`), as the reference integration does. */
const LIST_DIR = /^list_dir(ectory)?$/;

let model;
let server;
/**
 * A directory with known files for list_dir in the workspace of agent `a`'s thread (a confined
 * agent reaches nothing else). The workspace is a slot of the owner's tree, chosen when the
 * thread's conversation opens, so a first exchange opens it. The directory's name carries the
 * script's `e2e-list` tag, so the scripted prompt is just the path.
 */
async function fixturesFor(a) {
  a.say(GEMINI ? "Say hello." : "e2e-open the thread");
  assert.equal(outcome(await go(a)), "success", "the thread opens");
  const dir = path.join(workspaceOf(server.dir, a.threadId), "e2e-list");
  fs.mkdirSync(dir, { recursive: true });
  for (const name of ["alpha.txt", "beta.md"]) fs.writeFileSync(path.join(dir, name), `${name}\n`);
  return dir;
}

const agent = (opts = {}) => new E2EAgent({ url: server.url, ...opts });
const go = (a, params, opts) => run(a, params, { log: server.log, ...opts });

/** The scripted model's requests whose prompt contains `tag`. */
async function modelRequests(tag) {
  return (await model.requests()).filter((r) => JSON.stringify(r.body).includes(tag));
}

describe("one agent", () => {
  before(async () => {
    if (!GEMINI) model = await startModel(SCRIPT);
    const { args, env } = modelFlags(model);
    const tools = GEMINI ? ["--builtin-tools", "list_dir"] : ["--builtin-tools", "list_dir,ask_question", "--behavior", "interactive"];
    // Two quick retries make the scripted 429 cheap; real Gemini keeps the default retry policy.
    const retries = GEMINI ? [] : ["--api-retries", "2"];
    server = await startServer({ label: "agent server", args: [...args, ...tools, ...retries], env });
  });

  after(async () => {
    // Everything stops even if a test failed; the server's stop fails if a harness is left.
    const [stopped] = await stopAll(server, model);
    if (stopped) assert.ok(stopped.harnesses.length > 0, "the leak check saw the server's harness processes");
  });

  test("streaming text", async () => {
    const a = agent();
    a.say(GEMINI ? "Write a paragraph of about 120 words about red foxes." : "e2e-text: say something");
    const rec = await go(a);
    assert.equal(outcome(rec), "success");
    const deltas = ofType(rec, "TEXT_MESSAGE_CONTENT");
    assert.ok(deltas.length >= 2, `text arrives in pieces (${deltas.length} deltas)`);
    const reply = rec.newMessages.filter((m) => m.role === "assistant" && m.content).at(-1);
    assert.ok(reply, "the client's reducer built an assistant message");
    assert.equal(reply.content, text(rec));
    if (!GEMINI) {
      assert.equal(text(rec), STREAMED);
      // Streamed, not buffered: the pieces reached the client over time (the model waits
      // 40 ms before each of its 7 events).
      const at = rec.clientEvents.filter((e) => e.event.type === "TEXT_MESSAGE_CONTENT").map((e) => e.at);
      assert.ok(at.at(-1) - at[0] >= 150, `deltas spread over ${at.at(-1) - at[0]} ms`);
    }
  });

  test("reasoning", async () => {
    const a = agent();
    a.say(GEMINI ? "Think it through step by step: I have 2 apples and buy 3 more. How many now?" : "e2e-reasoning: how many apples?");
    const rec = await go(a);
    assert.equal(outcome(rec), "success");
    const types = rec.wireEvents.map((e) => e.type);
    for (const t of ["REASONING_START", "REASONING_MESSAGE_START", "REASONING_MESSAGE_CONTENT", "REASONING_MESSAGE_END", "REASONING_END"]) {
      assert.ok(types.includes(t), `a ${t} event`);
    }
    assert.ok(rec.newMessages.some((m) => m.role === "reasoning" && m.content), "the client kept a reasoning message");
    assert.match(text(rec), /five|5/i);
    if (!GEMINI) {
      assert.equal(reasoning(rec), "Two apples plus three apples is five apples.");
      assert.ok(types.lastIndexOf("REASONING_END") < types.indexOf("TEXT_MESSAGE_START"), "reasoning closes before the answer");
    }
  });

  test("built-in tool with its result (list_dir)", async () => {
    const a = agent();
    const fixtures = await fixturesFor(a);
    a.say(GEMINI ? `Use the list_dir tool on the directory ${fixtures} and tell me the file names you find there.` : fixtures);
    const rec = await go(a);
    assert.equal(outcome(rec), "success");
    const calls = toolCalls(rec).filter((c) => LIST_DIR.test(c.name));
    assert.ok(calls.length >= 1, "a list_dir tool call");
    const [call] = calls;
    assert.ok(call.args && typeof call.args === "object", "its arguments are one JSON object");
    assert.match(JSON.stringify(call.args), new RegExp(path.basename(fixtures)), "on the directory asked for");
    assert.match(call.result ?? "", /alpha\.txt/, "its result lists the directory");
    assert.match(call.result, /beta\.md/);
    const result = rec.newMessages.find((m) => m.role === "tool" && m.toolCallId === call.id);
    assert.ok(result, "the client attached the result as a tool message");
    assert.match(text(rec), /alpha\.txt/, "the model saw the listing");
  });

  test("frontend tool: park, then resume with the tool result", async () => {
    const a = agent();
    const tools = [
      {
        name: "set_page_color",
        description: "Sets the page's background color. Returns a confirmation code.",
        parameters: { type: "object", properties: { color: { type: "string", description: "a CSS color" } }, required: ["color"] },
      },
    ];
    a.say(GEMINI ? "Use the set_page_color tool to make the page teal. Afterwards repeat the confirmation code it returns." : "e2e-frontend: make it teal");
    const first = await go(a, { tools });
    assert.equal(outcome(first), "success", "a parked frontend tool ends the run with RUN_FINISHED");
    const [call] = toolCalls(first).filter((c) => c.name === "set_page_color");
    assert.ok(call, "the model called the frontend tool");
    assert.equal(call.result, undefined, "the server does not answer a frontend tool itself");
    assert.deepEqual(first.finished.pendingToolCallIds, [call.id], "the run ends with the call pending");
    if (!GEMINI) assert.deepEqual(call.args, { color: "teal" });

    a.answerTool(call.id, "Color set. Confirmation code: KINGFISHER-42.");
    const second = await go(a, { tools });
    assert.equal(outcome(second), "success");
    assert.deepEqual(second.finished.pendingToolCallIds ?? [], [], "nothing is pending any more");
    assert.equal(ofType(second, "TOOL_CALL_START").filter((e) => e.toolCallId === call.id).length, 0, "the call is not replayed");
    assert.match(text(second), /KINGFISHER-42/, "the model got the tool result and finished");
    if (!GEMINI) {
      const [request] = (await modelRequests("e2e-frontend")).filter((r) => r.answered_by?.name === "frontend result");
      assert.ok(request, "the model was asked again with the tool's result");
    }
  });

  test("ask_question interrupt and resume", { skip: NEEDS_SCRIPT }, async () => {
    const a = agent();
    a.say("e2e-ask: pick a color for me");
    const first = await go(a);
    assert.equal(outcome(first), "interrupt");
    const [interrupt] = first.finished.interrupts;
    assert.equal(first.finished.interrupts.length, 1);
    assert.equal(interrupt.reason, "antigravity:ask_question");
    assert.equal(interrupt.message, "Which color?");
    assert.ok(interrupt.responseSchema, "the interrupt says how to answer");
    assert.deepEqual(a.pendingInterrupts.map((i) => i.id), [interrupt.id], "the client holds the open interrupt");

    // The official client refuses to start a run that does not answer it.
    a.say("never mind");
    assert.match(String(await refused(a)), /interrupt/i);
    a.messages.pop();

    const resume = buildResumeArray(a.pendingInterrupts, { [interrupt.id]: { status: "resolved", payload: { responses: [{ selected_option_ids: ["1"] }] } } });
    const second = await go(a, { resume });
    assert.equal(outcome(second), "success");
    assert.deepEqual(a.pendingInterrupts, [], "the interrupt is closed");
    assert.match(text(second), /Green/, "the model got the answer");
  });

  test("429 from the model, retried, then success", { skip: NEEDS_SCRIPT }, async () => {
    const a = agent();
    a.say("e2e-429: hello");
    const rec = await go(a);
    assert.equal(outcome(rec), "success");
    assert.equal(text(rec), "Recovered after a rate limit.");
    const statuses = (await modelRequests("e2e-429")).map((r) => r.status);
    assert.deepEqual(statuses, [429, 200], "one rate-limited request, then the retry");
  });

  test("400 from the model is a RUN_ERROR", { skip: NEEDS_SCRIPT }, async () => {
    const a = agent();
    a.say("e2e-400: hello");
    const rec = await go(a);
    assert.equal(outcome(rec), "error");
    assert.equal(rec.runError.code, "AGENT_ERROR");
    assert.match(rec.runError.message, /400/);
    assert.ok(rec.ms < 30_000, "a 400 is not retried for long");
    const statuses = (await modelRequests("e2e-400")).map((r) => r.status);
    assert.deepEqual(statuses, [400], "a 400 is not retried at all");
  });

  test("protobuf transport", async () => {
    // The same conversation over SSE and protobuf: the binary run is negotiated by Accept,
    // decoded by the official @ag-ui/proto path, and carries the same events.
    const runs = {};
    for (const transport of ["sse", "proto"]) {
      const a = agent({ transport });
      const fixtures = await fixturesFor(a);
      a.say(GEMINI ? `Use the list_dir tool on ${fixtures}, then name the files.` : fixtures);
      runs[transport] = await go(a);
      assert.equal(outcome(runs[transport]), "success");
      assert.ok(toolCalls(runs[transport]).some((c) => LIST_DIR.test(c.name) && /alpha\.txt/.test(c.result ?? "")), `${transport}: tool call and result`);
    }
    assert.equal(runs.proto.http.contentType, "application/vnd.ag-ui.event+proto");
    if (!GEMINI) {
      assert.ok(ofType(runs.proto, "REASONING_MESSAGE_CONTENT").length > 0, "reasoning crosses the binary transport");
      assert.deepEqual(
        runs.proto.wireEvents.map((e) => e.type),
        runs.sse.wireEvents.map((e) => e.type),
        "SSE and protobuf carry the same event sequence",
      );
    }
  });

  test("capabilities describe this agent", async () => {
    const caps = await checkCapabilities(`${server.url}/capabilities`);
    assert.equal(caps.custom?.demo, undefined, "not a demo agent");
    assert.equal(caps.transport?.httpBinary, true);
    assert.equal(caps.tools?.clientProvided, true);
    assert.equal(caps.tools?.items, undefined, "the binary has no server tools outside the demo");
    assert.deepEqual(caps.custom?.builtinTools?.sort(), GEMINI ? ["list_dir"] : ["ask_question", "list_dir"]);
    assert.equal(caps.humanInTheLoop?.interrupts, !GEMINI, "interrupts only when ask_question can reach the user");
    assert.deepEqual(caps.custom?.interruptReasons, GEMINI ? undefined : { question: "antigravity:ask_question" });
    assert.equal(caps.execution?.codeExecution, false, "no run_command, no code execution");
  });
});
