// Edit, regenerate and branches (issue 42) through AntigravityAgent, against the real server,
// harness and scripted model: an edit answers anew and keeps the old branch, a regenerate gives
// another answer, switching branch brings the old messages back (connect), a rewind reports the
// files it restored (and the file is gone), and a thread that cannot fork answers with the
// typed error while the agent's messages stay as they were. Only a regenerate's run is marked
// (`forwardedProps.regenerate`), and the mark is what lets a server that has not read the
// thread back yet (restarted) fork instead of restating the old answer.
import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import fs from "node:fs";
import { after, before, describe, test } from "node:test";
import { AntigravityAgent, AntigravityForkError, branchesAt } from "@agui-antigravity/client";
import { tempDir } from "../../../tests/e2e/lib/procs.mjs";
import { shape, startModel, startTestServer, stopAll } from "./lib/fixture.mjs";

const TOKEN = "forks-test-token";

/** Replies keyed by a tag in the prompt; `c-take` answers differently the first time. */
const SCRIPT = {
  replies: [
    { name: "first", repeat: "forever", match: { user_text_contains: "c-first", last_part: "text" }, reply: { text: "First answer." } },
    { name: "second", repeat: "forever", match: { user_text_contains: "c-second", last_part: "text" }, reply: { text: "Second answer." } },
    { name: "edited", repeat: "forever", match: { user_text_contains: "c-edited", last_part: "text" }, reply: { text: "Edited answer." } },
    { name: "take one", repeat: 1, match: { user_text_contains: "c-take", last_part: "text" }, reply: { text: "First take." } },
    { name: "take two", repeat: "forever", match: { user_text_contains: "c-take", last_part: "text" }, reply: { text: "Second take." } },
    { name: "marked one", repeat: 1, match: { user_text_contains: "c-marked", last_part: "text" }, reply: { text: "Old answer." } },
    { name: "marked two", repeat: "forever", match: { user_text_contains: "c-marked", last_part: "text" }, reply: { text: "New answer." } },
    { name: "unmarked one", repeat: 1, match: { user_text_contains: "c-unmarked", last_part: "text" }, reply: { text: "Old unmarked answer." } },
    { name: "unmarked two", repeat: "forever", match: { user_text_contains: "c-unmarked", last_part: "text" }, reply: { text: "New unmarked answer." } },
    {
      name: "write notes",
      repeat: "forever",
      match: { user_text_contains: "c-write", last_part: "text" },
      reply: { calls: [{ name: "write_to_file", args: { TargetFile: "{{workspace}}/notes.txt", CodeContent: "one\ntwo\n" }, fill_required: true }] },
    },
    { name: "written", repeat: "forever", match: { function_response: "write_to_file" }, reply: { text: "Wrote the notes." } },
    { name: "frontend done", repeat: "forever", match: { function_response: "change_background" }, reply: { text: "Background changed." } },
    { name: "frontend call", repeat: "forever", match: { user_text_contains: "c-frontend", last_part: "text" }, reply: { calls: [{ name: "change_background", args: { background: "red" } }] } },
  ],
  default: { text: "No scripted answer." },
};

const TOOLS = [
  { name: "change_background", description: "Change the page's background.", parameters: { type: "object", properties: { background: { type: "string" } }, required: ["background"] } },
];

describe("edit, regenerate and branches", () => {
  const handles = {};
  before(async () => {
    handles.model = await startModel(SCRIPT);
    handles.server = await startTestServer(handles.model, { args: ["--auth-token", TOKEN, "--builtin-tools", "write_to_file,replace_file_content"], label: "forks server" });
  });
  after(async () => {
    await stopAll(handles.server, handles.model);
  });

  /** An agent on `threadId` (a fresh thread by default) at `url`; `bodies` gets each run's RunAgentInput. */
  const agent = (threadId = `c-${randomUUID()}`, { url = handles.server.url, bodies } = {}) =>
    new AntigravityAgent({
      url,
      threadId,
      authToken: TOKEN,
      fetch: (input, init) => {
        if (bodies && init?.method === "POST" && new URL(String(input)).pathname === new URL(url).pathname) bodies.push(JSON.parse(String(init.body)));
        return fetch(input, init);
      },
    });

  /** Sends `content` as a new user message and runs; returns the message's id. */
  async function say(target, content, params = {}) {
    const id = `u-${randomUUID()}`;
    target.messages.push({ id, role: "user", content });
    await target.runAgent(params);
    return id;
  }

  const texts = (target) => shape(target.messages).map((m) => `${m.role}: ${m.content ?? ""}`);

  test("an edit answers anew, the old branch is listed, and switching back restores its messages", async () => {
    const a = agent();
    const u1 = await say(a, "c-first: one");
    const u2 = await say(a, "c-second: two");
    assert.deepEqual(texts(a), ["user: c-first: one", "assistant: First answer.", "user: c-second: two", "assistant: Second answer."]);
    const original = await a.listBranches();
    assert.deepEqual(original.branches, [], "one branch before the edit");

    const { newMessages, rewind } = await a.editMessage(u2, "c-edited: two, edited");
    assert.equal(rewind, undefined, "no rewind asked");
    assert.deepEqual(newMessages.filter((m) => m.role === "assistant").map((m) => m.content), ["Edited answer."]);
    assert.deepEqual(texts(a), ["user: c-first: one", "assistant: First answer.", "user: c-edited: two, edited", "assistant: Edited answer."]);
    assert.equal(a.messages[2].id, u2, "the edited message keeps its id");

    const branches = await a.listBranches();
    assert.notEqual(branches.current, original.current, "the edit made a new branch");
    assert.equal(branches.branches.length, 1);
    assert.equal(branches.branches[0].id, original.current, "the old branch is listed");
    assert.equal(branches.branches[0].leftAt, u2, "left at the edited message");
    assert.ok(branches.branches[0].messageCount >= 4, `its messages: ${branches.branches[0].messageCount}`);
    assert.deepEqual(branchesAt(branches, u2), { index: 1, count: 2, ids: [original.current, branches.current] }, "2/2 at the edited message");
    assert.equal(branchesAt(branches, u1), undefined, "no alternatives at the first message");

    const fresh = agent(a.threadId);
    await fresh.connectAgent();
    assert.deepEqual(texts(fresh), texts(a), "a connect restates the new branch");

    const switched = await a.switchBranch(a.threadId, original.current);
    assert.equal(switched.branch, original.current);
    assert.deepEqual(texts(a), ["user: c-first: one", "assistant: First answer.", "user: c-second: two", "assistant: Second answer."], "the old messages are back");
    const after = await a.listBranches();
    assert.equal(after.current, original.current);
    assert.deepEqual(
      after.branches.map((b) => [b.id, b.leftAt]),
      [[branches.current, u2]],
      "the edit's branch is listed, parting where the branch switched to does",
    );
    assert.deepEqual(branchesAt(after, u2), { index: 1, count: 2, ids: [branches.current, original.current] }, "placed at the message with nothing remembered");
    // A page remembers where it left the branch it switched away from, and the order shown.
    assert.deepEqual(branchesAt(after, u2, { leftAt: { [branches.current]: u2 }, order: [original.current, branches.current] }), {
      index: 0,
      count: 2,
      ids: [original.current, branches.current],
    });

    // The next run continues the old branch.
    await say(a, "c-first: again");
    assert.deepEqual(texts(a).slice(-2), ["user: c-first: again", "assistant: First answer."]);
    const reread = agent(a.threadId);
    await reread.connectAgent();
    assert.deepEqual(texts(reread), texts(a));
  });

  test("a regenerate answers the last user message again and keeps the old answer's branch", async () => {
    const a = agent();
    const u1 = await say(a, "c-take: answer me");
    assert.equal(a.messages.at(-1).content, "First take.");
    const answerId = a.messages.at(-1).id;

    const { newMessages } = await a.regenerate();
    assert.deepEqual(newMessages.map((m) => m.content), ["Second take."]);
    assert.deepEqual(texts(a), ["user: c-take: answer me", "assistant: Second take."]);
    assert.ok(!a.messages.some((m) => m.id === answerId), "the old answer is gone from the agent's messages");
    const branches = await a.listBranches();
    assert.deepEqual(branches.branches.map((b) => b.leftAt), [u1], "the old answer's branch, left at its user message");

    // By a message of the answer, as CopilotKit's regenerate button names it.
    const again = await a.regenerate(a.messages.at(-1).id);
    assert.deepEqual(again.newMessages.map((m) => m.content), ["Second take."]);
    assert.equal((await a.listBranches()).branches.length, 2);
    await assert.rejects(a.regenerate("no-such-message"), TypeError);
  });

  test("only a regenerate's run is marked: forwardedProps.regenerate, beside the caller's props", async () => {
    const bodies = [];
    const a = agent(undefined, { bodies });
    const u1 = await say(a, "c-first: one");
    await a.editMessage(u1, "c-edited: one, edited", { forwardedProps: { note: "kept" } });
    const { newMessages } = await a.regenerate(undefined, { rewindFiles: false, forwardedProps: { note: "kept" } });
    assert.deepEqual(newMessages.map((m) => m.content), ["Edited answer."]);
    assert.equal(bodies.length, 3);
    assert.equal(bodies[0].forwardedProps?.regenerate, undefined, "a plain run carries no mark");
    assert.deepEqual(bodies[1].forwardedProps, { note: "kept" }, "an edit carries no mark");
    assert.deepEqual(bodies[2].forwardedProps, { note: "kept", rewindFiles: false, regenerate: true }, "the regenerate's mark, merged with its options");
    assert.deepEqual(bodies[2].messages.map((m) => m.id), [u1], "the regenerate sends the history up to its user message");
    assert.equal((await a.listBranches()).branches.length, 2, "the edit and the regenerate each forked once");
  });

  test("a regenerate reaching a restarted server that has not read the thread back forks: a new answer, the old one a branch", async () => {
    // A data directory of the test's own, so the server restarts on the same threads.
    const dir = tempDir("forks-restart");
    let first = await startTestServer(handles.model, { args: ["--auth-token", TOKEN, "--builtin-tools", "write_to_file,replace_file_content"], label: "forks server before restart", dir });
    let second;
    try {
      const marked = agent(undefined, { url: first.url });
      const u1 = await say(marked, "c-marked: answer me");
      assert.equal(marked.messages.at(-1).content, "Old answer.");
      const unmarked = agent(undefined, { url: first.url });
      const v1 = await say(unmarked, "c-unmarked: answer me");
      assert.equal(unmarked.messages.at(-1).content, "Old unmarked answer.");
      const transcript = structuredClone(marked.messages);
      await first.stop();
      first = undefined;
      second = await startTestServer(handles.model, { args: ["--auth-token", TOKEN, "--builtin-tools", "write_to_file,replace_file_content"], label: "forks server after restart", dir });

      // A new agent object (a reloaded page) with the transcript, no connect first.
      const bodies = [];
      const fresh = agent(marked.threadId, { url: second.url, bodies });
      fresh.setMessages(transcript);
      const { newMessages } = await fresh.regenerate();
      assert.equal(bodies.length, 1, "one run, no connect");
      assert.equal(bodies[0].forwardedProps.regenerate, true, "the run is marked");
      assert.deepEqual(newMessages.map((m) => m.content), ["New answer."], "a new answer, not the old one restated");
      assert.deepEqual(texts(fresh), ["user: c-marked: answer me", "assistant: New answer."]);
      const branches = await fresh.listBranches();
      assert.deepEqual(branches.branches.map((b) => b.leftAt), [u1], "the old answer's branch, left at its user message");
      const reread = agent(marked.threadId, { url: second.url });
      await reread.connectAgent();
      assert.deepEqual(texts(reread), texts(fresh), "the server's history is the new branch");

      // The same history unmarked (as a client before the mark sends it) is taken for a
      // retry of a cut run: no new answer, and the thread does not fork.
      const stale = agent(unmarked.threadId, { url: second.url });
      stale.setMessages(unmarked.messages.slice(0, 1));
      assert.equal(stale.messages[0].id, v1);
      await stale.runAgent();
      assert.ok(!texts(stale).includes("assistant: New unmarked answer."), `unmarked: no new answer: ${texts(stale)}`);
      assert.deepEqual((await stale.listBranches()).branches, [], "unmarked: no fork");
      const kept = agent(unmarked.threadId, { url: second.url });
      await kept.connectAgent();
      assert.deepEqual(texts(kept), ["user: c-unmarked: answer me", "assistant: Old unmarked answer."], "unmarked: the thread keeps the old answer");
    } finally {
      await stopAll(first, second);
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });

  test("an edit with rewindFiles reports the files it restored, and the file is gone", async () => {
    const a = agent();
    await say(a, "c-first: one");
    const u2 = await say(a, "c-write: write the notes");
    assert.equal(a.messages.at(-1).content, "Wrote the notes.");
    const listed = await a.threads.listFiles(a.threadId);
    assert.ok(listed.entries.some((e) => e.name === "notes.txt"), "the agent wrote notes.txt");

    const heard = [];
    const { rewind, newMessages } = await a.editMessage(u2, "c-edited: do not write", { rewindFiles: true, onRewind: (report) => heard.push(report) });
    assert.deepEqual(newMessages.filter((m) => m.role === "assistant").map((m) => m.content), ["Edited answer."]);
    assert.ok(rewind, "a rewind report");
    assert.deepEqual(heard, [rewind], "onRewind heard the same report, once");
    assert.deepEqual(
      rewind.restored.map((r) => [r.path.split("/").at(-1), r.action]),
      [["notes.txt", "removed"]],
      JSON.stringify(rewind),
    );
    assert.deepEqual(rewind.notRestored, []);
    assert.equal(rewind.commandsAfter, 0);
    const now = await a.threads.listFiles(a.threadId);
    assert.ok(!now.entries.some((e) => e.name === "notes.txt"), `notes.txt is removed: ${JSON.stringify(now.entries)}`);
  });

  test("an edit while the thread waits for a frontend tool's result is CANNOT_FORK, and nothing changes", async () => {
    const a = agent();
    const u1 = await say(a, "c-first: one");
    await say(a, "c-frontend: make it red", { tools: TOOLS });
    assert.ok(
      a.messages.some((m) => m.toolCalls?.some((c) => c.function.name === "change_background")),
      "the turn waits for the frontend tool",
    );
    const before = structuredClone(a.messages);
    const branches = await a.listBranches();

    const error = await a.editMessage(u1, "c-edited: instead").then(
      () => undefined,
      (e) => e,
    );
    assert.ok(error instanceof AntigravityForkError, `the typed error: ${error}`);
    assert.equal(error.code, "CANNOT_FORK");
    assert.equal(error.messageId, u1, error.message);
    assert.match(error.message, /was edited\. .*(in flight|waits for the client)/, "it names the point and why");
    assert.deepEqual(a.messages, before, "the agent's messages are as they were");
    assert.deepEqual(await a.listBranches(), branches, "the thread did not fork");
  });
});
