// PENDING SERVER SUPPORT — not part of `cargo xtask browser` / `cargo xtask test` yet.
//
// These tests check what the playground shows for features the server does not have yet:
//   - subagents (issue 15: SUBAGENT_STARTED/FINISHED, `subagentRunId` on content events):
//     "a subagent is nested under its parent tool call";
//   - activities (issue 15: ACTIVITY_SNAPSHOT/DELTA for file diffs and command output, each
//     naming its tool call in `content.toolCallId`): "activities are nested under their calls".
// Run them with `cargo xtask browser --pending`; once the server supports a feature, move its
// test into ../scripted.test.mjs (the shared server, script and helpers are the same).
import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { useScriptedServer } from "../lib/scripted.mjs";
import { afterRuns, lastReply, screenshot, send, useBrowser } from "../lib/browser.mjs";

describe("playground features waiting for server support", () => {
  const url = useScriptedServer();
  const browser = useBrowser();

  test("a subagent is nested under its parent tool call", async () => {
    const page = await browser().newPage();
    await page.goto(`${url()}/coder`);
    await afterRuns(page, () => send(page, "pg-delegate: ask a helper"), { timeout: 90_000 });
    const box = page.locator(".tool .nested .subagent");
    assert.equal(await box.count(), 1, "one subagent, inside the invoke_subagent card");
    assert.equal(await box.getAttribute("data-status"), "finished");
    assert.match(await box.locator(".subagent-head").innerText(), /research|Helper/);
    assert.match(await box.locator(".subagent-body").innerText(), /subagent result text/, "its messages are inside it");
    assert.match(await lastReply(page), /The subagent says hi/);
    await screenshot(page, "pending-subagent");
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
    await screenshot(page, "pending-activities");
  });
});
