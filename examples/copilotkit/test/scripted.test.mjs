// The example app on agents of the scripted model (the browser suite's script and agents: `/`
// asks questions and runs commands, `/guarded` asks before each tool, `/coder` delegates and
// writes files), one app per agent: a reply streams in; a question and approvals are answered
// in the page (AG-UI interrupts through CopilotKit's useInterrupt); stop ends the server's turn;
// the history comes back after a reload, mid-turn too, and after the app's runtime restarts;
// subagents and activities as far as CopilotKit renders them.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { modelFlags } from "../../../tests/e2e/lib/mode.mjs";
import { startModel, startServer, stopAll } from "../../../tests/e2e/lib/procs.mjs";
import { useBrowser } from "../../../tests/browser/lib/browser.mjs";
import { SCRIPT, TOML } from "../../../tests/browser/lib/scripted.mjs";
import { hostPort, startRelay } from "../../../clients/typescript/test/lib/fixture.mjs";
import { startApp } from "./lib/app.mjs";
import { afterRuns, openChat, replyMatching, runState, screenshot, send, textMatching, threadOf, untilRuns, userTexts } from "./lib/chat.mjs";

/** `text` as a regular expression matching it literally. */
const escape = (text) => text.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");

/** A reply slow enough to watch it stream, and to reload the page half-way. */
const SLOW_WORDS = Array.from({ length: 24 }, (_, i) => `word${i}`);
const SLOW = { name: "slow", repeat: "forever", match: { user_text_contains: "ck-slow", last_part: "text" }, reply: { text: SLOW_WORDS.join(" "), chunking: { words: 1 }, delay_ms: 150 } };

describe("CopilotKit example on the scripted model", () => {
  let model;
  let server;
  const apps = {};
  before(async () => {
    model = await startModel({ ...SCRIPT, replies: [SLOW, ...SCRIPT.replies] });
    const { args, env } = modelFlags(model);
    server = await startServer({ label: "scripted server", config: TOML, args, env });
    for (const [name, agentPath] of [["main", "/"], ["guarded", "/guarded"], ["coder", "/coder"]]) {
      apps[name] = await startApp({ agentUrl: `${server.url}${agentPath}` });
    }
  });
  after(async () => {
    await Promise.all(Object.values(apps).map((app) => app.stop()));
    await stopAll(server, model);
  });
  const browser = useBrowser();

  /** POST <server>/stop for a thread of the main agent: whether a turn was still running. */
  async function serverStop(threadId) {
    const response = await fetch(`${server.url}/stop`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ threadId }) });
    return (await response.json()).stopped;
  }

  test("a reply streams into the chat piece by piece", async () => {
    const page = await openChat(browser(), apps.main);
    await send(page, "ck-slow: take your time");
    const seen = new Set();
    const deadline = Date.now() + 30_000;
    while (Date.now() < deadline && (await runState(page)).state !== "idle") {
      const text = await page.locator('[data-testid="copilot-assistant-message"]').last().innerText().catch(() => "");
      if (text) seen.add(text.trim().split(/\s+/).length);
      if (seen.size === 3) await screenshot(page, "streaming");
      await page.waitForTimeout(100);
    }
    await untilRuns(page, 2);
    assert.ok(seen.size >= 4, `the reply grew in steps (word counts seen: ${[...seen].join(", ")})`);
    await replyMatching(page, new RegExp(`^${SLOW_WORDS.join(" ")}$`));
  });

  test("a question (an AG-UI interrupt) is answered in the page", async () => {
    const page = await openChat(browser(), apps.main);
    await afterRuns(page, () => send(page, "pg-ask: choose a colour for me"));
    const form = page.locator('.interrupt.question[data-reason="antigravity:ask_question"]');
    assert.equal(await form.locator("legend").innerText(), "Which color?");
    assert.deepEqual(await form.locator("label.option").allInnerTexts(), ["Red", "Green", "Blue"]);
    await screenshot(page, "question");
    await form.locator("label.option", { hasText: "Green" }).click();
    await afterRuns(page, () => form.getByRole("button", { name: "Send answer" }).click());
    assert.equal(await page.locator(".interrupt").count(), 0, "the form is gone once answered");
    await replyMatching(page, /Noted: .*Green/s);
  });

  for (const [decision, button, expected, ran] of [
    ["approved", "Approve", /^Listed: /, true],
    ["denied", "Deny", /^Listed: .*(denied|not now)/is, false],
  ]) {
    test(`a tool approval ${decision} in the page`, async () => {
      const page = await openChat(browser(), apps.guarded);
      await afterRuns(page, () => send(page, `pg-approve: list the workspace (${decision})`));
      const form = page.locator('.interrupt.approval[data-reason="antigravity:tool_approval"]');
      assert.match(await form.locator(".interrupt-head").innerText(), /list_dir/);
      assert.match(await form.locator(".tool-args").innerText(), /DirectoryPath/);
      if (decision === "denied") await form.locator(".deny-reason").fill("not now");
      else await screenshot(page, "approval");
      await afterRuns(page, () => form.getByRole("button", { name: button }).click());
      const reply = await replyMatching(page, expected);
      if (ran) assert.doesNotMatch(reply, /denied|not now/i, "the tool ran");
    });
  }

  test("stop ends the agent's turn on the server, and the conversation goes on", async () => {
    const page = await openChat(browser(), apps.main);
    const threadId = await threadOf(page);
    const before = await runState(page);
    await send(page, "pg-long: sleep a while");
    await page.locator('.tool-card[data-tool-name="run_command"]').waitFor();
    await page.locator('.activity.command[data-state="running"]').waitFor();
    const stoppedAt = Date.now();
    await page.getByTestId("copilot-send-button").click();
    await untilRuns(page, before.runs + 1, 10_000);
    assert.ok(Date.now() - stoppedAt < 5_000, `the run ended ${Date.now() - stoppedAt} ms after the stop`);
    assert.equal(await serverStop(threadId), false, "no turn left running on the server");
    await page.locator('.activity.command[data-state="stopped"]').waitFor({ timeout: 5_000 }); // the server stopped the command
    await page.locator('.tool-card[data-tool-name="run_command"][data-status="incomplete"]').waitFor({ timeout: 5_000 });
    await screenshot(page, "stop");
    await afterRuns(page, () => send(page, "pg-text: after the stop"));
    await replyMatching(page, /after the stop/);
  });

  test("a reload finds the thread's history, from the server", async () => {
    const page = await openChat(browser(), apps.main);
    await afterRuns(page, () => send(page, "pg-text: remember me"));
    const reply = await replyMatching(page, /remember me\.$/);
    await page.reload();
    await untilRuns(page, 1);
    assert.deepEqual(await userTexts(page), ["pg-text: remember me"]);
    await replyMatching(page, new RegExp(`^${escape(reply)}$`));
    await screenshot(page, "reload-history");
  });

  test("a reload during a reply rejoins the turn in flight and ends with the whole reply", async () => {
    const page = await openChat(browser(), apps.main);
    await send(page, "ck-slow: keep going");
    await page.locator('[data-testid="copilot-assistant-message"]').filter({ hasText: "word3" }).waitFor();
    await page.reload();
    await untilRuns(page, 1, 30_000);
    assert.deepEqual(await userTexts(page), ["ck-slow: keep going"]);
    await replyMatching(page, new RegExp(`^${SLOW_WORDS.join(" ")}$`), 30_000);
    assert.equal(await page.locator('[data-testid="copilot-assistant-message"]').count(), 1, "once");
    await screenshot(page, "reload-mid-turn");
  });

  test("a stream cut between the runtime and the server mid-reply: the page still ends on the whole reply", async () => {
    const relay = await startRelay(hostPort(server.url));
    const app = await startApp({ agentUrl: `${relay.url}/` });
    try {
      const page = await openChat(browser(), app);
      const { runs } = await runState(page);
      await send(page, "ck-slow: through a flaky network");
      await page.locator('[data-testid="copilot-assistant-message"]').filter({ hasText: "word3" }).waitFor();
      relay.cut();
      await untilRuns(page, runs + 1, 30_000);
      await replyMatching(page, new RegExp(`^${SLOW_WORDS.join(" ")}$`));
      assert.equal(await page.locator('[data-testid="copilot-assistant-message"]').count(), 1, "once");
      await screenshot(page, "cut-stream");
    } finally {
      await app.stop();
      await relay.stop();
    }
  });

  test("the history survives a restart of the app's runtime", async () => {
    const page = await openChat(browser(), apps.main);
    await afterRuns(page, () => send(page, "pg-text: before the restart"));
    const reply = await replyMatching(page, /before the restart\.$/);
    const address = page.url();
    // The page leaves first: its live thread list's stream, cut by a crash, is an error in the page.
    await page.goto("about:blank");
    const { port } = apps.main;
    await apps.main.kill();
    apps.main = await startApp({ agentUrl: `${server.url}/`, port });
    await page.goto(address);
    await untilRuns(page, 1);
    assert.deepEqual(await userTexts(page), ["pg-text: before the restart"]);
    await replyMatching(page, new RegExp(`^${escape(reply)}$`));
    await afterRuns(page, () => send(page, "pg-text: after the restart"));
    await replyMatching(page, /after the restart/);
    await screenshot(page, "runtime-restart-history");
  });

  test("a subagent: its invocation's card shows it, its reply is in the chat", async () => {
    const page = await openChat(browser(), apps.coder);
    await afterRuns(page, () => send(page, "pg-delegate: ask a helper"), { timeout: 90_000 });
    const card = page.locator('.tool-card[data-tool-name="invoke_subagent"]');
    const subagent = card.locator(".subagent");
    await card.locator('.subagent[data-status="finished"]').waitFor({ timeout: 5_000 });
    assert.equal(await subagent.count(), 1, "one subagent, under the invoke_subagent card");
    assert.match(await subagent.innerText(), /subagent result text/);
    await replyMatching(page, /The subagent says hi/);
    // The subagent's reply, labelled.
    await textMatching(page.locator('[data-testid="copilot-message-list"]'), /from a subagent\s+subagent result text/);
    await screenshot(page, "subagent");
  });

  test("activities: the file written (its diff) and the command run (its output)", async () => {
    const page = await openChat(browser(), apps.coder);
    await afterRuns(page, () => send(page, "pg-code: write the notes"), { timeout: 90_000 });
    const file = page.locator('.activity[data-activity="file_change"]');
    assert.match(await file.locator(".diff").innerText(), /\+- playground/);
    const command = page.locator('.activity[data-activity="command"]');
    await page.locator('.activity[data-activity="command"][data-state="completed"]').waitFor({ timeout: 5_000 });
    assert.match(await command.locator(".terminal").innerText(), /\$ cat notes\.md[\s\S]*playground/);
    await replyMatching(page, /The command finished/);
    await screenshot(page, "activities");
  });
});
