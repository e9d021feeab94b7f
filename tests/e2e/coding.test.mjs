// A coding agent's progress with the official client against the real binary, harness and
// scripted model: a subagent as SUBAGENT_STARTED … SUBAGENT_FINISHED with its messages carrying
// its subagentRunId, two subagents at once, a question asked inside a subagent (its interrupt
// attributed, the invocation suspended and continued), file changes and a command as
// activities, all of it back in connect's MESSAGES_SNAPSHOT — and the old shape
// (`subagent_events = "steps"`, `activities = false`) on a second agent.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { E2EAgent, buildResumeArray, ofType, outcome, run, toolCalls } from "./lib/client.mjs";
import { NEEDS_SCRIPT } from "./lib/mode.mjs";
import { startModel, startServer, stopAll } from "./lib/procs.mjs";

const TOML = `
[[agents]]
path = "/coder"
name = "coder"
builtin_tools = ["invoke_subagent", "write_to_file", "replace_file_content", "run_command"]

[[agents]]
path = "/old"
name = "old"
builtin_tools = ["invoke_subagent", "write_to_file", "replace_file_content", "run_command"]
subagent_events = "steps"
activities = false

[[agents]]
path = "/asker"
name = "asker"
builtin_tools = ["invoke_subagent", "ask_question"]
behavior = "interactive"
`;

const subtask = (tag, reply) => ({
  name: `subagent ${tag}`,
  repeat: "forever",
  match: { last_part: "text", system_message: true, user_text_contains: tag },
  reply: { thought: `thinking about ${tag}`, text: reply },
});

const invoke = (tag) => ({ name: "invoke_subagent", args: { Subagents: [{ TypeName: "research", Role: "Helper", Prompt: `${tag} say hi` }] } });

const SCRIPT = {
  replies: [
    // A subagent that finishes before the root's next request has its idle message in the
    // invocation's result (the harness appends it to the output): the root answers only once.
    { name: "after invoke, the subagent done", repeat: "forever", match: { function_response: "invoke_subagent", contains: "has gone idle" }, reply: { text: "The subagent says hi." } },
    { name: "after invoke", repeat: "forever", match: { function_response: "invoke_subagent" }, reply: { text: "Delegated." } },
    { name: "after subagents", repeat: "forever", match: { last_part: "text", system_message: true, user_text_contains: "has gone idle" }, reply: { text: "The subagent says hi." } },
    subtask("E2E-SUB-A", "result from A"),
    subtask("E2E-SUB-B", "result from B"),
    { name: "question answered", repeat: "forever", match: { function_response: "ask_question" }, reply: { text: "The user chose {{tool_output}}" } },
    {
      name: "subagent asks",
      repeat: "forever",
      match: { last_part: "text", system_message: true, user_text_contains: "E2E-QUESTION" },
      reply: { calls: [{ name: "ask_question", args: { questions: [{ question: "Which fruit?", options: ["Apple", "Pear"], is_multi_select: false }] } }] },
    },
    {
      name: "delegate a question",
      repeat: "forever",
      match: { user_text_contains: "c-ask", last_part: "text", system_message: false },
      // A `self` subagent has the parent's tools, `ask_question` included (a `research` one has not).
      reply: { calls: [{ name: "invoke_subagent", args: { Subagents: [{ TypeName: "self", Role: "Asker", Prompt: "E2E-QUESTION ask the user" }] } }] },
    },
    { name: "delegate", repeat: "forever", match: { user_text_contains: "c-delegate", last_part: "text", system_message: false }, reply: { calls: [invoke("E2E-SUB-A")] } },
    { name: "delegate twice", repeat: "forever", match: { user_text_contains: "c-twice", last_part: "text", system_message: false }, reply: { calls: [invoke("E2E-SUB-A"), invoke("E2E-SUB-B")] } },
    { name: "after the command", repeat: "forever", match: { function_response: "run_command" }, reply: { text: "The command finished." } },
    {
      name: "after the edit",
      repeat: "forever",
      match: { function_response: "replace_file_content" },
      reply: { calls: [{ name: "run_command", args: { CommandLine: "cat notes.md", Cwd: "{{workspace}}", WaitMsBeforeAsync: 5000 } }] },
    },
    {
      name: "after the file",
      repeat: "forever",
      match: { function_response: "write_to_file" },
      reply: {
        calls: [
          {
            name: "replace_file_content",
            args: { TargetFile: "{{workspace}}/notes.md", Instruction: "edit", AllowMultiple: false, TargetContent: "- one\n", ReplacementContent: "- one, edited\n", StartLine: 1, EndLine: 3 },
            fill_required: true,
          },
        ],
      },
    },
    {
      name: "write a file",
      repeat: "forever",
      match: { user_text_contains: "c-code", last_part: "text" },
      reply: { text: "Writing the notes.", calls: [{ name: "write_to_file", args: { TargetFile: "{{workspace}}/notes.md", CodeContent: "# Notes\n- one\n- two\n" }, fill_required: true }] },
    },
  ],
  default: { text: "No scripted answer." },
};

let model;
let server;

const agent = (path, opts = {}) => new E2EAgent({ url: `${server.url}${path}`, ...opts });

/** The messages a client holds, as comparable data. */
const shape = (messages) =>
  messages.map(({ id, role, content, toolCalls, toolCallId, subagentRunId, activityType }) => ({ id, role, content, toolCalls, toolCallId, subagentRunId, activityType }));

/** A fresh client on the thread connects and must end up holding what `stayer` holds. */
async function connectsToTheSame(path, stayer) {
  const reloaded = agent(path, { threadId: stayer.threadId });
  const rec = await run(reloaded, {}, { connect: true, log: server.log });
  assert.equal(outcome(rec), "success");
  assert.deepEqual(shape(reloaded.messages), shape(stayer.messages), "connect restores the messages the live client holds");
  return ofType(rec, "MESSAGES_SNAPSHOT")[0].messages;
}

describe("a coding agent's progress (subagents, activities)", { skip: NEEDS_SCRIPT }, () => {
  before(async () => {
    model = await startModel(SCRIPT);
    server = await startServer({ label: "coding server", config: TOML, args: ["--gemini-base-url", model.url, "--api-key", "e2e-key"] });
  });

  after(async () => {
    await stopAll(server, model);
  });

  test("a subagent is announced, its messages carry its subagentRunId, and connect restores them", async () => {
    const a = agent("/coder");
    a.say("c-delegate: ask a helper");
    const rec = await run(a, {}, { timeoutMs: 90_000, log: server.log });
    assert.equal(outcome(rec), "success");
    const [invocation] = toolCalls(rec).filter((c) => c.name === "invoke_subagent");
    assert.ok(invocation, "the invocation is a tool call");
    const started = ofType(rec, "SUBAGENT_STARTED");
    assert.equal(started.length, 1);
    const id = started[0].subagentRunId;
    assert.equal(started[0].parentToolCallId, invocation.id, "the subagent names the call that started it");
    assert.equal(started[0].name, "subagent");
    const finished = ofType(rec, "SUBAGENT_FINISHED");
    assert.deepEqual(finished.map((e) => [e.subagentRunId, e.result]), [[id, "result from A"]]);
    const types = rec.wireEvents.map((e) => e.type);
    assert.ok(types.indexOf("SUBAGENT_FINISHED") < types.indexOf("RUN_FINISHED"));
    assert.equal(invocation.result, "result from A", "the call's result is the subagent's reply");

    // The official client's message list: the subagent's reasoning and reply are its own.
    const sub = a.messages.filter((m) => m.subagentRunId === id);
    assert.deepEqual(sub.map((m) => [m.role, m.content]), [["reasoning", "thinking about E2E-SUB-A"], ["assistant", "result from A"]]);
    const parent = a.messages.filter((m) => !m.subagentRunId && m.role === "assistant").map((m) => m.content ?? "");
    assert.ok(parent.includes("The subagent says hi."), `the parent's reply: ${JSON.stringify(parent)}`);
    assert.ok(a.messages.some((m) => m.role === "tool" && m.toolCallId === invocation.id && m.content === "result from A"));

    const snapshot = await connectsToTheSame("/coder", a);
    assert.ok(snapshot.some((m) => m.subagentRunId === id), "the snapshot keeps the attribution");
  });

  test("two subagents at once: each is its own invocation of its own call", async () => {
    const a = agent("/coder");
    a.say("c-twice: ask two helpers");
    const rec = await run(a, {}, { timeoutMs: 90_000, log: server.log });
    assert.equal(outcome(rec), "success");
    const calls = toolCalls(rec).filter((c) => c.name === "invoke_subagent");
    const started = ofType(rec, "SUBAGENT_STARTED");
    assert.equal(calls.length, 2);
    assert.deepEqual(started.map((e) => e.parentToolCallId).sort(), calls.map((c) => c.id).sort(), "one invocation per call");
    assert.equal(new Set(started.map((e) => e.subagentRunId)).size, 2);
    const replies = Object.fromEntries(started.map((e) => [e.subagentRunId, a.messages.find((m) => m.role === "assistant" && m.subagentRunId === e.subagentRunId)?.content]));
    assert.deepEqual(Object.values(replies).sort(), ["result from A", "result from B"]);
    for (const call of calls) {
      const sa = started.find((e) => e.parentToolCallId === call.id).subagentRunId;
      assert.equal(call.result, replies[sa], "each call's result is its own subagent's reply");
    }
    assert.equal(ofType(rec, "SUBAGENT_FINISHED").length, 2);
  });

  test("a question inside a subagent: its interrupt names the subagent, which is suspended, then continued", async () => {
    const a = agent("/asker");
    a.say("c-ask: let a helper ask me");
    const first = await run(a, {}, { timeoutMs: 90_000, log: server.log });
    assert.equal(outcome(first), "interrupt");
    const [started] = ofType(first, "SUBAGENT_STARTED");
    const id = started.subagentRunId;
    const [interrupt] = first.finished.interrupts;
    assert.equal(interrupt.subagentRunId, id, "the interrupt was raised inside the subagent");
    const [suspended] = ofType(first, "SUBAGENT_FINISHED");
    const { timestamp, ...rest } = suspended;
    assert.equal(typeof timestamp, "number", "every event carries its time");
    assert.deepEqual(rest, { type: "SUBAGENT_FINISHED", subagentRunId: id, outcome: { type: "suspended", interruptIds: [interrupt.id] } });

    const resume = buildResumeArray(a.pendingInterrupts, { [interrupt.id]: { status: "resolved", payload: { responses: [{ selected_option_ids: ["1"] }] } } });
    const second = await run(a, { resume }, { timeoutMs: 90_000, log: server.log });
    assert.equal(outcome(second), "success");
    const again = ofType(second, "SUBAGENT_STARTED");
    assert.deepEqual(again.map((e) => e.subagentRunId), [id], "the suspended invocation continues under its id");
    assert.deepEqual(ofType(second, "SUBAGENT_FINISHED").map((e) => [e.subagentRunId, e.outcome]), [[id, undefined]]);
    const reply = a.messages.find((m) => m.role === "assistant" && m.subagentRunId === id && m.content?.startsWith("The user chose"));
    assert.ok(reply, "the subagent's answer is its own message");
    assert.match(reply.content, /Pear/);
  });

  test("file changes and a command are activities naming their calls, restored by connect", async () => {
    const a = agent("/coder");
    a.say("c-code: write the notes");
    const rec = await run(a, {}, { timeoutMs: 90_000, log: server.log });
    assert.equal(outcome(rec), "success");
    const calls = toolCalls(rec);
    const activities = a.messages.filter((m) => m.role === "activity");
    assert.deepEqual(activities.map((m) => m.activityType), ["file_change", "file_change", "command"]);
    const [created, edited, command] = activities;
    assert.equal(created.content.operation, "create");
    assert.match(created.content.path, /\/notes\.md$/);
    assert.match(created.content.diff, /^--- \/dev\/null\n\+\+\+ b\/notes\.md\n@@ -0,0 \+1,3 @@\n\+# Notes\n\+- one\n\+- two\n$/);
    assert.equal(edited.content.operation, "edit");
    assert.match(edited.content.diff, /\n-- one\n\+- one, edited\n/);
    // The harness reports both file tools as its `edit_file` action.
    assert.equal(calls.find((c) => c.id === created.content.toolCallId)?.name, "edit_file");
    assert.equal(calls.find((c) => c.id === edited.content.toolCallId)?.name, "edit_file");
    assert.notEqual(created.content.toolCallId, edited.content.toolCallId);
    assert.equal(calls.find((c) => c.id === command.content.toolCallId)?.name, "run_command");
    assert.equal(command.content.command, "cat notes.md");
    assert.equal(command.content.state, "completed");
    assert.equal(command.content.exitCode, 0);
    assert.match(command.content.output, /- one, edited/);
    assert.ok(ofType(rec, "ACTIVITY_DELTA").length >= 1, "the command's end came as a delta");

    const snapshot = await connectsToTheSame("/coder", a);
    assert.deepEqual(
      snapshot.filter((m) => m.role === "activity").map((m) => m.content),
      activities.map((m) => m.content),
      "connect's snapshot holds the activities (role activity)",
    );
  });

  test("the old shape on request: step brackets, no attribution, no activities", async () => {
    const a = agent("/old");
    a.say("c-delegate: ask a helper");
    const rec = await run(a, {}, { timeoutMs: 90_000, log: server.log });
    assert.equal(outcome(rec), "success");
    const steps = ofType(rec, "STEP_STARTED").map((e) => e.stepName);
    assert.equal(steps.length, 1);
    assert.match(steps[0], /^subagent:/);
    assert.equal(ofType(rec, "STEP_FINISHED").length, 1);
    assert.equal(rec.wireEvents.filter((e) => e.type.startsWith("SUBAGENT_") || e.subagentRunId).length, 0);
    assert.ok(a.messages.some((m) => m.content === "result from A"), "the subagent's reply is there, unattributed");

    const b = agent("/old");
    b.say("c-code: write the notes");
    const code = await run(b, {}, { timeoutMs: 90_000, log: server.log });
    assert.equal(outcome(code), "success");
    assert.equal(code.wireEvents.filter((e) => e.type.startsWith("ACTIVITY_")).length, 0);
    assert.ok(toolCalls(code).some((c) => c.name === "edit_file"));
  });
});
