// AntigravityThreads (and `agent.threads`) against the real server, harness and scripted model,
// with two callers (`auth_tokens`): the caller's threads listed page by page, read, renamed,
// archived and deleted; their changes watched live (created, status, deleted), also across a
// broken stream; a workspace's files uploaded (bytes, Blob, stream) and downloaded back, by
// range too, as a zip compared with what was uploaded, and a file the agent wrote; another
// caller's thread is a 404 everywhere; an upload past the disk cap is a 413 that leaves nothing.
import assert from "node:assert/strict";
import { randomBytes, randomUUID } from "node:crypto";
import { after, before, describe, test } from "node:test";
import { AntigravityAgent, AntigravityHttpError, AntigravityThreads } from "@agui-antigravity/client";
import { SCRIPT, eventually, hostPort, startModel, startRelay, startTestServer, stopAll, useServer } from "./lib/fixture.mjs";
import { unzip } from "./lib/zip.mjs";

const ALICE = "alice-client-token-0001";
const BOB = "bob-client-token-000001";

/** A `fetch` that records each request (method, URL, headers) in `log`. */
const recording = (log) => (input, init) => {
  log.push({ url: String(input), method: init?.method ?? "GET", headers: new Headers(init?.headers) });
  return fetch(input, init);
};

/** Runs `text` on a new thread (or `threadId`) as the caller of `token`; returns the agent. */
async function runThread(url, token, text, threadId = `c-${randomUUID()}`) {
  const agent = new AntigravityAgent({ url, threadId, authToken: token });
  agent.messages.push({ id: `u-${randomUUID()}`, role: "user", content: text });
  await agent.runAgent();
  return agent;
}

/** Follows `threads.watchThreads(options)` in the background, keeping what it sees. */
function follow(threads, options = {}) {
  const controller = new AbortController();
  const seen = { changes: [], opens: [], breaks: [] };
  const done = (async () => {
    for await (const change of threads.watchThreads({
      signal: controller.signal,
      onOpen: (info) => seen.opens.push(info),
      onBreak: (error) => seen.breaks.push(error),
      ...options,
    })) {
      seen.changes.push(change);
    }
  })();
  return { ...seen, done, stop: async () => (controller.abort(), await done) };
}

/** A stream of `bytes` in `pieces` chunks, read as the upload goes. */
function streamOf(bytes, pieces = 7) {
  const size = Math.ceil(bytes.length / pieces);
  let at = 0;
  return new ReadableStream({
    pull(controller) {
      if (at >= bytes.length) return controller.close();
      controller.enqueue(bytes.subarray(at, at + size));
      at += size;
    },
  });
}

const rejectsWith = (promise, status, what) =>
  assert.rejects(promise, (error) => {
    assert.ok(error instanceof AntigravityHttpError, `${what}: an AntigravityHttpError (got ${error})`);
    assert.equal(error.status, status, `${what}: HTTP ${status}`);
    assert.equal(typeof error.serverMessage, "string", `${what}: the server's message is kept`);
    return true;
  });

describe("AntigravityThreads", () => {
  // Threads idle for 2 s hibernate: a change of status alone.
  const handles = useServer({ args: ["--auth-tokens", `alice=${ALICE},bob=${BOB}`, "--hibernate-after-secs", "2"] });
  const url = () => `${handles.server.url}/`;
  const alice = (log = []) => Object.assign(new AntigravityThreads({ url: url(), authToken: ALICE, fetch: recording(log) }), { log });
  const bob = () => new AntigravityThreads({ url: url(), authToken: BOB });

  test("listThreads: the caller's threads, newest first, page by page; getThread reads one; titles from the first line", async () => {
    const long = `c-hello: ${"x".repeat(100)}`;
    const first = await runThread(url(), ALICE, `${long}\nsecond line`);
    const second = await runThread(url(), ALICE, "c-hello: the second");
    const third = await runThread(url(), ALICE, "c-hello: the third");
    const bobs = await runThread(url(), BOB, "c-hello: bob's own");

    const threads = alice();
    const all = [];
    let page = await threads.listThreads({ limit: 2 });
    assert.equal(page.threads.length, 2);
    assert.equal(typeof page.nextCursor, "string", "a cursor to the next page");
    all.push(...page.threads);
    while (page.nextCursor) {
      page = await threads.listThreads({ limit: 2, cursor: page.nextCursor });
      all.push(...page.threads);
    }
    const ids = all.map((t) => t.id);
    for (const agent of [first, second, third]) assert.ok(ids.includes(agent.threadId), `${agent.threadId} listed`);
    assert.ok(!ids.includes(bobs.threadId), "another caller's thread is not listed");
    assert.equal(new Set(ids).size, ids.length, "no thread twice across pages");
    const sorted = [...all].sort((a, b) => (a.updatedAt === b.updatedAt ? (a.id < b.id ? -1 : 1) : a.updatedAt < b.updatedAt ? 1 : -1));
    assert.deepEqual(ids, sorted.map((t) => t.id), "newest activity first, then by id");
    const iterated = [];
    for await (const thread of threads.iterateThreads({ limit: 1 })) iterated.push(thread.id);
    assert.deepEqual(iterated, ids, "iterateThreads walks the same pages");

    const summary = await threads.getThread(first.threadId);
    assert.equal(summary.title, long.slice(0, 80), "the first line, 80 characters at most");
    assert.ok(["idle", "hibernated"].includes(summary.status), `idle or asleep: ${summary.status}`);
    assert.equal(summary.archived, false);
    assert.equal(summary.waitingFor, undefined);
    assert.ok(summary.messageCount >= 2, `messageCount ${summary.messageCount}`);
    assert.match(summary.createdAt, /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$/);
    assert.ok(summary.updatedAt >= summary.createdAt);
    assert.equal((await threads.getThread(second.threadId)).title, "c-hello: the second");

    const get = threads.log.find((r) => r.url.endsWith(`/threads/${first.threadId}`));
    assert.equal(get.headers.get("authorization"), `Bearer ${ALICE}`);
    assert.equal(get.headers.get("x-thread-id"), first.threadId, "a thread's request carries its routing key");
    assert.equal(threads.log[0].headers.get("x-thread-id"), null, "a listing is about no thread");

    await rejectsWith(threads.listThreads({ limit: 0 }), 400, "limit 0");
    await rejectsWith(threads.listThreads({ cursor: "not a cursor" }), 400, "a bad cursor");
    await rejectsWith(threads.getThread(`c-${randomUUID()}`), 404, "an unknown thread");
  });

  test("renameThread and archiveThread change the thread on the server; archived threads are listed on request", async () => {
    const { threadId } = await runThread(url(), ALICE, "c-hello: to be renamed");
    const threads = alice();
    const renamed = await threads.renameThread(threadId, "  Renamed thread  ");
    assert.equal(renamed.title, "Renamed thread", "trimmed");
    assert.equal((await threads.getThread(threadId)).title, "Renamed thread");

    const archived = await threads.archiveThread(threadId);
    assert.equal(archived.archived, true);
    const ids = async (archivedFilter) => (await threads.listThreads({ archived: archivedFilter, limit: 200 })).threads.map((t) => t.id);
    assert.ok(!(await ids(undefined)).includes(threadId), "not among the unarchived (the default)");
    assert.ok((await ids(true)).includes(threadId), "among the archived");
    assert.ok((await ids("all")).includes(threadId), "among all");
    assert.equal((await threads.archiveThread(threadId, false)).archived, false);
    assert.ok((await ids(false)).includes(threadId));

    await rejectsWith(threads.renameThread(threadId, "   "), 422, "an empty title");
    await rejectsWith(threads.renameThread(threadId, "x".repeat(201)), 422, "a title of 201 characters");
    await rejectsWith(threads.renameThread(threadId, "a\u0007bell"), 422, "a control character");
    await rejectsWith(threads.updateThread(threadId, {}), 422, "nothing to change");
    assert.equal((await threads.getThread(threadId)).title, "Renamed thread", "unchanged by the refused ones");
  });

  test("watchThreads sees a thread created, running, idle, asleep (a status change) and deleted; it ends when aborted", async () => {
    const threads = alice();
    const watch = follow(threads);
    await eventually(() => watch.opens.length === 1, 10_000, "the stream to open");
    const agent = await runThread(url(), ALICE, "c-hello: watch me");
    const mine = () => watch.changes.filter((c) => c.thread.id === agent.threadId);
    await eventually(() => mine().some((c) => c.thread.status === "idle" && c.thread.messageCount >= 2), 10_000, "the thread idle, its reply counted");
    assert.equal(mine()[0].type, "created", "first its creation");
    assert.ok(mine().some((c) => c.thread.status === "running"), "then running");
    assert.equal(mine().at(-1).thread.title, "c-hello: watch me");
    // Idle for hibernate_after_secs, its conversation is put to sleep: only its status changes.
    await eventually(() => mine().some((c) => c.type === "status" && c.thread.status === "hibernated"), 15_000, "a status change to hibernated");

    assert.equal(await threads.deleteThread(agent.threadId), true);
    await eventually(() => mine().some((c) => c.type === "deleted"), 10_000, "its deletion");
    assert.deepEqual(mine().at(-1), { type: "deleted", thread: { id: agent.threadId } });
    assert.equal(await threads.deleteThread(agent.threadId), false, "nothing left to delete");

    await watch.stop();
    assert.deepEqual(watch.opens, [{ reconnected: false }]);
    assert.deepEqual(watch.breaks, [], "the stream never broke");
  });

  test("watchThreads reconnects when its stream breaks, and goes on seeing changes", async () => {
    const relay = await startRelay(hostPort(url()));
    try {
      const threads = new AntigravityThreads({ url: `${relay.url}/`, authToken: ALICE });
      const watch = follow(threads, { retry: { delayMs: 50 } });
      await eventually(() => watch.opens.length === 1, 10_000, "the stream to open");
      relay.cut();
      await eventually(() => watch.opens.length === 2, 10_000, "the stream to open again");
      assert.ok(watch.breaks.length >= 1, "the break was reported");
      assert.deepEqual(watch.opens[1], { reconnected: true });
      const agent = await runThread(url(), ALICE, "c-hello: after the break");
      await eventually(() => watch.changes.some((c) => c.thread.id === agent.threadId), 10_000, "a change after the reconnect");
      await watch.stop();
    } finally {
      await relay.stop();
    }
  });

  test("watchThreads of a refused caller throws the server's 401 instead of retrying", async () => {
    const threads = new AntigravityThreads({ url: url(), authToken: "not-a-token-of-this-server" });
    const watch = follow(threads);
    await rejectsWith(watch.done, 401, "a wrong token");
    assert.deepEqual(watch.opens, []);
  });

  test("another caller's thread is a 404 everywhere, exactly as an unknown one", async () => {
    const { threadId } = await runThread(url(), ALICE, "c-hello: alice's");
    await alice().uploadFile(threadId, "secret.txt", "alice's secret");
    const stranger = bob();
    await rejectsWith(stranger.getThread(threadId), 404, "bob's getThread");
    await rejectsWith(stranger.renameThread(threadId, "mine now"), 404, "bob's rename");
    await rejectsWith(stranger.archiveThread(threadId), 404, "bob's archive");
    await rejectsWith(stranger.listFiles(threadId), 404, "bob's listFiles");
    await rejectsWith(stranger.downloadFile(threadId, "secret.txt"), 404, "bob's download");
    await rejectsWith(stranger.downloadArchive(threadId), 404, "bob's archive download");
    assert.equal(await stranger.deleteFile(threadId, "secret.txt"), false, "bob's file delete finds nothing");
    assert.equal(await stranger.deleteThread(threadId), false, "bob's delete finds nothing");
    const unknown = await stranger.getThread(`c-${randomUUID()}`).catch((error) => error);
    const foreign = await stranger.getThread(threadId).catch((error) => error);
    assert.equal(foreign.serverMessage.replace(threadId, "ID"), unknown.serverMessage.replace(/c-[0-9a-f-]{36}/, "ID"), "the same answer");

    const threads = alice();
    assert.equal((await threads.getThread(threadId)).title, "c-hello: alice's", "alice's thread is untouched");
    assert.equal(await (await threads.downloadFile(threadId, "secret.txt")).text(), "alice's secret");
  });

  test("uploadFile then downloadFile: bytes, a Blob and a stream come back the same; a PUT makes the thread", async () => {
    const threads = alice();
    const threadId = `c-${randomUUID()}`;
    const bytes = randomBytes(300_000);
    const made = await threads.uploadFile(threadId, "data/blob.bin", streamOf(bytes));
    assert.equal(made.created, true);
    assert.deepEqual({ name: made.entry.name, kind: made.entry.kind, size: made.entry.size }, { name: "blob.bin", kind: "file", size: bytes.length });
    const put = threads.log.find((r) => r.method === "PUT");
    assert.equal(put.headers.get("x-thread-id"), threadId);

    const summary = await threads.getThread(threadId);
    assert.equal(summary.title, "", "a thread an upload made has no title yet");
    assert.ok((await threads.listThreads({ limit: 200 })).threads.some((t) => t.id === threadId), "and is listed");

    const download = await threads.downloadFile(threadId, "data/blob.bin");
    assert.equal(download.status, 200);
    assert.equal(download.headers.get("content-length"), String(bytes.length));
    assert.equal(download.headers.get("content-type"), "application/octet-stream");
    assert.equal(download.headers.get("accept-ranges"), "bytes");
    assert.equal(download.headers.get("x-content-type-options"), "nosniff");
    assert.match(download.headers.get("content-disposition"), /^attachment; filename="blob\.bin"/);
    assert.ok(download.headers.get("etag"));
    assert.ok(download.headers.get("last-modified"));
    assert.ok(Buffer.from(await download.arrayBuffer()).equals(bytes), "the same bytes");

    const replaced = await threads.uploadFile(threadId, "data/blob.bin", new Blob([bytes.subarray(0, 1000)]));
    assert.equal(replaced.created, false, "replaced: 200");
    assert.equal(replaced.entry.size, 1000);
    assert.equal((await (await threads.downloadFile(threadId, "data/blob.bin")).arrayBuffer()).byteLength, 1000);

    await threads.uploadFile(threadId, "notes/read me.md", new TextEncoder().encode("# Notes\nüñíçødé\n"));
    const text = await threads.downloadFile(threadId, "notes/read me.md");
    assert.equal(await text.text(), "# Notes\nüñíçødé\n");
    assert.match(text.headers.get("content-type"), /^text\/plain; charset=utf-8/);
    assert.match(text.headers.get("content-disposition"), /^inline/);

    const root = await threads.listFiles(threadId);
    assert.deepEqual(
      root.entries.map((e) => [e.name, e.kind]),
      [
        ["data", "dir"],
        ["notes", "dir"],
      ],
    );
    assert.equal(root.entries[0].size, 0, "a directory's size is 0");
    const notes = await threads.listFiles(threadId, "notes/");
    assert.equal(notes.path, "notes");
    assert.deepEqual(notes.entries.map((e) => [e.name, e.kind, e.size]), [["read me.md", "file", Buffer.byteLength("# Notes\nüñíçødé\n")]]);
    await assert.rejects(threads.listFiles(threadId, "notes/read me.md"), /is a file, not a directory/);

    await rejectsWith(threads.uploadFile(threadId, "notes/read me.md/below", "x"), 409, "a file on the way");
    await rejectsWith(threads.uploadFile(threadId, "notes", "x"), 409, "a directory's path");
    await rejectsWith(threads.deleteFile(threadId, "notes"), 409, "a directory that is not empty");
    assert.equal(await threads.deleteFile(threadId, "notes/read me.md"), true);
    assert.equal(await threads.deleteFile(threadId, "notes/read me.md"), false, "nothing there any more");
    assert.equal(await threads.deleteFile(threadId, "notes"), true, "an empty directory");
    assert.deepEqual((await threads.listFiles(threadId)).entries.map((e) => e.name), ["data"]);
  });

  test("a path with an empty, '.' or '..' component is refused before any request", async () => {
    const log = [];
    const threads = alice(log);
    for (const path of ["../x", "a/../../x", "a//b", "./a"]) {
      await assert.rejects(threads.downloadFile("t", path), TypeError, path);
      await assert.rejects(threads.uploadFile("t", path, "x"), TypeError, path);
    }
    await assert.rejects(threads.uploadFile("t", "", "x"), TypeError, "the root is not a file");
    assert.deepEqual(log, [], "no request was sent");
  });

  test("downloadFile by range: 206 with Content-Range, 416 past the end; If-None-Match: 304", async () => {
    const threads = alice();
    const threadId = `c-${randomUUID()}`;
    const bytes = randomBytes(10_000);
    await threads.uploadFile(threadId, "r.bin", bytes);
    const part = await threads.downloadFile(threadId, "r.bin", { range: { start: 100, end: 1099 } });
    assert.equal(part.status, 206);
    assert.equal(part.headers.get("content-range"), `bytes 100-1099/${bytes.length}`);
    assert.ok(Buffer.from(await part.arrayBuffer()).equals(bytes.subarray(100, 1100)));
    const tail = await threads.downloadFile(threadId, "r.bin", { range: { start: 9_900 } });
    assert.equal(tail.status, 206);
    assert.ok(Buffer.from(await tail.arrayBuffer()).equals(bytes.subarray(9_900)));
    const suffix = await threads.downloadFile(threadId, "r.bin", { range: "bytes=-10" });
    assert.ok(Buffer.from(await suffix.arrayBuffer()).equals(bytes.subarray(-10)));
    await rejectsWith(threads.downloadFile(threadId, "r.bin", { range: { start: 20_000 } }), 416, "a range past the end");

    const whole = await threads.downloadFile(threadId, "r.bin");
    const etag = whole.headers.get("etag");
    await whole.body.cancel();
    const unchanged = await threads.downloadFile(threadId, "r.bin", { ifNoneMatch: etag });
    assert.equal(unchanged.status, 304);
  });

  test("downloadArchive: the workspace as a zip, unzipped and compared; a directory's own zip", async () => {
    const threads = alice();
    const threadId = `c-${randomUUID()}`;
    const files = { "a.txt": Buffer.from("first file\n"), "src/main.rs": Buffer.from("fn main() {}\n"), "src/deep/data.bin": randomBytes(50_000) };
    for (const [path, content] of Object.entries(files)) await threads.uploadFile(threadId, path, content);

    const response = await threads.downloadArchive(threadId);
    assert.equal(response.headers.get("content-type"), "application/zip");
    assert.match(response.headers.get("content-disposition"), new RegExp(`attachment; filename="${threadId}\\.zip"`));
    const zip = unzip(Buffer.from(await response.arrayBuffer()));
    assert.deepEqual(Object.keys(zip.files).sort(), Object.keys(files).sort());
    for (const [path, content] of Object.entries(files)) assert.ok(zip.files[path].equals(content), `${path} unzipped is the upload`);

    const src = await threads.downloadArchive(threadId, "src");
    assert.match(src.headers.get("content-disposition"), /filename="src\.zip"/);
    const inner = unzip(Buffer.from(await src.arrayBuffer()));
    assert.deepEqual(Object.keys(inner.files).sort(), ["deep/data.bin", "main.rs"]);
    assert.ok(inner.files["deep/data.bin"].equals(files["src/deep/data.bin"]));
  });

  test("a file the agent wrote is listed and downloaded; the thread counts its workspace", async () => {
    const agent = await runThread(url(), ALICE, "c-write: make a file");
    const threads = agent.threads;
    assert.ok(threads instanceof AntigravityThreads, "agent.threads");
    const listing = await new AntigravityAgent({ url: url(), authToken: ALICE }).threads.listFiles(agent.threadId, "out");
    assert.deepEqual(listing.entries.map((e) => [e.name, e.kind, e.size]), [["agent.txt", "file", "written by the agent".length]]);
    assert.equal(await (await threads.downloadFile(agent.threadId, "out/agent.txt")).text(), "written by the agent");
    assert.ok((await threads.getThread(agent.threadId)).workspaceBytes > 0, "the workspace's size, measured after the turn");
  });
});

describe("AntigravityThreads on a server with a 1 MB disk cap", () => {
  let model;
  let server;
  before(async () => {
    model = await startModel(SCRIPT);
    server = await startTestServer(model, { args: ["--auth-token", ALICE, "--workspace-max-mb", "1"], label: "capped server" });
  });
  after(async () => {
    await stopAll(server, model);
  });

  test("an upload past the cap is a 413 and leaves nothing behind", async () => {
    const threads = new AntigravityThreads({ url: `${server.url}/`, authToken: ALICE });
    const threadId = `c-${randomUUID()}`;
    await threads.uploadFile(threadId, "small.txt", "fits");
    await rejectsWith(threads.uploadFile(threadId, "big.bin", streamOf(randomBytes(2 * 1024 * 1024), 32)), 413, "2 MB past a 1 MB cap");
    assert.deepEqual((await threads.listFiles(threadId)).entries.map((e) => e.name), ["small.txt"], "no part of the upload is left");
    assert.equal(await (await threads.downloadFile(threadId, "small.txt")).text(), "fits");
  });
});
