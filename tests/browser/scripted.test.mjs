// The playground against agents on the scripted model (`gemini-script`): interrupts answered
// through their forms (a question, approvals approved and denied) and a RUN_ERROR shown
// plainly; a reload finds the thread again (connect), and so does another tab from the thread
// list; stop cancels a running command, and a subagent and activities are nested under their
// tool calls. Three agents on one server: `/` asks questions, `/guarded` asks before each tool,
// `/coder` delegates and writes files.
import assert from "node:assert/strict";
import { describe, test } from "node:test";
import fs from "node:fs";
import path from "node:path";
import { useScriptedServer, workspaceOf } from "./lib/scripted.mjs";
import { afterRuns, lastReply, screenshot, send, useBrowser } from "./lib/browser.mjs";

/** Waits for a freshly loaded page's connect to end. */
function connected(page) {
  return page.waitForFunction(() => Number(document.body.dataset.runs ?? 0) >= 1 && document.body.dataset.state !== "running");
}

describe("playground on the scripted model", () => {
  const url = useScriptedServer();
  const browser = useBrowser();

  test("an ask_question interrupt is answered through its form", async () => {
    const page = await browser().newPage();
    await page.goto(`${url()}/`);
    const state = await afterRuns(page, () => send(page, "pg-ask: choose a colour for me"));
    assert.equal(state, "interrupted");
    const form = page.locator('.interrupt[data-reason="antigravity:ask_question"]');
    assert.equal(await form.locator("legend").innerText(), "Which color?");
    assert.deepEqual(await form.locator("label.option").allInnerTexts(), ["Red", "Green", "Blue"]);
    assert.ok(await page.locator("#prompt").isDisabled(), "a new message waits until the question is answered");
    await screenshot(page, "scripted-question-form");

    await form.locator("label.option", { hasText: "Green" }).click();
    const after = await afterRuns(page, () => form.locator('button[type="submit"]').click());
    assert.equal(after, "idle");
    assert.equal(await page.locator("#interrupts .interrupt").count(), 0, "the form is gone once answered");
    assert.match(await lastReply(page), /Noted: .*Green/s, "the model got the choice");
    assert.ok(await page.locator("#prompt").isEnabled());
  });

  for (const [decision, button, expected] of [
    ["approved", "Approve", /Listed: .*pg-file\.txt/s],
    ["denied", "Deny", /Listed: .*(denied|not now)/is],
  ]) {
    test(`a tool approval ${decision} through its buttons`, async () => {
      const page = await browser().newPage();
      await page.goto(`${url()}/guarded`);
      const state = await afterRuns(page, () => send(page, `pg-approve: list the workspace (${decision})`));
      assert.equal(state, "interrupted");
      const form = page.locator('.interrupt[data-reason="antigravity:tool_approval"]');
      assert.match(await form.locator(".interrupt-head").innerText(), /Allow the agent to run `list_dir(ectory)?`\?/);
      assert.match(await form.locator("pre").innerText(), /DirectoryPath/, "the call's arguments are shown");
      // The listed folder is the thread's workspace, open by now: give it a known file.
      const threadId = await page.evaluate(() => decodeURIComponent(location.hash.slice(1)));
      fs.writeFileSync(path.join(workspaceOf(url.dir(), threadId), "pg-file.txt"), "hello\n");
      if (decision === "denied") await form.locator(".deny-reason").fill("not now");
      if (decision === "approved") await screenshot(page, "scripted-approval-form");
      const after = await afterRuns(page, () => form.getByRole("button", { name: button }).click());
      assert.equal(after, "idle");
      assert.match(await lastReply(page), expected);
      await screenshot(page, `scripted-approval-${decision}`);
    });
  }

  test("RUN_ERROR is shown with its code and message", async () => {
    const page = await browser().newPage();
    await page.goto(`${url()}/`);
    await afterRuns(page, () => send(page, "pg-error: this will fail"));
    const error = page.locator(".run-note.error .run-error");
    assert.equal(await error.locator(".error-code").innerText(), "AGENT_ERROR");
    assert.match(await error.locator(".error-message").innerText(), /400/);
    assert.match(await page.locator("#run-info").innerText(), /error AGENT_ERROR/);
    assert.ok(await page.locator("#prompt").isEnabled(), "the user can go on");
    await screenshot(page, "scripted-run-error");
  });

  test("a subagent is nested under its parent tool call", async () => {
    const page = await browser().newPage();
    await page.goto(`${url()}/coder`);
    await afterRuns(page, () => send(page, "pg-delegate: ask a helper"), { timeout: 90_000 });
    const box = page.locator(".tool .nested .subagent");
    assert.equal(await box.count(), 1, "one subagent, inside the invoke_subagent card");
    assert.equal(await box.getAttribute("data-status"), "finished");
    assert.match(await box.locator(".subagent-head").innerText(), /subagent/);
    assert.match(await box.locator(".subagent-body").innerText(), /subagent result text/, "its messages are inside it");
    assert.match(await lastReply(page), /The subagent says hi/);
    await screenshot(page, "scripted-subagent");
  });

  test("activities (file diff, command output) are nested under their tool calls", async () => {
    const page = await browser().newPage();
    await page.goto(`${url()}/coder`);
    await afterRuns(page, () => send(page, "pg-code: write the notes"), { timeout: 90_000 });
    const nested = page.locator(".tool .nested .activity");
    assert.ok((await nested.count()) >= 2, "an activity for the file and one for the command");
    const diff = page.locator(".tool .nested .activity pre.diff");
    assert.match(await diff.first().innerText(), /\+- playground/, "the file's diff");
    const terminal = page.locator(".tool .nested .activity pre.terminal");
    assert.match(await terminal.first().innerText(), /\$ cat notes\.md[\s\S]*playground/, "the command and its output");
    assert.match(await lastReply(page), /The command finished/);
    await screenshot(page, "scripted-activities");
  });

  test("reload finds the thread's history again (connect)", async () => {
    const page = await browser().newPage();
    await page.goto(`${url()}/`);
    await afterRuns(page, () => send(page, "pg-text: remember me"));
    const reply = await lastReply(page);
    assert.match(reply, /scripted/);
    const threadId = await page.evaluate(() => decodeURIComponent(location.hash.slice(1)));

    // A reload connects to the thread: the history comes back from the server (the reloaded
    // page counts its runs from zero, so wait for its first: the connect).
    await page.reload();
    await connected(page);
    assert.equal(await page.evaluate(() => decodeURIComponent(location.hash.slice(1))), threadId, "the same thread is open");
    assert.equal(await page.locator(".msg.user .bubble").innerText(), "pg-text: remember me");
    assert.equal(await lastReply(page), reply);
    assert.equal(await page.locator("details.reasoning").count(), 1, "reasoning is part of the history");
    assert.ok(await page.locator("#notice").isHidden(), "no complaint about connect");
    const listed = `#thread-list li[data-thread-id="${threadId}"]`;
    assert.equal(await page.locator(`${listed} .thread-title`).innerText(), "pg-text: remember me", "listed by the server");

    // A fresh tab starts a new chat; the thread is in its list (from the server), and opens.
    const other = await browser().newPage();
    await other.goto(`${url()}/`);
    assert.notEqual(await other.evaluate(() => decodeURIComponent(location.hash.slice(1))), threadId);
    await other.locator(`${listed} .thread`).click();
    await connected(other);
    assert.equal(await lastReply(other), reply);
    await screenshot(other, "scripted-reload-history");
  });

  test("stop during a long command ends the run as cancelled", async () => {
    const page = await browser().newPage();
    await page.goto(`${url()}/`);
    await send(page, "pg-long: sleep a while");
    const card = page.locator('.tool[data-tool-name="run_command"]');
    await card.waitFor();
    assert.equal(await card.getAttribute("data-status"), "running");
    const clicked = Date.now();
    await afterRuns(page, () => page.locator("#stop").click(), { timeout: 10_000 });
    assert.ok(Date.now() - clicked < 2_000, `stopped within 2 s (${Date.now() - clicked} ms)`);
    assert.equal(await page.locator(".run-note.outcome-cancelled .badge").textContent(), "stopped", "the run ended as cancelled");
    assert.ok(await page.locator("#notice").isHidden(), "a real stop, not the page giving up on listening");
    await screenshot(page, "scripted-stop");

    // The conversation goes on.
    await afterRuns(page, () => send(page, "pg-text: after the stop"));
    assert.match(await lastReply(page), /after the stop/);
  });
});
