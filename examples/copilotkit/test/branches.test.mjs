// Edit, regenerate and branches (issue 42) with CopilotKit's own buttons, on an agent of the
// scripted model: the edit button of a user message opens an editor, and what is sent answers
// anew; the regenerate button of an answer answers again; the user message then shows
// CopilotKit's branch navigation ("2/2"), and going back shows the old messages (the server's
// branch, read again by a connect); with "Rewind files" checked, an edit undoes the file the
// agent wrote and the page says so; an edit the server cannot fork (another client's turn in
// flight) shows the server's reason and leaves the chat as it was. The regenerate's run is
// marked as one (`forwardedProps.regenerate`), the edit's and the plain runs' are not.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { startModel, startTestServer, stopAll } from "../../../clients/typescript/test/lib/fixture.mjs";
import { useBrowser } from "../../../tests/browser/lib/browser.mjs";
import { startApp } from "./lib/app.mjs";
import { afterRuns, openChat, replyMatching, screenshot, send, textMatching, threadOf } from "./lib/chat.mjs";

const SCRIPT = {
  replies: [
    { name: "first", repeat: "forever", match: { user_text_contains: "ck-first", last_part: "text" }, reply: { text: "First answer." } },
    { name: "second", repeat: "forever", match: { user_text_contains: "ck-second", last_part: "text" }, reply: { text: "Second answer." } },
    { name: "edited", repeat: "forever", match: { user_text_contains: "ck-edited", last_part: "text" }, reply: { text: "Edited answer." } },
    { name: "take one", repeat: 1, match: { user_text_contains: "ck-take", last_part: "text" }, reply: { text: "First take." } },
    { name: "take two", repeat: "forever", match: { user_text_contains: "ck-take", last_part: "text" }, reply: { text: "Second take." } },
    {
      name: "write notes",
      repeat: "forever",
      match: { user_text_contains: "ck-write", last_part: "text" },
      reply: { calls: [{ name: "write_to_file", args: { TargetFile: "{{workspace}}/notes.txt", CodeContent: "one\ntwo\n" }, fill_required: true }] },
    },
    { name: "written", repeat: "forever", match: { function_response: "write_to_file" }, reply: { text: "Wrote the notes." } },
    { name: "slow", repeat: "forever", match: { user_text_contains: "ck-slow", last_part: "text" }, reply: { text: "slow ".repeat(40).trim(), chunking: { words: 1 }, delay_ms: 250 } },
  ],
  default: { text: "No scripted answer." },
};

const USER = '[data-testid="copilot-user-message"]';
const ASSISTANT = '[data-testid="copilot-assistant-message"]';
const NAVIGATION = '[data-testid="copilot-branch-navigation"]';

describe("CopilotKit example: edit, regenerate and branches", () => {
  let model;
  let server;
  let app;
  before(async () => {
    model = await startModel(SCRIPT);
    server = await startTestServer(model, { args: ["--builtin-tools", "write_to_file,replace_file_content"], label: "branches server" });
    app = await startApp({ agentUrl: `${server.url}/` });
  });
  after(async () => {
    await app?.stop();
    await stopAll(server, model);
  });
  const browser = useBrowser();

  /**
   * The `forwardedProps` of every run the page sends to CopilotKit's runtime from now on (the
   * runtime passes them on to the agent's server as they are): `POST …/agent/<id>/run`, or the
   * single route's `{ method: "agent/run", body }`; connects are left out.
   */
  function runProps(page) {
    const seen = [];
    page.on("request", (request) => {
      const { pathname } = new URL(request.url());
      if (request.method() !== "POST" || !pathname.startsWith("/api/copilotkit")) return;
      let body;
      try {
        body = JSON.parse(request.postData() ?? "null");
      } catch {
        return;
      }
      const input = typeof body?.method === "string" ? (body.method === "agent/run" ? body.body : undefined) : pathname.endsWith("/run") ? body : undefined;
      if (input && Array.isArray(input.messages)) seen.push({ url: request.url(), props: input.forwardedProps ?? {} });
    });
    return seen;
  }

  /** The thread as the server lists it. */
  const serverThread = async (threadId) => (await fetch(`${server.url}/threads/${encodeURIComponent(threadId)}`)).json();

  /** Sends `text` and waits for its answer to match `reply`. */
  async function exchange(page, text, reply) {
    await afterRuns(page, () => send(page, text));
    await replyMatching(page, reply);
  }

  /**
   * Edits the `index`th user message to `text` with CopilotKit's edit button and the page's
   * editor (saving a screenshot of the editor as `shot`, if given).
   */
  async function edit(page, index, text, shot) {
    const message = page.locator(USER).nth(index);
    await message.hover();
    await message.locator('[data-testid="copilot-edit-button"]').click();
    const editor = page.locator('[data-testid="message-editor"]');
    await editor.locator("textarea").fill(text);
    if (shot) await screenshot(page, shot);
    await afterRuns(page, () => editor.locator('[data-testid="message-editor-send"]').click());
  }

  /** The branch navigation's "i/n" on the `index`th user message, once it shows `expected`. */
  const navigationOf = (page, index, expected) => textMatching(page.locator(USER).nth(index).locator(NAVIGATION), expected);

  test("an edit answers anew, the message shows 2/2, and going back shows the old answer", async () => {
    const page = await openChat(browser(), app);
    const threadId = await threadOf(page);
    const runs = runProps(page);
    await exchange(page, "ck-first: one", /^First answer\.$/);
    await exchange(page, "ck-second: two", /^Second answer\.$/);
    const before = await serverThread(threadId);
    assert.deepEqual(before.branches, []);

    await edit(page, 1, "ck-edited: two, edited", "edit-message");
    await replyMatching(page, /^Edited answer\.$/);
    assert.equal(runs.length, 3, `three runs sent: ${JSON.stringify(runs)}`);
    assert.ok(runs.every((r) => r.props.regenerate === undefined), `no run of these is marked as a regenerate: ${JSON.stringify(runs)}`);
    assert.match(await page.locator(USER).nth(1).innerText(), /ck-edited: two, edited/);
    assert.equal(await page.locator(ASSISTANT).filter({ hasText: "Second answer." }).count(), 0, "the old answer is gone from the chat");
    assert.match(await navigationOf(page, 1, /2\s*\/\s*2/), /2\s*\/\s*2/);
    assert.equal(await page.locator(USER).nth(0).locator(NAVIGATION).count(), 0, "no navigation on the first message");
    const forked = await serverThread(threadId);
    assert.notEqual(forked.branch, before.branch, "the server forked the thread");
    assert.deepEqual(
      forked.branches.map((b) => b.id),
      [before.branch],
    );
    await screenshot(page, "branch-navigation");

    // Back to the first branch: CopilotKit's "previous" arrow.
    await afterRuns(page, () => page.locator(USER).nth(1).locator(NAVIGATION).locator("button").first().click());
    await replyMatching(page, /^Second answer\.$/);
    assert.match(await page.locator(USER).nth(1).innerText(), /ck-second: two/);
    assert.match(await navigationOf(page, 1, /1\s*\/\s*2/), /1\s*\/\s*2/);
    assert.equal((await serverThread(threadId)).branch, before.branch, "the server switched back");
    await screenshot(page, "branch-navigation-switched");

    // And forward again, then a reload keeps the branch and its navigation.
    await afterRuns(page, () => page.locator(USER).nth(1).locator(NAVIGATION).locator("button").last().click());
    await replyMatching(page, /^Edited answer\.$/);
    assert.match(await navigationOf(page, 1, /2\s*\/\s*2/), /2\s*\/\s*2/);
    await page.reload();
    await page.locator('[data-testid="copilot-chat-textarea"]').waitFor();
    await replyMatching(page, /^Edited answer\.$/);
    assert.match(await navigationOf(page, 1, /2\s*\/\s*2/), /2\s*\/\s*2/);
    await page.close();
  });

  test("regenerate answers again, and the answer's user message navigates between the answers", async () => {
    const page = await openChat(browser(), app);
    const runs = runProps(page);
    await exchange(page, "ck-take: answer me", /^First take\.$/);
    const answer = page.locator(ASSISTANT).last();
    await answer.hover();
    await afterRuns(page, () => answer.locator('[data-testid="copilot-regenerate-button"]').click());
    await replyMatching(page, /^Second take\.$/);
    assert.deepEqual(
      runs.map((r) => r.props.regenerate),
      [undefined, true],
      `the message's run is not marked, the regenerate's is: ${JSON.stringify(runs)}`,
    );
    assert.equal(await page.locator(ASSISTANT).count(), 1, "one answer in the chat");
    assert.match(await navigationOf(page, 0, /2\s*\/\s*2/), /2\s*\/\s*2/);
    await screenshot(page, "regenerate");

    await afterRuns(page, () => page.locator(USER).nth(0).locator(NAVIGATION).locator("button").first().click());
    await replyMatching(page, /^First take\.$/);
    assert.match(await navigationOf(page, 0, /1\s*\/\s*2/), /1\s*\/\s*2/);
    await page.close();
  });

  test("with Rewind files checked, an edit removes the file the agent wrote and the page reports it", async () => {
    const page = await openChat(browser(), app);
    const threadId = await threadOf(page);
    await exchange(page, "ck-first: one", /^First answer\.$/);
    await exchange(page, "ck-write: write the notes", /^Wrote the notes\.$/);
    const listed = async () => (await (await fetch(`${server.url}/threads/${encodeURIComponent(threadId)}/files/`)).json()).entries.map((e) => e.name);
    assert.ok((await listed()).includes("notes.txt"), "the agent wrote notes.txt");

    await page.locator('[data-testid="rewind-files"]').check();
    await edit(page, 1, "ck-edited: do not write");
    await replyMatching(page, /^Edited answer\.$/);
    const notice = await textMatching(page.locator('[data-testid="fork-notice"]'), /notes\.txt removed/);
    assert.match(notice, /^Files rewound: notes\.txt removed\./);
    assert.ok(!(await listed()).includes("notes.txt"), "notes.txt is gone from the workspace");
    await screenshot(page, "rewind");
    await page.close();
  });

  test("an edit while another client's turn runs is refused (CANNOT_FORK): the page says why and keeps its messages", async () => {
    const page = await openChat(browser(), app);
    const threadId = await threadOf(page);
    await exchange(page, "ck-first: one", /^First answer\.$/);
    // Another client starts a slow turn on the thread and leaves: the server lets it run on.
    const other = new AbortController();
    const started = await fetch(`${server.url}/`, {
      method: "POST",
      headers: { "content-type": "application/json", accept: "text/event-stream", "x-thread-id": threadId },
      body: JSON.stringify({ threadId, runId: "other-run", messages: [{ id: "u-other", role: "user", content: "ck-slow: take your time" }], tools: [], context: [], state: {}, forwardedProps: {} }),
      signal: other.signal,
    });
    assert.equal(started.status, 200);
    const deadline = Date.now() + 20_000;
    while ((await serverThread(threadId)).status !== "running") {
      assert.ok(Date.now() < deadline, "the other client's turn runs");
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
    other.abort();
    const branch = (await serverThread(threadId)).branch;

    await edit(page, 0, "ck-edited: instead");
    const notice = await textMatching(page.locator('[data-testid="fork-notice"]'), /in flight/);
    assert.match(notice, /message \S+ was edited\. A turn is in flight/);
    assert.match(await page.locator(USER).nth(0).innerText(), /ck-first: one/, "the page's messages are as they were");
    await replyMatching(page, /^First answer\.$/);
    const after = await serverThread(threadId);
    assert.equal(after.branch, branch, "the thread did not fork");
    assert.deepEqual(after.branches, []);
    await screenshot(page, "cannot-fork");
    await fetch(`${server.url}/stop`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ threadId }) });
    await page.close();
  });
});
