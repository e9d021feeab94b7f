// The playground on the offline demo (`serve --demo`, the embedded scripted model and its
// `get_weather` server tool), behind an access token: what a newcomer sees after the README's
// first command. One server for the file, one browser per test, a fresh thread per test.
import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import { after, before, describe, test } from "node:test";
import { startServer, stopAll } from "../e2e/lib/procs.mjs";
import { afterRuns, lastReply, screenshot, send, useBrowser } from "./lib/browser.mjs";

const TOKEN = randomBytes(12).toString("hex");
const WITH_TOKEN = { "agui-playground:token": TOKEN };

let server;

describe("playground on the demo model", () => {
  before(async () => {
    server = await startServer({ label: "demo server", args: ["--demo", "--auth-token", TOKEN], env: { GEMINI_API_KEY: undefined } });
  });
  after(async () => {
    await stopAll(server);
  });
  // The first visit has no token yet: its 401s are expected (and logged by the browser).
  const browser = useBrowser({ expected: /401/ });

  test("asks for the access token once, then streams a Markdown reply with its reasoning collapsed", async () => {
    const page = await browser().newPage();
    const authorized = [];
    page.on("request", (r) => {
      if (r.method() === "POST") authorized.push(r.headers().authorization);
    });
    await page.goto(`${server.url}/`);
    const dialog = page.locator("#token-dialog");
    await dialog.waitFor({ state: "visible" });
    await page.locator("#token-input").fill(TOKEN);
    await page.locator("#token-save").click();
    await dialog.waitFor({ state: "hidden" });
    await page.locator("#agent-name").filter({ hasText: "offline demo model" }).waitFor();

    // Streamed: the reply grows in several steps before the run ends.
    const lengths = new Set();
    const sampling = setInterval(() => {
      page.evaluate(() => document.querySelector(".msg.assistant .md")?.textContent.length ?? 0).then((n) => lengths.add(n), () => {});
    }, 25);
    const state = await afterRuns(page, () => send(page, "Hello there"));
    clearInterval(sampling);
    assert.equal(state, "idle");
    assert.ok([...lengths].filter((n) => n > 0).length >= 3, `the reply arrived in pieces (${[...lengths].sort((a, b) => a - b).join(", ")})`);

    assert.match(await lastReply(page), /offline demo model/);
    assert.equal(await page.locator(".msg.assistant .md strong").first().innerText(), "offline demo model", "Markdown is rendered");
    assert.ok((await page.locator(".msg.assistant .md li").count()) >= 3, "a Markdown list");
    const reasoning = page.locator("details.reasoning");
    assert.equal(await reasoning.count(), 1, "the reasoning is shown");
    assert.equal(await reasoning.getAttribute("open"), null, "collapsed");
    await reasoning.locator("summary").click();
    assert.match(await reasoning.locator(".md").innerText(), /introduce myself/);
    assert.match(await page.locator(".run-note .usage").last().innerText(), /tokens/, "token usage of the run");
    assert.equal(await page.locator(".msg.user .bubble").innerText(), "Hello there");
    assert.deepEqual(await page.locator("#thread-list .thread-title").allInnerTexts(), ["Hello there"], "the thread is listed by its first message");

    assert.ok(authorized.length > 0 && authorized.every((a) => a === `Bearer ${TOKEN}`), "every POST carries the token");
    assert.equal(await page.evaluate(() => localStorage.getItem("agui-playground:token")), TOKEN, "kept for the next visit");
    await screenshot(page, "demo-token-and-streamed-reply");
  });

  test("a built-in tool call is a card with its path and the listing", async () => {
    const page = await browser().newPage(WITH_TOKEN);
    await page.goto(`${server.url}/`);
    await afterRuns(page, () => send(page, "List the files in the workspace"));
    const card = page.locator(".tool").first();
    assert.match(await card.getAttribute("data-tool-name"), /^list_dir(ectory)?$/);
    assert.equal(await card.getAttribute("data-status"), "done");
    assert.equal(await card.locator(".tool-gist").innerText(), ".", "the workspace, relative to itself: neither the server's path nor a file:// URL");
    assert.equal(await card.locator(".tool-result").count(), 1, "with its result");
    assert.match(await lastReply(page), /Here's what I found in your workspace/);
    await screenshot(page, "demo-builtin-tool-card");
  });

  test("a server tool card, then a frontend tool the page runs itself (README screenshot)", async () => {
    const page = await browser().newPage(WITH_TOKEN);
    await page.goto(`${server.url}/`);
    await afterRuns(page, () => send(page, "What's the weather in Tokyo?"));
    const weather = page.locator('.tool[data-tool-name="get_weather"]');
    assert.equal(await weather.locator(".tool-gist").innerText(), "Tokyo");
    assert.match(await weather.locator(".tool-result").innerText(), /temperature/);
    assert.match(await lastReply(page), /The weather tool says/);

    // The model calls change_background; the run ends owing its result, the page runs it,
    // answers with a tool message and the agent finishes in a second run.
    const state = await afterRuns(page, () => send(page, "Now change the background, please"), { count: 2 });
    assert.equal(state, "idle");
    const card = page.locator('.tool[data-tool-name="change_background"]');
    assert.equal(await card.getAttribute("data-status"), "done");
    assert.match(await card.locator(".tool-result").innerText(), /background is now linear-gradient/);
    const background = await page.locator("#chat").evaluate((el) => getComputedStyle(el).backgroundImage);
    assert.match(background, /linear-gradient/, "the page changed its background");
    assert.match(await lastReply(page), /I changed the background/);
    // Tall enough to show the whole conversation (this one is the README's screenshot).
    await page.setViewportSize({ width: 1280, height: 1100 });
    await page.locator("#log").evaluate((log) => (log.scrollTop = 0));
    await screenshot(page, "demo-server-and-frontend-tools");
  });
});
