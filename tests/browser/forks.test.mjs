// Edits, regenerates, branches and file rewinds in the playground (issue 42), on the scripted
// model with the real harness: an edited message gets a new answer in place of the old ones and
// the branch control brings the old conversation back; a regenerate gives another answer; a
// regenerate that rewinds the files restores what the file tools changed and shows the report;
// a CANNOT_FORK leaves the chat as it was and says why. A regenerate's run is marked as one
// (`forwardedProps.regenerate`); an edit's and a message's are not, and the mark is what lets
// a server restarted under the open page (no reload, no connect) fork instead of restating.
import assert from "node:assert/strict";
import fs from "node:fs";
import path from "node:path";
import { after, before, describe, test } from "node:test";
import { modelFlags } from "../e2e/lib/mode.mjs";
import { startModel, startServer, stopAll, tempDir } from "../e2e/lib/procs.mjs";
import { afterRuns, lastReply, screenshot, send, useBrowser } from "./lib/browser.mjs";
import { runElsewhere, summaryOf } from "./lib/elsewhere.mjs";
import { workspaceOf } from "./lib/scripted.mjs";

/** One agent that answers, asks, writes and edits files and runs commands. */
const TOML = `
[[agents]]
path = "/"
name = "forks"
builtin_tools = ["ask_question", "write_to_file", "replace_file_content", "run_command"]
behavior = "interactive"
`;

const write = (file, content) => ({ name: "write_to_file", args: { TargetFile: `{{workspace}}/${file}`, CodeContent: content, Overwrite: false }, fill_required: true });

/** Replies keyed by a tag in the prompt (`pk-…`); tool results first (they carry the prompt's tag). */
const SCRIPT = {
  replies: [
    { name: "question answered", repeat: "forever", match: { function_response: "ask_question" }, reply: { text: "Noted: {{tool_output}}" } },
    {
      name: "question",
      repeat: "forever",
      match: { user_text_contains: "pk-ask", last_part: "text" },
      reply: { text: "One question first.", calls: [{ name: "ask_question", args: { questions: [{ question: "Which one?", options: ["This", "That"], is_multi_select: false }] } }] },
    },
    // The rewind: keep.txt written by the first turn, then edited, new.txt created and a command
    // run by the second; the regenerated second answer leaves the files alone.
    { name: "setup done", repeat: "forever", match: { function_response: "write_to_file", user_text_contains: "pk-rw-setup" }, reply: { text: "Wrote keep.txt." } },
    { name: "setup", repeat: "forever", match: { user_text_contains: "pk-rw-setup", last_part: "text" }, reply: { text: "Writing keep.txt.", calls: [write("keep.txt", "a\nb\nc\n")] } },
    { name: "change: create", repeat: "forever", match: { function_response: "replace_file_content", user_text_contains: "pk-rw-change" }, reply: { calls: [write("new.txt", "new\n")] } },
    {
      name: "change: command",
      repeat: "forever",
      match: { function_response: "write_to_file", user_text_contains: "pk-rw-change" },
      reply: { calls: [{ name: "run_command", args: { CommandLine: "echo cmd > cmd.txt", Cwd: "{{workspace}}", WaitMsBeforeAsync: 5000 } }] },
    },
    { name: "change done", repeat: "forever", match: { function_response: "run_command", user_text_contains: "pk-rw-change" }, reply: { text: "Changed the files." } },
    {
      name: "change",
      repeat: 1,
      match: { user_text_contains: "pk-rw-change", last_part: "text" },
      reply: {
        text: "Changing things.",
        calls: [
          {
            name: "replace_file_content",
            args: { TargetFile: "{{workspace}}/keep.txt", Instruction: "capital b", AllowMultiple: false, TargetContent: "b\n", ReplacementContent: "B\n", StartLine: 1, EndLine: 3 },
          },
        ],
      },
    },
    { name: "change again", repeat: "forever", match: { user_text_contains: "pk-rw-change", last_part: "text" }, reply: { text: "This time I left the files alone." } },
    // A regenerate: another answer to the same message.
    { name: "first take", repeat: 1, match: { user_text_contains: "pk-regen" }, reply: { text: "First take on it." } },
    { name: "second take", repeat: "forever", match: { user_text_contains: "pk-regen" }, reply: { text: "A second take on it." } },
    // A regenerate after the server restarted.
    { name: "before restart", repeat: 1, match: { user_text_contains: "pk-restart" }, reply: { text: "Before the restart." } },
    { name: "after restart", repeat: "forever", match: { user_text_contains: "pk-restart" }, reply: { text: "After the restart." } },
    { name: "echo", repeat: "forever", match: { user_text_contains: "pk-say" }, reply: { text: "You said: {{user_text}}", chunking: { words: 2 }, delay_ms: 20 } },
  ],
  default: { text: "No scripted answer." },
};

function useForksServer() {
  let model;
  let server;
  before(async () => {
    model = await startModel(SCRIPT);
    const { args, env } = modelFlags(model);
    server = await startServer({ label: "forks server", config: TOML, args, env });
  });
  after(async () => {
    await stopAll(server, model);
  });
  const url = () => server.url;
  url.dir = () => server.dir;
  url.model = () => model;
  return url;
}

/** The open thread's id (the page keeps it in the URL's fragment). */
function openThreadId(page) {
  return page.evaluate(() => decodeURIComponent(location.hash.slice(1)));
}

/** The texts of the chat's user bubbles and answers, in order (`user: …`, `assistant: …`). */
function transcript(page) {
  return page.evaluate(() =>
    [...document.querySelectorAll("#log > .msg")].map((el) =>
      el.classList.contains("user") ? `user: ${el.querySelector(".bubble").textContent}` : `assistant: ${el.querySelector(".md").innerText.trim()}`,
    ),
  );
}

/** The user message whose bubble says `text`. */
function userMessage(page, text) {
  return page.locator(".msg.user", { has: page.locator(".bubble", { hasText: text }) });
}

/**
 * Edits the user message saying `from` into `to` through its inline editor; `rewind` ticks the
 * choice, `shot` names a screenshot of the open editor.
 */
async function edit(page, from, to, { rewind = false, shot } = {}) {
  const msg = userMessage(page, from);
  await msg.hover();
  await msg.locator("button.edit-message").click();
  const editor = msg.locator(".msg-editor");
  assert.equal(await editor.locator("textarea").inputValue(), from, "the editor starts from the message");
  await editor.locator("textarea").fill(to);
  if (rewind) await editor.locator("input.rewind-files").check();
  if (shot) await screenshot(page, shot);
  await editor.locator("button.save-edit").click();
}

/** Regenerates the last answer through its control; `rewind` ticks the choice. */
async function regenerate(page, { rewind = false } = {}) {
  const answer = page.locator(".msg.assistant:has(> .msg-tools)").last();
  await answer.locator("button.regenerate").click();
  if (rewind) await answer.locator(".regen-confirm input.rewind-files").check();
  await answer.locator(".regen-confirm button.confirm-regen").click();
}

/** Another client's run on `threadId` that leaves the thread waiting for an answer (a question). */
async function askElsewhere(base, threadId) {
  assert.match(await runElsewhere(base, threadId, "pk-ask: pick one"), /"interrupt"/, "the other client's run ends waiting for an answer");
}

/** The `forwardedProps` of every run the page posts from now on (connects left out). */
function runProps(page) {
  const seen = [];
  page.on("request", (request) => {
    if (request.method() !== "POST" || new URL(request.url()).pathname.endsWith("/connect")) return;
    let body;
    try {
      body = JSON.parse(request.postData() ?? "null");
    } catch {
      return;
    }
    if (body && typeof body.runId === "string" && Array.isArray(body.messages)) seen.push(body.forwardedProps ?? {});
  });
  return seen;
}

/** Waits until a message shows its branches (the page reads them from the thread's summary after a run). */
function branchShown(page) {
  return page.locator(".branch-nav:not([hidden])").first().waitFor({ timeout: 15_000 });
}

/** Waits for a (re)connect of the page to finish. */
function reconnected(page, runsBefore) {
  return page.waitForFunction((n) => Number(document.body.dataset.runs ?? 0) > n && document.body.dataset.state !== "running", runsBefore, { timeout: 30_000 });
}

describe("playground: edit, regenerate, rewind (issue 42)", () => {
  const url = useForksServer();
  // The refused branch switches (422, 409) are the tests' own.
  const browser = useBrowser({ expected: /status of (409|422) / });

  test("an edited message gets a new answer, and the branch control shows the old one again", async () => {
    const page = await browser().newPage();
    const props = runProps(page);
    await page.goto(`${url()}/`);
    await afterRuns(page, () => send(page, "pk-say: hello"));
    await afterRuns(page, () => send(page, "pk-say: apples"));
    assert.match(await lastReply(page), /You said: pk-say: apples/);

    await afterRuns(page, () => edit(page, "pk-say: apples", "pk-say: pears", { shot: "forks-edit-editor" }));
    assert.equal(props.length, 3, `three runs: ${JSON.stringify(props)}`);
    assert.ok(props.every((p) => p.regenerate === undefined), `no run of these is marked as a regenerate: ${JSON.stringify(props)}`);
    assert.deepEqual(await transcript(page), ["user: pk-say: hello", "assistant: You said: pk-say: hello", "user: pk-say: pears", "assistant: You said: pk-say: pears"], "the new answer in place of the old one");
    const threadId = await openThreadId(page);
    const summary = await summaryOf(url(), threadId);
    assert.equal(summary.branches.length, 1, "the old conversation is kept as a branch");
    assert.equal(summary.branches[0].leftAt, await userMessage(page, "pk-say: pears").getAttribute("data-message-id"), "it left at the edited message");

    const nav = userMessage(page, "pk-say: pears").locator(".branch-nav");
    await branchShown(page);
    assert.equal(await nav.locator(".branch-pos").innerText(), "2/2");
    assert.equal(await page.locator(".msg.user .branch-nav:not([hidden])").count(), 1, "only at the edited message");

    // Back to the first version: PATCH, then the branch's messages from connect.
    let runs = await page.evaluate(() => Number(document.body.dataset.runs ?? 0));
    await nav.locator("button.branch-prev").click();
    await reconnected(page, runs);
    assert.deepEqual(await transcript(page), ["user: pk-say: hello", "assistant: You said: pk-say: hello", "user: pk-say: apples", "assistant: You said: pk-say: apples"]);
    assert.equal((await summaryOf(url(), threadId)).branch, summary.branches[0].id, "the server's current branch is the old one");
    const back = userMessage(page, "pk-say: apples").locator(".branch-nav");
    await back.waitFor();
    assert.equal(await back.locator(".branch-pos").innerText(), "1/2", "the old version is the first");
    assert.ok(await page.locator("#notice").isHidden());
    await screenshot(page, "forks-edit-branch-switched");

    // And forward again.
    runs = await page.evaluate(() => Number(document.body.dataset.runs ?? 0));
    await back.locator("button.branch-next").click();
    await reconnected(page, runs);
    assert.match(await lastReply(page), /You said: pk-say: pears/);
    assert.equal(await userMessage(page, "pk-say: pears").locator(".branch-pos").innerText(), "2/2");

    // A branch the server does not know (a stale list, here made up): its 422, said plainly.
    await page.evaluate(() => {
      const select = document.querySelector("#branch-menu");
      select.append(new Option("stale", "no-such-branch"));
      select.value = "no-such-branch";
      select.dispatchEvent(new Event("change"));
    });
    await page.locator("#notice.error").waitFor();
    assert.match(await page.locator("#notice").innerText(), /Could not switch branches: .*no branch no-such-branch/);

    // While the thread waits for another client's answer it cannot switch: its 409, said plainly.
    await askElsewhere(url(), threadId);
    const shown = await transcript(page);
    await userMessage(page, "pk-say: pears").locator("button.branch-prev").click();
    await page.waitForFunction(() => /busy/.test(document.querySelector("#notice.error")?.textContent ?? ""));
    assert.match(await page.locator("#notice").innerText(), /The thread is busy .*then switch branches/);
    assert.deepEqual(await transcript(page), shown, "the chat is unchanged");
    assert.equal((await summaryOf(url(), threadId)).branch, summary.branch, "still on the edited branch");
    await screenshot(page, "forks-branch-busy");
  });

  test("a regenerated answer replaces the old one", async () => {
    const page = await browser().newPage();
    const props = runProps(page);
    await page.goto(`${url()}/`);
    await afterRuns(page, () => send(page, "pk-regen: tell me something"));
    assert.equal(await lastReply(page), "First take on it.");
    await afterRuns(page, () => regenerate(page));
    assert.deepEqual(await transcript(page), ["user: pk-regen: tell me something", "assistant: A second take on it."]);
    assert.deepEqual(
      props.map((p) => p.regenerate),
      [undefined, true],
      `the message's run is not marked, the regenerate's is: ${JSON.stringify(props)}`,
    );
    await branchShown(page);
    assert.equal(await userMessage(page, "pk-regen").locator(".branch-pos").innerText(), "2/2", "the first answer is a branch at the message");
    assert.equal(await page.locator(".run-note.error").count(), 0);
    await screenshot(page, "forks-regenerate");
  });

  test("a regenerate after the server restarted under the open page (no reload, no connect) gives a new answer", async () => {
    // A server of the test's own, restarted on the same port and data directory.
    const dir = tempDir("forks-restart");
    const { args, env } = modelFlags(url.model());
    let first = await startServer({ label: "forks server before restart", config: TOML, args, env, dir });
    let second;
    try {
      const page = await browser().newPage();
      const props = runProps(page);
      await page.goto(`${first.url}/`);
      await afterRuns(page, () => send(page, "pk-restart: answer me"));
      assert.equal(await lastReply(page), "Before the restart.");
      const threadId = await openThreadId(page);
      const port = Number(new URL(first.url).port);
      await first.stop();
      first = undefined;
      second = await startServer({ label: "forks server after restart", config: TOML, args, env, dir, port });
      const posts = [];
      page.on("request", (request) => {
        if (request.method() === "POST") posts.push(new URL(request.url()).pathname.endsWith("/connect") ? "connect" : "run");
      });

      await afterRuns(page, () => regenerate(page));
      assert.equal(posts[0], "run", `the regenerate is the page's first request to the restarted server, no connect before it: ${posts}`);
      assert.deepEqual(props.at(-1)?.regenerate, true, "the regenerate's run is marked");
      assert.deepEqual(await transcript(page), ["user: pk-restart: answer me", "assistant: After the restart."], "a new answer, not the old one restated");
      const summary = await summaryOf(second.url, threadId);
      assert.equal(summary.branches.length, 1, "the old answer is kept as a branch");
      await branchShown(page);
      assert.equal(await page.locator(".run-note.error").count(), 0);
      // The page's own requests cut or refused by the restart (its thread list's events stream).
      const problems = browser().problems;
      for (let i = problems.length - 1; i >= 0; i -= 1) if (/ERR_CONNECTION_REFUSED|ERR_EMPTY_RESPONSE|ERR_CONNECTION_RESET|ERR_INCOMPLETE_CHUNKED_ENCODING/.test(problems[i])) problems.splice(i, 1);
    } finally {
      await stopAll(first, second);
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });

  test("a regenerate that rewinds the files restores what the file tools changed and reports it", async () => {
    const page = await browser().newPage();
    const props = runProps(page);
    await page.goto(`${url()}/`);
    await afterRuns(page, () => send(page, "pk-rw-setup: write keep"), { timeout: 90_000 });
    assert.equal(await lastReply(page), "Wrote keep.txt.");
    await afterRuns(page, () => send(page, "pk-rw-change: change things"), { timeout: 90_000 });
    assert.equal(await lastReply(page), "Changed the files.");
    const ws = workspaceOf(url.dir(), await openThreadId(page));
    const read = (name) => fs.readFileSync(path.join(ws, name), "utf8");
    assert.equal(read("keep.txt"), "a\nB\nc\n");
    assert.equal(read("new.txt"), "new\n");
    assert.equal(read("cmd.txt"), "cmd\n");

    await afterRuns(page, () => regenerate(page, { rewind: true }), { timeout: 90_000 });
    assert.equal(await lastReply(page), "This time I left the files alone.");
    assert.deepEqual(props.at(-1), { rewindFiles: true, regenerate: true }, "the regenerate asks for the rewind, marked as a regenerate");
    assert.equal(read("keep.txt"), "a\nb\nc\n", "the edit is undone");
    assert.ok(!fs.existsSync(path.join(ws, "new.txt")), "the created file is removed");
    assert.equal(read("cmd.txt"), "cmd\n", "a command's change stays");

    const report = page.locator(".rewind-report");
    await report.waitFor();
    assert.deepEqual(
      (await report.locator(".rewind-restored li").allInnerTexts()).map((t) => t.replace(/\s+/g, " ").trim()).sort(),
      ["removed new.txt", "restored keep.txt"],
      "restored and removed, by their workspace paths",
    );
    assert.equal(await report.locator(".commands-after").innerText(), "1 command ran after this point; its changes were not undone.");
    // The report sits above the new answer, under the message answered again.
    assert.ok(await page.evaluate(() => {
      const report = document.querySelector(".rewind-report");
      const answer = [...document.querySelectorAll(".msg.assistant")].at(-1);
      return Boolean(report.compareDocumentPosition(answer) & Node.DOCUMENT_POSITION_FOLLOWING);
    }));
    await screenshot(page, "forks-rewind-report");
  });

  test("CANNOT_FORK is shown with its message and the chat is left as it was", async () => {
    const page = await browser().newPage();
    await page.goto(`${url()}/`);
    await afterRuns(page, () => send(page, "pk-say: stay as you are"));
    const before = await transcript(page);
    const threadId = await openThreadId(page);

    // Another client asks the agent something on the thread: it waits for an answer.
    await askElsewhere(url(), threadId);

    await afterRuns(page, () => edit(page, "pk-say: stay as you are", "pk-say: changed"));
    const error = page.locator(".run-note.error .run-error");
    assert.equal(await error.locator(".error-code").innerText(), "CANNOT_FORK");
    assert.match(await error.locator(".error-message").innerText(), /message .+ was edited\..*(answer|stop)/s, "says which message and why");
    assert.deepEqual(await transcript(page), before, "the chat is unchanged");
    assert.equal((await summaryOf(url(), threadId)).branches.length, 0, "the thread did not fork");
    assert.ok(await page.locator("#prompt").isEnabled(), "the user can go on");
    await screenshot(page, "forks-cannot-fork");
  });
});
