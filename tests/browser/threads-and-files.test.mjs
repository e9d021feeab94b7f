// The playground's thread list and Files panel against the server's thread routes (issue 38),
// on the scripted model: the list is the server's (a thread another client makes appears live,
// with its status), rename, archive, delete and search; the Files panel shows what the agent
// wrote (text, an image inline), its file_change activity opens the file, tool cards show
// workspace-relative paths, downloads (a file, a folder as a zip) are byte for byte, and an
// upload (picked or dropped) reaches the agent's next command.
import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import fs from "node:fs";
import { describe, test } from "node:test";
import { afterRuns, lastReply, screenshot, send, useBrowser } from "./lib/browser.mjs";
import { runElsewhere, summaryOf } from "./lib/elsewhere.mjs";
import { PNG, UPLOADED, useScriptedServer } from "./lib/scripted.mjs";
import { unzip } from "./lib/zip.mjs";


/** The open thread's id (the page keeps it in the URL's fragment). */
function openThreadId(page) {
  return page.evaluate(() => decodeURIComponent(location.hash.slice(1)));
}

function listed(page, threadId) {
  return page.locator(`#thread-list li[data-thread-id="${threadId}"]`);
}

/** Waits until the thread's status badge says `text`. */
async function statusIs(page, threadId, text, timeout = 30_000) {
  await page.waitForFunction(
    ([id, want]) => document.querySelector(`#thread-list li[data-thread-id="${id}"] .thread-status`)?.textContent === want,
    [threadId, text],
    { timeout },
  );
}

/**
 * Waits until the page lists its threads in the server's order (newest activity first, as
 * `GET /threads` gives them; both may move while threads run, so it is compared until equal).
 */
async function sameOrderAsServer(page, base) {
  let last;
  for (let attempt = 0; attempt < 20; attempt++) {
    const server = (await (await fetch(`${base}/threads`)).json()).threads.map((t) => t.id);
    const shown = await page.locator("#thread-list li[data-thread-id]").evaluateAll((items) => items.map((li) => li.dataset.threadId));
    if (JSON.stringify(shown) === JSON.stringify(server)) return;
    last = { shown, server };
    await new Promise((resolve) => setTimeout(resolve, 250));
  }
  assert.deepEqual(last.shown, last.server, "the page lists the threads in the server's order");
}

/** Chooses `action` in the thread's menu. */
async function threadAction(page, threadId, action) {
  await listed(page, threadId).locator(".thread-more").click();
  await listed(page, threadId).getByRole("menuitem", { name: action }).click();
}

/** The file (or folder) row of `rel` in the Files panel. */
function fileRow(page, rel) {
  return page.locator(`#files-tree li[data-path="${rel}"] > .file-row`);
}

/** Clicks `locator` and returns the download it starts, with its bytes. */
async function downloaded(page, locator) {
  const [download] = await Promise.all([page.waitForEvent("download"), locator.click()]);
  const file = await download.path();
  return { name: download.suggestedFilename(), bytes: fs.readFileSync(file) };
}

describe("threads and files from the server", () => {
  const url = useScriptedServer();
  const browser = useBrowser();

  test("the thread list is the server's and follows another client's threads live, with their status", async () => {
    const page = await browser().newPage();
    await page.goto(`${url()}/`);
    // Once the page follows the server's thread events (a page without them never says so: the
    // assertions below then tell what it lacks).
    await page.waitForFunction(() => document.body.dataset.threadsLive === "true", null, { timeout: 5_000 }).catch(() => {});
    await page.evaluate(() => (window.samePage = true));

    // Another client asks; the agent's question leaves its thread waiting.
    const asked = `pg-other-${randomUUID()}`;
    await runElsewhere(url(), asked, "pg-ask: made by another client");
    await listed(page, asked).waitFor();
    assert.equal(await listed(page, asked).locator(".thread-title").innerText(), "pg-ask: made by another client");
    await statusIs(page, asked, "waiting · question");

    // Another client's long command: running, then idle once stopped.
    const busy = `pg-other-${randomUUID()}`;
    const running = runElsewhere(url(), busy, "pg-long: sleep elsewhere");
    await listed(page, busy).waitFor();
    await statusIs(page, busy, "running");
    await sameOrderAsServer(page, url());
    await screenshot(page, "threads-live-status");
    const stop = await fetch(`${url()}/stop`, { method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify({ threadId: busy }) });
    assert.equal(stop.status, 200);
    await running;
    await statusIs(page, busy, "idle");
    assert.equal(await page.evaluate(() => window.samePage), true, "all of it without a reload");
    assert.ok(await page.locator("#notice").isHidden());
  });

  test("a thread is renamed inline, archived, searched for and deleted after a confirmation", async () => {
    const page = await browser().newPage();
    await page.goto(`${url()}/`);
    const tag = randomUUID().slice(0, 8);
    await afterRuns(page, () => send(page, `pg-text: alpha ${tag}`));
    const alpha = await openThreadId(page);
    await page.locator("#new-thread").click();
    await afterRuns(page, () => send(page, `pg-text: beta ${tag}`));
    const beta = await openThreadId(page);
    assert.notEqual(alpha, beta);
    await listed(page, alpha).waitFor();
    await listed(page, beta).waitFor();

    // Search: the loaded threads' titles.
    await page.locator("#thread-search").fill(`alpha ${tag}`);
    assert.deepEqual(await page.locator("#thread-list .thread-title").allInnerTexts(), [`pg-text: alpha ${tag}`]);
    await page.locator("#thread-search").fill("");
    assert.ok((await page.locator("#thread-list .thread-title").count()) >= 2);

    // Rename inline: Enter saves it on the server.
    await threadAction(page, alpha, "Rename");
    const input = listed(page, alpha).locator("input.thread-rename");
    assert.equal(await input.inputValue(), `pg-text: alpha ${tag}`);
    await input.fill(`Renamed ${tag}`);
    await input.press("Enter");
    await listed(page, alpha).locator(".thread-title", { hasText: `Renamed ${tag}` }).waitFor();
    assert.equal((await summaryOf(url(), alpha)).title, `Renamed ${tag}`);
    await page.locator("#thread-search").fill(`renamed ${tag}`);
    assert.deepEqual(await page.locator("#thread-list .thread-title").allInnerTexts(), [`Renamed ${tag}`], "search ignores case");
    await screenshot(page, "threads-renamed-and-searched");
    await page.locator("#thread-search").fill("");

    // Archive: gone from the list, back with "Show archived".
    await threadAction(page, alpha, "Archive");
    await listed(page, alpha).waitFor({ state: "detached" });
    assert.equal((await summaryOf(url(), alpha)).archived, true);
    await page.locator("#show-archived").check();
    await listed(page, alpha).waitFor();
    assert.equal(await listed(page, alpha).locator(".thread-archived").innerText(), "archived");
    assert.match(await listed(page, alpha).getAttribute("class"), /archived/);
    await screenshot(page, "threads-archived-shown");
    await page.locator("#show-archived").uncheck();
    await listed(page, alpha).waitFor({ state: "detached" });

    // Delete, confirmed: the open thread is gone on the server, the page starts a new chat.
    await threadAction(page, beta, "Delete…");
    const dialog = page.locator("#confirm-dialog");
    await dialog.waitFor({ state: "visible" });
    assert.match(await dialog.locator("#confirm-text").innerText(), new RegExp(`Delete “pg-text: beta ${tag}”`));
    await screenshot(page, "threads-delete-confirmation");
    await dialog.getByRole("button", { name: "Cancel" }).click();
    assert.ok(await listed(page, beta).isVisible(), "cancelled: still there");
    await threadAction(page, beta, "Delete…");
    await dialog.getByRole("button", { name: "Delete" }).click();
    await listed(page, beta).waitFor({ state: "detached" });
    // (The server's "deleted" event may remove the row before the DELETE's answer opens a new chat.)
    await page.waitForFunction((id) => decodeURIComponent(location.hash.slice(1)) !== id, beta, { timeout: 5_000 }).catch(() => {});
    assert.equal(await summaryOf(url(), beta), null, "deleted on the server");
    assert.notEqual(await openThreadId(page), beta, "a new chat instead");
    assert.equal(await page.locator("#thread-title").innerText(), "New chat");
    assert.equal(await page.locator("#log > *").count(), 0, "an empty conversation");
  });

  test("the list comes 50 threads at a time: scrolling to its end loads the next page; a search loads pages until it finds", async () => {
    const tag = randomUUID().slice(0, 8);
    // Threads made by an upload (no model turn needed): the oldest of them renamed, then, a
    // second later (updatedAt has seconds), 54 newer ones, so that it is on the second page.
    const put = async (threadId) => {
      const res = await fetch(`${url()}/threads/${threadId}/files/seed.txt`, { method: "PUT", body: `seed of ${threadId}\n` });
      assert.equal(res.status, 201, `the upload made ${threadId}`);
    };
    const oldest = `pg-page-${tag}-oldest`;
    await put(oldest);
    const patch = await fetch(`${url()}/threads/${oldest}`, {
      method: "PATCH",
      headers: { "Content-Type": "application/json" },
      body: JSON.stringify({ title: `Second page ${tag}` }),
    });
    assert.equal(patch.status, 200);
    await new Promise((resolve) => setTimeout(resolve, 1_100));
    for (let n = 0; n < 54; n++) await put(`pg-page-${tag}-${String(n).padStart(2, "0")}`);
    const all = (await (await fetch(`${url()}/threads?limit=200`)).json()).threads.map((t) => t.id);
    assert.ok(all.length > 50 && all.indexOf(oldest) >= 50, `the renamed thread is past the first page: ${all.indexOf(oldest)} of ${all.length}`);

    const page = await browser().newPage();
    await page.goto(`${url()}/`);
    const rows = page.locator("#thread-list li[data-thread-id]");
    await page.locator("#thread-list li.more button").waitFor();
    assert.equal(await rows.count(), 50, "the first page");
    assert.equal(await listed(page, oldest).count(), 0, "not loaded yet");

    // Scrolled to the end of the list: the next page.
    await page.locator("#thread-list li.more").scrollIntoViewIfNeeded();
    await page.waitForFunction((n) => document.querySelectorAll("#thread-list li[data-thread-id]").length === n, all.length);
    assert.deepEqual(await rows.evaluateAll((items) => items.map((li) => li.dataset.threadId)), all, "every thread, in the server's order");
    assert.ok(await page.locator("#thread-list li.more button").isHidden(), "nothing more to load");
    await listed(page, oldest).scrollIntoViewIfNeeded();
    await screenshot(page, "threads-second-page");

    // Another page searches at once: the filtered list is short, its end in view, so the next
    // page loads and the search (over the loaded threads) finds the old one.
    const other = await browser().newPage();
    await other.goto(`${url()}/`);
    await other.locator("#thread-list li.more button").waitFor();
    await other.locator("#thread-search").fill(`second page ${tag}`);
    await listed(other, oldest).waitFor();
    assert.deepEqual(await other.locator("#thread-list .thread-title").allInnerTexts(), [`Second page ${tag}`]);
  });

  test("the Files panel shows a file the agent wrote; its file_change activity opens it; tool cards show relative paths", async () => {
    const page = await browser().newPage();
    await page.goto(`${url()}/coder`);
    await afterRuns(page, () => send(page, "pg-code: write the notes"), { timeout: 90_000 });
    assert.match(await lastReply(page), /The command finished/);

    // The turn's end refreshed the panel.
    await fileRow(page, "notes.md").waitFor();
    assert.equal(await fileRow(page, "notes.md").locator(".file-size").innerText(), "21 B");

    // Tool cards: paths relative to the workspace, none absolute.
    // The file tool's card (the harness names it edit_file), the one holding the file_change.
    const write = page.locator('.tool:has(.activity[data-activity-type="file_change"])');
    assert.equal(await write.locator(".tool-gist").innerText(), "notes.md");
    assert.equal(await write.locator(".tool-args .path").innerText(), "notes.md");
    const command = page.locator('.tool[data-tool-name="run_command"]');
    assert.equal(await command.locator(".tool-args .cwd").innerText(), "in the workspace");
    for (const text of await page.locator(".tool .tool-gist, .tool .path, .tool .cwd").allInnerTexts()) {
      assert.doesNotMatch(text, /^\/|\/w\//, `no server path in a card: ${text}`);
    }

    // The file_change activity links to its file: the preview shows it.
    const link = page.locator('.activity[data-activity-type="file_change"] .file-link');
    assert.equal(await link.innerText(), "notes.md");
    await link.click();
    const preview = page.locator('#file-preview[data-path="notes.md"] pre.preview-text');
    await preview.waitFor();
    assert.equal(await preview.textContent(), "# Notes\n- playground\n");
    assert.match(await fileRow(page, "notes.md").evaluate((row) => row.parentElement.className), /selected/);
    await screenshot(page, "files-agent-file-from-activity-link");
  });

  test("an image the agent made shows inline; a file downloads byte for byte, a folder and the workspace as zips", async () => {
    const page = await browser().newPage();
    await page.goto(`${url()}/coder`);
    await afterRuns(page, () => send(page, "pg-image: draw a picture"), { timeout: 90_000 });
    const threadId = await openThreadId(page);
    await fileRow(page, "img").waitFor();
    await fileRow(page, "img").locator(".file-name").click();
    await fileRow(page, "img/dot.png").locator(".file-name").click();
    const image = page.locator("#preview-body img.preview-image");
    await image.waitFor();
    await page.waitForFunction(() => document.querySelector("#preview-body img.preview-image")?.complete);
    assert.deepEqual(await image.evaluate((img) => [img.naturalWidth, img.naturalHeight]), [64, 48], "the image is decoded and shown");
    assert.match(await image.getAttribute("src"), /^blob:/, "from a blob the page fetched with its credentials");
    await screenshot(page, "files-image-inline");

    const file = await downloaded(page, page.locator("#preview-download"));
    assert.equal(file.name, "dot.png");
    assert.ok(file.bytes.equals(PNG), "the download's bytes are the file's");

    const folder = await downloaded(page, fileRow(page, "img").getByRole("button", { name: "Download img as zip" }));
    assert.equal(folder.name, "img.zip");
    const inFolder = unzip(folder.bytes);
    const dot = [...inFolder].find(([name]) => name.endsWith("dot.png"));
    assert.ok(dot, `the folder's zip holds dot.png: ${[...inFolder.keys()]}`);
    assert.ok(dot[1].equals(PNG), "with its bytes");

    const workspace = await downloaded(page, page.locator("#files-zip"));
    assert.equal(workspace.name, `${threadId}.zip`);
    assert.ok(unzip(workspace.bytes).get("img/dot.png")?.equals(PNG), `the workspace's zip holds img/dot.png: ${[...unzip(workspace.bytes).keys()]}`);
  });

  test("a file uploaded by the picker before the first message appears and reaches the agent's next command; a dropped one too", async () => {
    const page = await browser().newPage();
    await page.goto(`${url()}/coder`);
    const threadId = await openThreadId(page);
    await page.locator("#files-input").setInputFiles({ name: "upload-me.txt", mimeType: "text/plain", buffer: Buffer.from(UPLOADED) });
    await fileRow(page, "upload-me.txt").waitFor();
    assert.match(await page.locator("#files-status").innerText(), /Uploaded upload-me\.txt/);
    // The upload made the thread on the server: listed, untitled until its first message.
    await listed(page, threadId).waitFor();
    assert.equal(await listed(page, threadId).locator(".thread-title").innerText(), "Untitled");

    // A file dropped on the panel.
    await page.evaluate(() => {
      const data = new DataTransfer();
      data.items.add(new File(["dropped on the panel\n"], "dropped.txt", { type: "text/plain" }));
      const target = document.querySelector("#files-tree");
      for (const type of ["dragenter", "dragover", "drop"]) target.dispatchEvent(new DragEvent(type, { dataTransfer: data, bubbles: true, cancelable: true }));
    });
    await fileRow(page, "dropped.txt").waitFor();
    await fileRow(page, "dropped.txt").locator(".file-name").click();
    const dropped = page.locator('#file-preview[data-path="dropped.txt"] pre.preview-text');
    await dropped.waitFor();
    assert.equal(await dropped.textContent(), "dropped on the panel\n");
    await screenshot(page, "files-uploaded");

    await afterRuns(page, () => send(page, "pg-cat-upload: read what I uploaded"), { timeout: 90_000 });
    assert.equal(await openThreadId(page), threadId, "the same thread");
    assert.match(await lastReply(page), /The command finished: .*uploaded through the Files panel/s, "the agent's command read the upload");
    await listed(page, threadId).locator(".thread-title", { hasText: "pg-cat-upload: read what I uploaded" }).waitFor();
    await screenshot(page, "files-upload-read-by-the-agent");
  });
});
