// The example's thread drawer and files panel on agents of the scripted model (the browser
// suite's `/` and `/coder`): the drawer lists the server's threads (through CopilotKit's
// `useThreads()`, which AntigravityRunner serves from the server), a rename and an archive made
// in the page reach the server, a change made on the server reaches the drawer live, and the
// list survives a restart of the app's runtime; the files panel shows a file the agent wrote and
// files uploaded from the page, previews text and images, downloads a file and a zip.
import assert from "node:assert/strict";
import fs from "node:fs";
import { randomUUID } from "node:crypto";
import zlib from "node:zlib";
import { after, before, describe, test } from "node:test";
import { AntigravityAgent } from "@agui-antigravity/client";
import { modelFlags } from "../../../tests/e2e/lib/mode.mjs";
import { startModel, startServer, stopAll } from "../../../tests/e2e/lib/procs.mjs";
import { useBrowser } from "../../../tests/browser/lib/browser.mjs";
import { SCRIPT, TOML } from "../../../tests/browser/lib/scripted.mjs";
import { eventually } from "../../../clients/typescript/test/lib/fixture.mjs";
import { unzip } from "../../../clients/typescript/test/lib/zip.mjs";
import { startApp } from "./lib/app.mjs";
import { afterRuns, openChat, screenshot, send, threadOf, untilRuns } from "./lib/chat.mjs";

const row = (page, threadId) => page.locator(`[data-testid="thread-row"][data-thread-id="${threadId}"]`);
const entry = (page, path) => page.locator(`[data-testid="file-entry"][data-path="${path}"]`);

/** A `size`×`size` PNG of one colour (`rgb`), made here so the test needs no fixture file. */
function png(size, [r, g, b]) {
  const table = Array.from({ length: 256 }, (_, n) => {
    let c = n;
    for (let k = 0; k < 8; k += 1) c = c & 1 ? 0xedb88320 ^ (c >>> 1) : c >>> 1;
    return c >>> 0;
  });
  const crc = (bytes) => {
    let c = 0xffffffff;
    for (const byte of bytes) c = table[(c ^ byte) & 0xff] ^ (c >>> 8);
    return (c ^ 0xffffffff) >>> 0;
  };
  const chunk = (type, data) => {
    const head = Buffer.alloc(8);
    head.writeUInt32BE(data.length, 0);
    head.write(type, 4, "ascii");
    const tail = Buffer.alloc(4);
    tail.writeUInt32BE(crc(Buffer.concat([head.subarray(4), data])), 0);
    return Buffer.concat([head, data, tail]);
  };
  const header = Buffer.alloc(13);
  header.writeUInt32BE(size, 0);
  header.writeUInt32BE(size, 4);
  header.set([8, 2, 0, 0, 0], 8); // 8-bit RGB
  const rows = Buffer.concat(Array.from({ length: size }, () => Buffer.from([0, ...Array.from({ length: size }, () => [r, g, b]).flat()])));
  return Buffer.concat([Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]), chunk("IHDR", header), chunk("IDAT", zlib.deflateSync(rows)), chunk("IEND", Buffer.alloc(0))]);
}

describe("CopilotKit example: the server's threads and the thread's files", () => {
  let model;
  let server;
  const apps = {};
  before(async () => {
    model = await startModel(SCRIPT);
    const { args, env } = modelFlags(model);
    server = await startServer({ label: "scripted server", config: TOML, args, env });
    apps.main = await startApp({ agentUrl: `${server.url}/` });
    apps.coder = await startApp({ agentUrl: `${server.url}/coder` });
  });
  after(async () => {
    await Promise.all(Object.values(apps).map((app) => app.stop()));
    await stopAll(server, model);
  });
  const browser = useBrowser();

  /** The main agent's threads on the server, as a client of the server sees them. */
  const serverThreads = () => new AntigravityAgent({ url: `${server.url}/` }).threads;

  /** A thread made on the server directly (not through the app), with `text` as its first message. */
  async function madeElsewhere(text) {
    const agent = new AntigravityAgent({ url: `${server.url}/`, threadId: `ck-${randomUUID()}` });
    agent.messages.push({ id: `u-${randomUUID()}`, role: "user", content: text });
    await agent.runAgent();
    return agent.threadId;
  }

  test("the drawer lists the server's threads; a rename and an archive made in the page reach the server", async () => {
    const first = await madeElsewhere("pg-text: first thread made elsewhere");
    const second = await madeElsewhere("pg-text: second thread made elsewhere");
    const page = await openChat(browser(), apps.main);
    await afterRuns(page, () => send(page, "pg-text: a thread of this page"));
    const own = await threadOf(page);

    await row(page, first).waitFor();
    assert.equal(await row(page, first).locator(".thread-title").innerText(), "pg-text: first thread made elsewhere", "a thread this page never showed, by the server's title");
    assert.equal(await row(page, second).locator(".thread-title").innerText(), "pg-text: second thread made elsewhere");
    await row(page, own).locator(".thread-title", { hasText: "pg-text: a thread of this page" }).waitFor();
    assert.match(await row(page, own).getAttribute("class"), /active/, "the page's own thread is marked");
    const order = await page.locator('[data-testid="thread-row"]').evaluateAll((rows) => rows.map((r) => r.dataset.threadId));
    const serverOrder = (await serverThreads().listThreads({ limit: 200 })).threads.map((t) => t.id);
    const ours = (ids) => ids.filter((id) => [own, first, second].includes(id));
    assert.deepEqual(ours(order), ours(serverOrder), "the server's order: newest activity first (to the second), then by id");

    await row(page, first).getByTestId("thread-rename").click();
    await row(page, first).getByTestId("thread-rename-input").fill("Renamed in the page");
    await row(page, first).getByTestId("thread-rename-input").press("Enter");
    await eventually(async () => (await serverThreads().getThread(first)).title === "Renamed in the page", 10_000, "the server to have the new title");
    await row(page, first).locator(".thread-title", { hasText: "Renamed in the page" }).waitFor();

    await row(page, second).getByTestId("thread-archive").click();
    await eventually(async () => (await serverThreads().getThread(second)).archived, 10_000, "the server to have the thread archived");
    await row(page, second).waitFor({ state: "detached" });
    await page.getByTestId("threads-show-archived").check();
    await page.locator(`[data-testid="thread-row"][data-thread-id="${second}"][data-archived="true"]`).waitFor();
    await screenshot(page, "threads-drawer");

    // Opening a listed thread shows its history, from the server.
    await row(page, first).locator(".thread-title").click();
    await untilRuns(page, 3);
    assert.equal(await threadOf(page), first);
    await page.locator('[data-testid="copilot-user-message"]', { hasText: "pg-text: first thread made elsewhere" }).waitFor();
  });

  test("a thread renamed or made on the server shows in the open drawer without a reload", async () => {
    const page = await openChat(browser(), apps.main);
    const made = await madeElsewhere("pg-text: made while the page is open");
    await row(page, made).locator(".thread-title", { hasText: "pg-text: made while the page is open" }).waitFor({ timeout: 10_000 });
    await serverThreads().renameThread(made, "Renamed on the server");
    await row(page, made).locator(".thread-title", { hasText: "Renamed on the server" }).waitFor({ timeout: 10_000 });
    await serverThreads().deleteThread(made);
    await row(page, made).waitFor({ state: "detached", timeout: 10_000 });
    await screenshot(page, "threads-live");
  });

  test("the drawer's list survives a restart of the app's runtime: it is the server's", async () => {
    const made = await madeElsewhere("pg-text: before the runtime restart");
    const page = await openChat(browser(), apps.main);
    await row(page, made).waitFor();
    // The page leaves before the runtime dies (its live list would otherwise see the connection drop).
    await page.goto("about:blank");
    const { port } = apps.main;
    await apps.main.kill();
    apps.main = await startApp({ agentUrl: `${server.url}/`, port });
    await page.goto(`${apps.main.url}/`);
    await untilRuns(page, 1);
    await row(page, made).locator(".thread-title", { hasText: "pg-text: before the runtime restart" }).waitFor();
    const listed = await page.locator('[data-testid="thread-row"]').evaluateAll((rows) => rows.map((r) => r.dataset.threadId));
    const expected = (await serverThreads().listThreads({ limit: 200 })).threads.map((t) => t.id);
    assert.deepEqual(listed, expected, "the drawer shows the server's list, in its order");
    await screenshot(page, "threads-after-runtime-restart");
  });

  test("the files panel shows a file the agent wrote and files uploaded from the page; previews, downloads, a zip", async () => {
    const page = await openChat(browser(), apps.coder);
    await afterRuns(page, () => send(page, "pg-code: write the notes"), { timeout: 90_000 });
    const threadId = await threadOf(page);
    await entry(page, "notes.md").waitFor({ timeout: 10_000 });
    await entry(page, "notes.md").locator(".file-name").click();
    assert.match(await page.getByTestId("preview-text").innerText(), /# Notes\s+- playground/, "the agent's file, previewed");

    const image = png(24, [47, 111, 237]);
    await page.getByTestId("files-upload").setInputFiles([
      { name: "hello.txt", mimeType: "text/plain", buffer: Buffer.from("uploaded from the page\n") },
      { name: "dot.png", mimeType: "image/png", buffer: image },
    ]);
    await entry(page, "hello.txt").waitFor({ timeout: 10_000 });
    await entry(page, "dot.png").waitFor();
    const coder = new AntigravityAgent({ url: `${server.url}/coder` }).threads;
    assert.equal(await (await coder.downloadFile(threadId, "hello.txt")).text(), "uploaded from the page\n", "the upload is on the server");
    assert.ok(Buffer.from(await (await coder.downloadFile(threadId, "dot.png")).arrayBuffer()).equals(image));

    await entry(page, "hello.txt").locator(".file-name").click();
    await page.locator('[data-testid="preview-text"]', { hasText: "uploaded from the page" }).waitFor();
    const download = page.waitForEvent("download");
    await page.getByTestId("file-download").click();
    assert.equal(fs.readFileSync(await (await download).path(), "utf8"), "uploaded from the page\n", "the downloaded file");

    await entry(page, "dot.png").locator(".file-name").click();
    await page.waitForFunction(() => document.querySelector('[data-testid="preview-image"]')?.naturalWidth === 24);

    const zipped = page.waitForEvent("download");
    await page.getByTestId("files-zip").click();
    const zip = unzip(fs.readFileSync(await (await zipped).path()));
    assert.deepEqual(Object.keys(zip.files).filter((name) => ["notes.md", "hello.txt", "dot.png"].includes(name)).sort(), ["dot.png", "hello.txt", "notes.md"]);
    assert.equal(zip.files["notes.md"].toString(), "# Notes\n- playground\n");
    assert.ok(zip.files["dot.png"].equals(image));
    await screenshot(page, "files-panel");
  });
});
