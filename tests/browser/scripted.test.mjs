// The playground against agents on the scripted model (`gemini-script`): interrupts answered
// through their forms (a question, approvals approved and denied), a RUN_ERROR shown plainly,
// a subagent and activities nested under their tool calls. Three agents on one server: `/`
// asks questions, `/guarded` asks before each tool, `/coder` delegates and writes files.
import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { useScriptedServer } from "./lib/scripted.mjs";
import { afterRuns, lastReply, screenshot, send, useBrowser } from "./lib/browser.mjs";

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
});
