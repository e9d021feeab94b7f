// The example app (dist/server.mjs, built by build.mjs) as the tests start it: on a port it picks
// (or a given one, to restart on the same address), pointed at an agent of a server started with
// the e2e suite's helpers. Its output is kept for failure messages.
import { spawn } from "node:child_process";
import fs from "node:fs";
import path from "node:path";
import { once } from "node:events";
import { fileURLToPath } from "node:url";

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..");
const SERVER = path.join(root, "dist/server.mjs");

/** Starts the app on `agentUrl` (with `token`); `port` 0 picks a free one. */
export async function startApp({ agentUrl, token, port = 0 }) {
  if (!fs.existsSync(SERVER)) throw new Error(`${SERVER} is missing: run \`node build.mjs\` in examples/copilotkit (\`cargo xtask copilotkit\` does)`);
  const child = spawn(process.execPath, [SERVER], {
    env: { ...process.env, AGUI_URL: agentUrl, AGUI_AUTH_TOKEN: token ?? "", PORT: String(port), COPILOTKIT_TELEMETRY_DISABLED: "true" },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let output = "";
  child.stdout.on("data", (chunk) => (output += chunk));
  child.stderr.on("data", (chunk) => (output += chunk));
  const url = await new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`the app did not start within 30 s:\n${output}`)), 30_000);
    const check = () => {
      const match = /listening on (http:\/\/\S+)/.exec(output);
      if (match) {
        clearTimeout(timer);
        resolve(match[1]);
      }
    };
    child.stdout.on("data", check);
    child.once("exit", (code) => {
      clearTimeout(timer);
      reject(new Error(`the app exited (${code}) before listening:\n${output}`));
    });
  });
  return {
    url,
    port: Number(new URL(url).port),
    /** The app's output so far. */
    log: () => output.slice(-8000),
    /** Ends the app (SIGKILL: a crash, nothing kept). */
    async kill() {
      if (child.exitCode !== null || child.signalCode !== null) return;
      const exited = once(child, "exit");
      child.kill("SIGKILL");
      await exited;
    },
    /** Ends the app (SIGTERM, then SIGKILL after 5 s). */
    async stop() {
      if (child.exitCode !== null || child.signalCode !== null) return;
      const exited = once(child, "exit");
      child.kill("SIGTERM");
      const timer = setTimeout(() => child.kill("SIGKILL"), 5_000);
      await exited;
      clearTimeout(timer);
    },
  };
}
