// The example app on the server's offline demo model (`serve --demo`, with an auth token the app's
// runtime sends): the server's identity and capabilities reach the page through CopilotKit's
// /info; a built-in tool and a server tool are cards with their arguments and results; the
// frontend tool `change_background` parks the turn, the page runs it and the turn goes on.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { startServer, stopAll } from "../../../tests/e2e/lib/procs.mjs";
import { useBrowser } from "../../../tests/browser/lib/browser.mjs";
import { startApp } from "./lib/app.mjs";
import { afterRuns, openChat, replyMatching, screenshot, send } from "./lib/chat.mjs";

const TOKEN = "copilotkit-example-token";

describe("CopilotKit example on the demo model", () => {
  let server;
  let app;
  before(async () => {
    server = await startServer({ label: "demo server", args: ["--demo", "--auth-token", TOKEN] });
    app = await startApp({ agentUrl: `${server.url}/`, token: TOKEN });
  });
  after(async () => {
    await app?.stop();
    await stopAll(server);
  });
  const browser = useBrowser();

  test("the page loads a small part of its bundle; the server's identity and capabilities reach it; a built-in tool call is a card", async (t) => {
    const loaded = [];
    browser().context.on("response", async (response) => {
      if (response.url().startsWith(app.url) && !response.url().includes("/api/")) loaded.push((await response.body().catch(() => Buffer.alloc(0))).length);
    });
    const page = await openChat(browser(), app);
    const bytes = loaded.reduce((sum, n) => sum + n, 0);
    t.diagnostic(`the page loaded ${bytes} bytes of script and style (${loaded.length} files)`);
    // CopilotKit's Markdown renderer brings syntax highlighting and diagrams (~16 MB in one
    // bundle); build.mjs splits them into chunks loaded when a reply needs them.
    assert.ok(bytes < 3_000_000, `the page loaded ${bytes} bytes`);
    await page.getByTestId("identity").filter({ hasText: /Antigravity/ }).waitFor();
    assert.match(await page.getByTestId("model").innerText(), /gemini/, "the model, from the capabilities' custom fields");

    await afterRuns(page, () => send(page, "List the files in the workspace"));
    const card = page.locator(".tool-card").first();
    assert.match(await card.getAttribute("data-tool-name"), /^list_dir(ectory)?$/);
    await page.locator('.tool-card[data-status="complete"]').first().waitFor({ timeout: 5_000 });
    assert.match(await card.locator(".tool-args").innerText(), /directoryPath/i);
    assert.equal(await card.locator(".tool-result").count(), 1, "with its result");
    await replyMatching(page, /Here's what I found in your workspace/);
    await screenshot(page, "builtin-tool-card");
  });

  test("a server tool card, then a frontend tool that parks the turn, runs in the page and resumes it", async () => {
    const page = await openChat(browser(), app);
    await afterRuns(page, () => send(page, "What's the weather in Tokyo?"));
    const weather = page.locator('.tool-card[data-tool-name="get_weather"]');
    assert.match(await weather.locator(".tool-args").innerText(), /Tokyo/);
    assert.match(await weather.locator(".tool-result").innerText(), /temperature/);
    await replyMatching(page, /The weather tool says/);

    // The model calls change_background: the run ends owing its result; CopilotKit runs the
    // tool in the page and sends its result in a second run, which resumes the parked turn.
    await afterRuns(page, () => send(page, "Now change the background, please"), { count: 2 });
    const card = page.locator('.tool-card[data-tool-name="change_background"]');
    await page.locator('.tool-card[data-tool-name="change_background"][data-status="complete"]').waitFor({ timeout: 5_000 });
    assert.match(await card.locator(".tool-result").innerText(), /background is now linear-gradient/);
    assert.match(await page.evaluate(() => document.body.dataset.background ?? ""), /linear-gradient/, "the page changed its background");
    await replyMatching(page, /I changed the background/);
    // Tall enough to show the whole conversation (the README's screenshot, docs/copilotkit.png).
    await page.setViewportSize({ width: 1280, height: 1400 });
    await page.waitForTimeout(300);
    await screenshot(page, "server-and-frontend-tools");
  });
});
