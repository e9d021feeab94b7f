// PENDING SERVER SUPPORT — not part of `cargo xtask browser` / `cargo xtask test` yet.
//
// These tests check what the playground shows for features the server does not have yet:
//   - connect (issue 14: `POST <path>/connect`): "reload finds the thread's history";
//   - stop (issue 14: `POST <path>/stop`, RUN_FINISHED outcome `cancelled`): "stop during a
//     long command";
// Run them with `cargo xtask browser --pending`; once the server supports a feature, move its
// test into ../scripted.test.mjs (the shared server, script and helpers are the same).
import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { useScriptedServer } from "../lib/scripted.mjs";
import { afterRuns, lastReply, screenshot, send, useBrowser } from "../lib/browser.mjs";

/** Waits for a freshly loaded page's connect to end. */
function connected(page) {
  return page.waitForFunction(() => Number(document.body.dataset.runs ?? 0) >= 1 && document.body.dataset.state !== "running");
}

describe("playground features waiting for server support", () => {
  const url = useScriptedServer();
  const browser = useBrowser();

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
    assert.deepEqual(await page.locator("#thread-list .thread").allInnerTexts(), ["pg-text: remember me"]);

    // A fresh tab opened on the thread list finds it too.
    const other = await browser().newPage();
    await other.goto(`${url()}/`);
    await connected(other);
    assert.equal(await lastReply(other), reply);
    await screenshot(other, "pending-reload-history");
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
    await screenshot(page, "pending-stop");

    // The conversation goes on.
    await afterRuns(page, () => send(page, "pg-text: after the stop"));
    assert.match(await lastReply(page), /after the stop/);
  });
});
