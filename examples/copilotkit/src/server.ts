// The app's server: CopilotKit's v2 runtime under /api/copilotkit, with the agui-antigravity agent
// and its runner (whose hooks let CopilotKit's thread endpoints rename, archive and delete on the
// server), the routes of the page's files panel, the live thread list and the thread's branches,
// plus the built page.
// Configured by environment:
//   AGUI_URL         the agent on the agui-antigravity server (default http://127.0.0.1:8027/)
//   AGUI_AUTH_TOKEN  that server's auth_token, if it has one
//   HOST, PORT       where this app listens (default 127.0.0.1:3000; PORT=0 picks a free port)
//
// The app has no users of its own: every page acts as the server's caller of AGUI_AUTH_TOKEN
// (its threads, their files), as the chat itself does. Put it behind your own login.
import fs from "node:fs";
import http from "node:http";
import path from "node:path";
import { Readable } from "node:stream";
import { fileURLToPath } from "node:url";
import { CopilotRuntime } from "@copilotkit/runtime/v2";
import { createCopilotNodeListener } from "@copilotkit/runtime/v2/node";
import { AntigravityAgent, AntigravityHttpError } from "@agui-antigravity/client";
import { AntigravityRunner } from "@agui-antigravity/client/copilotkit";

const RUNTIME_PATH = "/api/copilotkit";
const publicDir = path.join(path.dirname(fileURLToPath(import.meta.url)), "public");

const agents = {
  antigravity: new AntigravityAgent({
    url: process.env.AGUI_URL ?? "http://127.0.0.1:8027/",
    authToken: process.env.AGUI_AUTH_TOKEN || undefined,
  }),
};
const runner = new AntigravityRunner({ agents });
const runtime = new CopilotRuntime({ agents, runner });
const copilotkit = createCopilotNodeListener({ runtime, basePath: RUNTIME_PATH, hooks: runner.hooks });
const threads = agents.antigravity.threads;

const CONTENT_TYPES: Record<string, string> = {
  ".html": "text/html; charset=utf-8",
  ".js": "text/javascript; charset=utf-8",
  ".css": "text/css; charset=utf-8",
};

/** The page's files (`/` is index.html); anything else is a 404. */
function servePage(request: http.IncomingMessage, response: http.ServerResponse): void {
  const name = new URL(request.url ?? "/", "http://app").pathname.replace(/^\/$/, "/index.html").slice(1);
  const file = path.join(publicDir, name);
  if (request.method !== "GET" || name.includes("..") || !fs.existsSync(file) || !fs.statSync(file).isFile()) {
    response.writeHead(404, { "content-type": "text/plain" }).end("not found");
    return;
  }
  response.writeHead(200, { "content-type": CONTENT_TYPES[path.extname(file)] ?? "application/octet-stream", "cache-control": "no-cache" });
  fs.createReadStream(file).pipe(response);
}

/** Answers `status` with `{ error }`, the way the agent's server does. */
function fail(response: http.ServerResponse, status: number, error: string): void {
  if (response.headersSent) return void response.destroy();
  response.writeHead(status, { "content-type": "application/json" }).end(JSON.stringify({ error }));
}

/** A failure of a request to the agent's server, passed on with its status and message. */
function failWith(response: http.ServerResponse, error: unknown): void {
  if (error instanceof AntigravityHttpError) fail(response, error.status, error.serverMessage ?? error.message);
  else if (error instanceof TypeError && /workspace path|a file, not a directory|an upload needs/.test(error.message)) fail(response, 400, error.message);
  else fail(response, 502, `the agent's server could not be reached: ${error instanceof Error ? error.message : String(error)}`);
}

/** The headers of a file or zip download worth passing on to the page. */
const PASSED_HEADERS = ["content-type", "content-length", "content-range", "content-disposition", "etag", "last-modified", "accept-ranges", "x-content-type-options"];

/**
 * `/api/files/<thread>/<path>`: the files panel's view of a thread's workspace. GET with `?list`
 * lists a folder (a thread the server does not have yet has no files: an empty root), with
 * `?archive=zip` zips it, otherwise downloads a file (`Range` and `If-None-Match` passed on);
 * PUT uploads the request's body as it arrives.
 */
async function serveFiles(request: http.IncomingMessage, response: http.ServerResponse, url: URL): Promise<void> {
  const [thread, ...rest] = url.pathname.slice("/api/files/".length).split("/");
  let threadId: string;
  let filePath: string;
  try {
    threadId = decodeURIComponent(thread ?? "");
    filePath = rest.map(decodeURIComponent).join("/");
  } catch {
    return fail(response, 400, "a path that is not percent-encoded UTF-8");
  }
  if (!threadId) return fail(response, 404, "no thread in the path");
  const controller = new AbortController();
  response.on("close", () => controller.abort());
  try {
    if (request.method === "PUT") {
      const body = Readable.toWeb(request) as ReadableStream<Uint8Array>;
      const uploaded = await threads.uploadFile(threadId, filePath, body, { contentType: request.headers["content-type"], signal: controller.signal });
      response.writeHead(uploaded.created ? 201 : 200, { "content-type": "application/json" }).end(JSON.stringify(uploaded));
      return;
    }
    if (request.method !== "GET") return fail(response, 405, "GET or PUT");
    if (url.searchParams.has("list")) {
      const listing = await threads.listFiles(threadId, filePath, { signal: controller.signal }).catch((error: unknown) => {
        // A new thread's workspace does not exist until its first message or upload.
        if (error instanceof AntigravityHttpError && error.status === 404 && filePath === "") return { path: "", entries: [] };
        throw error;
      });
      response.writeHead(200, { "content-type": "application/json", "cache-control": "no-cache" }).end(JSON.stringify(listing));
      return;
    }
    const file =
      url.searchParams.get("archive") === "zip"
        ? await threads.downloadArchive(threadId, filePath, { signal: controller.signal })
        : await threads.downloadFile(threadId, filePath, {
            range: request.headers.range,
            ifNoneMatch: request.headers["if-none-match"],
            signal: controller.signal,
          });
    const headers: Record<string, string> = {
      "cache-control": "no-cache",
      // What the agent wrote is not this app's page: never run as one, whatever its type.
      "content-security-policy": "sandbox; default-src 'none'; img-src 'self' data:; style-src 'unsafe-inline'",
    };
    for (const name of PASSED_HEADERS) {
      const value = file.headers.get(name);
      if (value !== null) headers[name] = value;
    }
    response.writeHead(file.status, headers);
    if (!file.body || file.status === 304) return void response.end();
    Readable.fromWeb(file.body as import("node:stream/web").ReadableStream<Uint8Array>)
      .on("error", () => response.destroy())
      .pipe(response);
  } catch (error) {
    if (!controller.signal.aborted) failWith(response, error);
  }
}

/**
 * `/api/branches/<thread>`: the thread's branches for the chat's branch navigation. GET answers
 * `{ current, branches }` (a thread the server does not have yet has none); POST `{ branch }`
 * switches to that branch (the server's 422 for an unknown one, 409 while the thread is busy).
 */
async function serveBranches(request: http.IncomingMessage, response: http.ServerResponse, url: URL): Promise<void> {
  let threadId: string;
  try {
    threadId = decodeURIComponent(url.pathname.slice("/api/branches/".length));
  } catch {
    return fail(response, 400, "a path that is not percent-encoded UTF-8");
  }
  if (!threadId || threadId.includes("/")) return fail(response, 404, "no thread in the path");
  try {
    if (request.method === "GET") {
      const branches = await threads.listBranches(threadId).catch((error: unknown) => {
        if (error instanceof AntigravityHttpError && error.status === 404) return { current: "", branches: [] };
        throw error;
      });
      response.writeHead(200, { "content-type": "application/json", "cache-control": "no-cache" }).end(JSON.stringify(branches));
      return;
    }
    if (request.method !== "POST") return fail(response, 405, "GET or POST");
    const chunks: Buffer[] = [];
    for await (const chunk of request) chunks.push(chunk as Buffer);
    let branch: unknown;
    try {
      branch = (JSON.parse(Buffer.concat(chunks).toString("utf8")) as { branch?: unknown }).branch;
    } catch {
      return fail(response, 400, "the body is not JSON");
    }
    if (typeof branch !== "string" || !branch) return fail(response, 400, "name the branch: {\"branch\": \"<id>\"}");
    const thread = await threads.switchBranch(threadId, branch);
    response.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify({ current: thread.branch, branches: thread.branches }));
  } catch (error) {
    failWith(response, error);
  }
}

/** The open `/api/threads/events` streams, ended properly when the app stops (a cut one is an error in the page). */
const liveStreams = new Set<http.ServerResponse>();

/**
 * `/api/threads/events`: the server's thread changes (through the runner, which follows them
 * for the runtime's list) as Server-Sent Events, so the page's drawer fetches its list again.
 */
function serveThreadEvents(request: http.IncomingMessage, response: http.ServerResponse): void {
  response.writeHead(200, { "content-type": "text/event-stream", "cache-control": "no-cache", connection: "keep-alive" });
  // The browser reconnects 5 s after the stream ends (this app restarting, say).
  response.write("retry: 5000\n: connected\n\n");
  liveStreams.add(response);
  const unsubscribe = runner.subscribeThreads((change, agentId) => {
    response.write(`event: thread\ndata: ${JSON.stringify({ ...change, agentId })}\n\n`);
  });
  const keepAlive = setInterval(() => response.write(": keep-alive\n\n"), 15_000);
  request.on("close", () => {
    clearInterval(keepAlive);
    unsubscribe();
    liveStreams.delete(response);
  });
}

const server = http.createServer((request, response) => {
  const url = new URL(request.url ?? "/", "http://app");
  if (url.pathname.startsWith(`${RUNTIME_PATH}/`)) void copilotkit(request, response);
  else if (url.pathname.startsWith("/api/files/")) void serveFiles(request, response, url);
  else if (url.pathname === "/api/threads/events" && request.method === "GET") serveThreadEvents(request, response);
  else if (url.pathname.startsWith("/api/branches/")) void serveBranches(request, response, url);
  else servePage(request, response);
});

server.listen(Number(process.env.PORT ?? 3000), process.env.HOST ?? "127.0.0.1", () => {
  const address = server.address();
  const where = typeof address === "object" && address ? `http://${address.address}:${address.port}` : String(address);
  console.log(`copilotkit example listening on ${where} (agent: ${agents.antigravity.url})`);
});

for (const signal of ["SIGINT", "SIGTERM"] as const) {
  process.on(signal, () => {
    runner.close();
    for (const stream of liveStreams) stream.end();
    server.close(() => process.exit(0));
    server.closeAllConnections();
  });
}
