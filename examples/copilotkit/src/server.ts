// The app's server: CopilotKit's v2 runtime under /api/copilotkit, with the agui-antigravity agent
// and its runner, plus the built page. Configured by environment:
//   AGUI_URL         the agent on the agui-antigravity server (default http://127.0.0.1:8027/)
//   AGUI_AUTH_TOKEN  that server's auth_token, if it has one
//   HOST, PORT       where this app listens (default 127.0.0.1:3000; PORT=0 picks a free port)
import fs from "node:fs";
import http from "node:http";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { CopilotRuntime } from "@copilotkit/runtime/v2";
import { createCopilotNodeListener } from "@copilotkit/runtime/v2/node";
import { AntigravityAgent } from "@agui-antigravity/client";
import { AntigravityRunner } from "@agui-antigravity/client/copilotkit";

const RUNTIME_PATH = "/api/copilotkit";
const publicDir = path.join(path.dirname(fileURLToPath(import.meta.url)), "public");

const agents = {
  antigravity: new AntigravityAgent({
    url: process.env.AGUI_URL ?? "http://127.0.0.1:8027/",
    authToken: process.env.AGUI_AUTH_TOKEN || undefined,
  }),
};
const runtime = new CopilotRuntime({ agents, runner: new AntigravityRunner({ agents }) });
const copilotkit = createCopilotNodeListener({ runtime, basePath: RUNTIME_PATH });

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

const server = http.createServer((request, response) => {
  if ((request.url ?? "").startsWith(`${RUNTIME_PATH}/`)) void copilotkit(request, response);
  else servePage(request, response);
});

server.listen(Number(process.env.PORT ?? 3000), process.env.HOST ?? "127.0.0.1", () => {
  const address = server.address();
  const where = typeof address === "object" && address ? `http://${address.address}:${address.port}` : String(address);
  console.log(`copilotkit example listening on ${where} (agent: ${agents.antigravity.url})`);
});

for (const signal of ["SIGINT", "SIGTERM"] as const) {
  process.on(signal, () => {
    server.close(() => process.exit(0));
    server.closeAllConnections();
  });
}
