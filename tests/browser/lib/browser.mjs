// Headless Chromium (Debian's, from CHROMIUM_PATH) driven by playwright-core, with a fresh
// profile per browser; helpers to open the playground and save a screenshot per test.
import assert from "node:assert/strict";
import fs from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { afterEach, beforeEach } from "node:test";
import { chromium } from "playwright-core";
import { tempDir } from "../../e2e/lib/procs.mjs";

const here = path.dirname(fileURLToPath(import.meta.url));
/** Where each test's screenshot goes (gitignored). */
export const SCREENSHOTS = path.resolve(here, "../screenshots");

const ARGS = [
  "--no-sandbox",
  "--disable-gpu",
  "--disable-quic",
  "--no-first-run",
  "--disable-background-networking",
  "--disable-component-update",
  "--disable-sync",
  "--disable-dev-shm-usage",
];

/**
 * Starts Chromium with a fresh user-data dir. `close()` ends it and removes the profile.
 * Every page's console errors and uncaught exceptions are collected in `problems`.
 */
export async function startBrowser() {
  const executablePath = process.env.CHROMIUM_PATH ?? "/usr/bin/chromium";
  assert.ok(fs.existsSync(executablePath), `no Chromium at ${executablePath}; install Debian's chromium or set CHROMIUM_PATH`);
  const profile = tempDir("browser-profile");
  const context = await chromium.launchPersistentContext(profile, {
    executablePath,
    headless: true,
    args: ARGS,
    viewport: { width: 1280, height: 860 },
    deviceScaleFactor: 1,
  });
  const problems = [];
  const watch = (page) => {
    page.on("pageerror", (err) => problems.push(`uncaught: ${err.message}`));
    page.on("console", (msg) => {
      if (msg.type() === "error") problems.push(`console.error: ${msg.text()}`);
    });
  };
  context.pages().forEach(watch);
  context.on("page", watch);
  return {
    context,
    problems,
    /** A new tab, with `localStorage` seeded from `storage` before the page's scripts run. */
    async newPage(storage = {}) {
      if (Object.keys(storage).length) {
        await context.addInitScript((entries) => {
          // Also runs in about:blank, which has no storage.
          if (!location.protocol.startsWith("http")) return;
          for (const [key, value] of Object.entries(entries)) if (localStorage.getItem(key) === null) localStorage.setItem(key, value);
        }, storage);
      }
      return context.newPage();
    },
    async close() {
      await context.close();
      fs.rmSync(profile, { recursive: true, force: true });
    },
  };
}

/** Saves a full-page screenshot of `page` as `screenshots/<name>.png`; returns its path. */
export async function screenshot(page, name) {
  fs.mkdirSync(SCREENSHOTS, { recursive: true });
  const file = path.join(SCREENSHOTS, `${name}.png`);
  await page.screenshot({ path: file, fullPage: false });
  return file;
}

/** Types `text` into the composer and sends it. */
export async function send(page, text) {
  await page.locator("#prompt").fill(text);
  await page.locator("#prompt").press("Enter");
}

/** How many runs the page has finished (it counts them in `body[data-runs]`). */
export async function runs(page) {
  return page.evaluate(() => Number(document.body.dataset.runs ?? 0));
}

/**
 * Does `action`, then waits until the page has finished `count` more runs and none is in
 * flight; returns the page's state then (`idle` or `interrupted`).
 */
export async function afterRuns(page, action, { count = 1, timeout = 60_000 } = {}) {
  const before = await runs(page);
  await action();
  await page.waitForFunction(
    (target) => Number(document.body.dataset.runs ?? 0) >= target && document.body.dataset.state !== "running",
    before + count,
    { timeout },
  );
  return page.evaluate(() => document.body.dataset.state);
}

/** The text of the last assistant reply. */
export async function lastReply(page) {
  return page.locator(".msg.assistant .md:not([hidden])").last().innerText();
}

/**
 * A fresh browser for each test of the calling suite; after each test it is closed and the test
 * fails if a page logged an error (except those matching `expected`). Returns a getter.
 */
export function useBrowser({ expected } = {}) {
  let browser;
  beforeEach(async () => {
    browser = await startBrowser();
  });
  afterEach(async () => {
    const problems = browser.problems.filter((p) => !expected?.test(p));
    await browser.close();
    assert.deepEqual(problems, [], "the page logged no error");
  });
  return () => browser;
}
