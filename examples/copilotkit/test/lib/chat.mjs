// Driving the example page in headless Chromium (the browser suite's helpers, tests/browser):
// open it on a thread, send a message, wait for runs to end (the page marks them on <body>),
// read the chat, save a screenshot under test/screenshots/.
import fs from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";

/** Where each test's screenshot goes (gitignored). */
export const SCREENSHOTS = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../screenshots");

const TEXTAREA = '[data-testid="copilot-chat-textarea"]';

/** How many runs (and connects) the page has ended, and whether one is in flight. */
export function runState(page) {
  return page.evaluate(() => ({ runs: Number(document.body.dataset.runs ?? 0), state: document.body.dataset.state ?? "idle" }));
}

/** Waits until the page has ended `target` runs in all and none is in flight. */
export async function untilRuns(page, target, timeout = 60_000) {
  await page.waitForFunction((n) => Number(document.body.dataset.runs ?? 0) >= n && document.body.dataset.state !== "running", target, { timeout });
}

/** Opens the app on `threadId` (a new thread if none) and waits for its connect to end. */
export async function openChat(browser, app, threadId) {
  const page = await browser.newPage();
  await page.goto(`${app.url}/${threadId ? `#${encodeURIComponent(threadId)}` : ""}`);
  await page.locator(TEXTAREA).waitFor();
  await untilRuns(page, 1);
  return page;
}

/** The page's thread id (in its address). */
export const threadOf = (page) => page.evaluate(() => decodeURIComponent(location.hash.slice(1)));

/** Types `text` into CopilotKit's composer and sends it. */
export async function send(page, text) {
  await page.locator(TEXTAREA).fill(text);
  await page.locator(TEXTAREA).press("Enter");
}

/** Does `action`, then waits until `count` more runs have ended and none is in flight. */
export async function afterRuns(page, action, { count = 1, timeout = 60_000 } = {}) {
  const { runs } = await runState(page);
  await action();
  await untilRuns(page, runs + count, timeout);
}

/** The text of every user message, in order. */
export const userTexts = (page) => page.locator('[data-testid="copilot-user-message"]').allInnerTexts();

/** The text of the last assistant message, as it is now. */
export const lastReply = (page) => page.locator('[data-testid="copilot-assistant-message"]').last().innerText();

/**
 * The text of `locator` once it matches `pattern` (CopilotKit renders a run's last events a
 * moment after the run ends); fails with the text it had after `timeout`.
 */
export async function textMatching(locator, pattern, timeout = 10_000) {
  const deadline = Date.now() + timeout;
  let text = "";
  while (Date.now() < deadline) {
    text = await locator.innerText().catch(() => "");
    if (pattern.test(text)) return text;
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  throw new Error(`the text did not match ${pattern} within ${timeout} ms: ${JSON.stringify(text)}`);
}

/** The text of the last assistant message once it matches `pattern` (see `textMatching`). */
export const replyMatching = (page, pattern, timeout) => textMatching(page.locator('[data-testid="copilot-assistant-message"]').last(), pattern, timeout);

/** Saves what the page shows as `test/screenshots/<name>.png`; returns its path. */
export async function screenshot(page, name) {
  fs.mkdirSync(SCREENSHOTS, { recursive: true });
  const file = path.join(SCREENSHOTS, `${name}.png`);
  await page.screenshot({ path: file });
  return file;
}
