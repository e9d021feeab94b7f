// The package's tests run against the real server binary, harness and scripted model, started
// with the e2e suite's process helpers (`AGUI_BIN`, `GEMINI_SCRIPT_BIN`, `ANTIGRAVITY_HARNESS_PATH`,
// set by `cargo xtask client`). A TCP relay in front of the server lets a test cut a run's
// stream, refuse connections, or point at a restarted server.
import net from "node:net";
import { after, before } from "node:test";
import { modelFlags } from "../../../../tests/e2e/lib/mode.mjs";
import { startModel, startServer, stopAll } from "../../../../tests/e2e/lib/procs.mjs";

export { startModel, startServer, stopAll };

/** Words of a reply streamed slowly enough to cut it half-way. */
export const SLOW_TEXT = Array.from({ length: 16 }, (_, i) => `word${i}`).join(" ");

/** Replies keyed by a tag in the prompt, so tests stay independent. */
export const SCRIPT = {
  replies: [
    { name: "slow", repeat: "forever", match: { user_text_contains: "c-slow", last_part: "text" }, reply: { text: SLOW_TEXT, chunking: { words: 1 }, delay_ms: 150 } },
    { name: "hello", repeat: "forever", match: { user_text_contains: "c-hello", last_part: "text" }, reply: { thought: "A greeting.", text: "Hello from the server." } },
    { name: "frontend done", repeat: "forever", match: { function_response: "change_background" }, reply: { text: "Background changed." } },
    { name: "frontend call", repeat: "forever", match: { user_text_contains: "c-frontend", last_part: "text" }, reply: { calls: [{ name: "change_background", args: { background: "red" } }] } },
    { name: "command done", repeat: "forever", match: { function_response: "run_command" }, reply: { text: "The command is done." } },
    {
      name: "long command",
      repeat: "forever",
      match: { user_text_contains: "c-sleep", last_part: "text" },
      reply: { text: "Running it.", calls: [{ name: "run_command", args: { CommandLine: "sleep 41.5", Cwd: "{{workspace}}", WaitMsBeforeAsync: 60000 } }] },
    },
    {
      name: "write a file",
      repeat: "forever",
      match: { user_text_contains: "c-write", last_part: "text" },
      reply: { calls: [{ name: "run_command", args: { CommandLine: "mkdir -p out && printf 'written by the agent' > out/agent.txt", Cwd: "{{workspace}}", WaitMsBeforeAsync: 10000 } }] },
    },
    {
      name: "short command",
      repeat: "forever",
      match: { user_text_contains: "c-work", last_part: "text" },
      reply: { text: SLOW_TEXT, chunking: { words: 1 }, delay_ms: 100, calls: [{ name: "run_command", args: { CommandLine: "sleep 1 && echo worked", Cwd: "{{workspace}}", WaitMsBeforeAsync: 10000 } }] },
    },
  ],
  default: { text: "No scripted answer." },
};

/** Starts a server on `model` with the tests' tools and `args`; `dir` reuses a stopped server's data. */
export function startTestServer(model, { args = [], label = "client-test server", dir } = {}) {
  const flags = modelFlags(model);
  return startServer({ label, dir, args: [...flags.args, "--builtin-tools", "run_command", ...args], env: flags.env });
}

/** The scripted model and a server on it (`args`: more server flags) for the calling suite. */
export function useServer({ args = [], label } = {}) {
  const handles = {};
  before(async () => {
    handles.model = await startModel(SCRIPT);
    handles.server = await startTestServer(handles.model, { args, label });
  });
  after(async () => {
    await stopAll(handles.server, handles.model);
  });
  return handles;
}

/**
 * A TCP relay on 127.0.0.1 to `target` (`host:port`, changeable): `cut()` destroys every open
 * connection (the client sees its stream break), `refuse` makes new connections fail at once.
 */
export async function startRelay(target) {
  const sockets = new Set();
  const relay = { target, refuse: false, connections: 0 };
  const server = net.createServer((client) => {
    relay.connections += 1;
    if (relay.refuse) {
      client.destroy();
      return;
    }
    const [host, port] = relay.target.split(":");
    const upstream = net.connect(Number(port), host);
    for (const socket of [client, upstream]) {
      sockets.add(socket);
      socket.on("close", () => sockets.delete(socket));
      socket.on("error", () => {});
    }
    client.pipe(upstream);
    upstream.pipe(client);
    client.on("close", () => upstream.destroy());
    upstream.on("close", () => client.destroy());
  });
  await new Promise((resolve) => server.listen(0, "127.0.0.1", resolve));
  relay.url = `http://127.0.0.1:${server.address().port}`;
  relay.cut = () => {
    for (const socket of sockets) socket.destroy();
  };
  relay.stop = async () => {
    relay.cut();
    await new Promise((resolve) => server.close(resolve));
  };
  return relay;
}

/** `host:port` of a URL. */
export const hostPort = (url) => new URL(url).host;

/** The messages as comparable data (what a client shows). */
export const shape = (messages) =>
  messages.filter((m) => m.role !== "activity").map(({ id, role, content, toolCalls, toolCallId }) => ({ id, role, content, toolCalls, toolCallId }));

/** Resolves once `predicate()` holds, polling; rejects after `ms`. */
export async function eventually(predicate, ms, what) {
  const deadline = Date.now() + ms;
  while (Date.now() < deadline) {
    if (await predicate()) return;
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  throw new Error(`timed out after ${ms} ms waiting for ${what}`);
}
