// Starting and stopping the processes under test: the scripted model (`gemini-script`) and the
// server (`agui-antigravity`), each on a port it picks itself (bound to port 0 and read back
// from the line it prints once listening, so there is no free-port race), with its own short
// temporary data directory. The server's `localharness` children are tracked by PID while it
// runs, so `stop()` can prove none is left behind.
import { spawn } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { once } from "node:events";

/** Every child still running; the exit hook below TERMs them if the test process ends early. */
const live = new Set();
process.on("exit", () => {
  // SIGTERM, not SIGKILL: the server must get to reap its harness processes.
  for (const child of live) child.kill("SIGTERM");
});

function requiredBinary(variable) {
  const bin = process.env[variable];
  if (!bin) throw new Error(`${variable} is not set; run the suite with \`cargo xtask e2e\` (it builds and sets the binaries)`);
  if (!fs.existsSync(bin)) throw new Error(`${variable}=${bin} does not exist; build it first (\`cargo xtask e2e\` does)`);
  return bin;
}

const stripAnsi = (text) => text.replace(/\x1b\[[0-9;]*m/g, "");

/** A short temporary directory (the harness puts sockets under it; long paths break them). */
export function tempDir(prefix) {
  return fs.mkdtempSync(path.join(os.tmpdir(), `${prefix}-`));
}

/** Resolves with the first match of `regex` in the stream's text, or rejects after `ms`. */
function waitForLine(child, stream, regex, ms, what, log) {
  return new Promise((resolve, reject) => {
    let seen = "";
    const onData = (chunk) => {
      seen = (seen + chunk.toString()).slice(-64 * 1024);
      const m = regex.exec(stripAnsi(seen));
      if (m) done(null, m);
    };
    const onExit = (code, signal) => done(new Error(`${what} exited (${signal ?? code}) before it was ready:\n${log()}`));
    const timer = setTimeout(() => done(new Error(`${what} was not ready within ${ms} ms:\n${log()}`)), ms);
    function done(err, m) {
      clearTimeout(timer);
      stream.off("data", onData);
      child.off("exit", onExit);
      if (err) reject(err);
      else resolve(m);
    }
    stream.on("data", onData);
    child.on("exit", onExit);
  });
}

async function terminate(child, graceMs) {
  if (child.exitCode !== null || child.signalCode !== null) return { code: child.exitCode, signal: child.signalCode, forced: false };
  const exited = once(child, "exit");
  child.kill("SIGTERM");
  let timer;
  const timeout = new Promise((r) => (timer = setTimeout(r, graceMs, "timeout")));
  const first = await Promise.race([exited, timeout]);
  clearTimeout(timer);
  let forced = false;
  if (first === "timeout") {
    forced = true;
    child.kill("SIGKILL");
    await exited;
  }
  live.delete(child);
  return { code: child.exitCode, signal: child.signalCode, forced };
}

// ------------------------------------------------------------------ scripted model

/**
 * Starts `gemini-script` (from `GEMINI_SCRIPT_BIN`) with `script` (an object in the crate's
 * script format). `--stop-on-eof` ties its life to our stdin pipe: if this process dies, the
 * model stops too.
 */
export async function startModel(script = { replies: [] }) {
  const bin = requiredBinary("GEMINI_SCRIPT_BIN");
  const dir = tempDir("e2e-model");
  const scriptFile = path.join(dir, "script.json");
  fs.writeFileSync(scriptFile, JSON.stringify(script));
  const child = spawn(bin, ["--port", "0", "--script", scriptFile, "--stop-on-eof"], { stdio: ["pipe", "pipe", "pipe"] });
  live.add(child);
  let output = "";
  // Only the tail is kept: a long run (the soak) must not hold all the model's output.
  const keep = (c) => (output = (output + c).slice(-16_000));
  child.stdout.on("data", keep);
  child.stderr.on("data", keep);
  const log = () => output.slice(-4000);
  const [, url] = await waitForLine(child, child.stdout, /listening on (http:\/\/\S+)\r?\n/, 10_000, "gemini-script", log);
  const control = async (route, init) => {
    const res = await fetch(`${url}/_script/${route}`, init);
    const text = await res.text();
    if (!res.ok) throw new Error(`gemini-script ${route}: HTTP ${res.status} ${text}`);
    return text ? JSON.parse(text) : undefined;
  };
  return {
    url,
    /** Appends entries (one or a list) to the script. */
    push: (entries) => control("push", { method: "POST", body: JSON.stringify(entries) }),
    /** The request log: every model request with `body`, `status` and `answered_by`. */
    requests: () => control("requests"),
    /** The request log, emptied in the same step (for a reader that polls a long run). */
    takeRequests: () => control("requests/take", { method: "POST" }),
    async stop() {
      child.stdin.end();
      await terminate(child, 5_000);
      fs.rmSync(dir, { recursive: true, force: true });
    },
  };
}

// ------------------------------------------------------------------------- server

/** `{ comm, state, ppid }` of process `pid` from /proc, or undefined once it has exited. */
function procStat(pid) {
  let stat;
  try {
    stat = fs.readFileSync(`/proc/${pid}/stat`, "utf8");
  } catch {
    return undefined;
  }
  // "pid (comm) state ppid ...": comm may contain spaces, so split after the last ')'.
  const end = stat.lastIndexOf(")");
  const [state, ppid] = stat.slice(end + 2).split(" ");
  return { comm: stat.slice(stat.indexOf("(") + 1, end), state, ppid: Number(ppid) };
}

/**
 * PIDs of running `localharness` processes descending from `root` (from /proc): its children,
 * or, with `sandbox = "strict"`, the processes its sandbox launchers start.
 */
function harnessChildren(root) {
  const stats = fs
    .readdirSync("/proc")
    .filter((entry) => /^\d+$/.test(entry))
    .map(Number)
    .map((pid) => ({ pid, stat: procStat(pid) }))
    .filter(({ stat }) => stat !== undefined);
  const below = new Set([root]);
  for (let grew = true; grew; ) {
    grew = false;
    for (const { pid, stat } of stats) {
      if (!below.has(pid) && below.has(stat.ppid)) {
        below.add(pid);
        grew = true;
      }
    }
  }
  return stats.filter(({ pid, stat }) => pid !== root && below.has(pid) && stat.comm === "localharness").map(({ pid }) => pid);
}

/** Whether `pid` is still a live (not zombie) localharness process. */
function harnessAlive(pid) {
  const stat = procStat(pid);
  return stat?.comm === "localharness" && stat.state !== "Z";
}

/**
 * Starts `agui-antigravity serve` (from `AGUI_BIN`) with `args`, optionally a TOML `config`,
 * on 127.0.0.1 port 0 (or `port`), with `AGUI_DATA_DIR`, `--save-dir` and `--workspace-root` in
 * a fresh temporary directory — or in `dir`, which a restarted server reuses and `stop()` then
 * leaves for the caller to remove (`saveDir` and `workspaceRoot` put those two elsewhere, e.g.
 * on a volume of their own). The harness comes from `ANTIGRAVITY_HARNESS_PATH` (set by the runner).
 */
export async function startServer({ args = [], config, env = {}, label = "server", dir: reuse, port = 0, saveDir, workspaceRoot } = {}) {
  const bin = requiredBinary("AGUI_BIN");
  const dir = reuse ?? tempDir("e2e");
  const logFile = path.join(dir, `server-${label.replace(/[^\w.-]+/g, "-")}-${Date.now()}.log`);
  const all = ["serve", "--bind", `127.0.0.1:${port}`, "--save-dir", saveDir ?? path.join(dir, "s"), "--workspace-root", workspaceRoot ?? path.join(dir, "w")];
  if (config !== undefined) {
    const file = path.join(dir, "agents.toml");
    fs.writeFileSync(file, config);
    all.push("--config", file);
  }
  all.push(...args);
  const childEnv = { ...process.env, AGUI_DATA_DIR: path.join(dir, "d"), RUST_LOG: process.env.RUST_LOG ?? "info", ...env };
  // `undefined` in `env` removes a variable.
  for (const [key, value] of Object.entries(childEnv)) if (value === undefined) delete childEnv[key];
  const child = spawn(bin, all, { stdio: ["ignore", "pipe", "pipe"], env: childEnv });
  live.add(child);
  const logStream = fs.createWriteStream(logFile);
  let tail = "";
  const keep = (c) => {
    // Output can still arrive after the exit event (and the stream end) of a killed server.
    if (!logStream.writableEnded) logStream.write(c);
    tail = (tail + c.toString()).slice(-16 * 1024);
  };
  child.stdout.on("data", keep);
  child.stderr.on("data", keep);
  const log = () => stripAnsi(tail).split("\n").slice(-40).join("\n");

  // Sample the harness children while the server lives: pooled harnesses come and go.
  const harnesses = new Set();
  const sample = () => {
    if (child.exitCode === null && child.signalCode === null) for (const pid of harnessChildren(child.pid)) harnesses.add(pid);
  };
  const sampler = setInterval(sample, 200);
  sampler.unref();

  let killed = false;
  let url;
  try {
    [, url] = await waitForLine(child, child.stderr, /serving AG-UI on (http:\/\/\S+)\r?\n/, 60_000, `${label} (${bin})`, log);
  } catch (err) {
    clearInterval(sampler);
    await terminate(child, 10_000);
    throw err;
  }
  return {
    url,
    dir,
    label,
    /** The last lines of the server's log (for failure messages). */
    log,
    /** Harness PIDs seen so far. */
    harnesses: () => (sample(), [...harnesses]),
    /** The server's PID. */
    pid: child.pid,
    /** The server's log file. */
    logFile,
    /**
     * SIGKILL, as a crash: the server gets no chance to clean up. `stop()` afterwards only checks
     * that its harness processes went away with it.
     */
    async kill() {
      sample();
      killed = true;
      const exited = once(child, "exit");
      child.kill("SIGKILL");
      await exited;
    },
    /**
     * SIGTERM, wait for a graceful exit, then check that every harness the server started is
     * gone. Leftovers are killed by PID (they are ours) and reported as a failure.
     */
    async stop() {
      sample();
      clearInterval(sampler);
      const exit = await terminate(child, 20_000);
      logStream.end();
      const deadline = Date.now() + 3_000;
      let left = [...harnesses].filter(harnessAlive);
      while (left.length && Date.now() < deadline) {
        await new Promise((r) => setTimeout(r, 100));
        left = left.filter(harnessAlive);
      }
      for (const pid of left) {
        try {
          process.kill(pid, "SIGKILL");
        } catch {
          /* already gone */
        }
      }
      const problems = [];
      if (exit.forced) problems.push(`${label} did not exit within 20 s of SIGTERM (killed)`);
      else if (exit.code !== 0 && !killed) problems.push(`${label} exited with ${exit.signal ?? exit.code} after SIGTERM`);
      if (left.length) problems.push(`${label} left localharness running after shutdown: pids ${left.join(", ")}`);
      if (problems.length) throw new Error(`${problems.join("; ")}\n--- ${logFile}\n${log()}`);
      if (!reuse) fs.rmSync(dir, { recursive: true, force: true });
      return { harnesses: [...harnesses] };
    },
  };
}

/**
 * Stops everything given (servers, models, anything with `stop()`; `undefined` is skipped), all
 * of them even when one fails, then rethrows the first failure. Returns the stop results.
 */
export async function stopAll(...items) {
  const results = await Promise.allSettled(items.map((item) => item?.stop()));
  const failed = results.find((r) => r.status === "rejected");
  if (failed) throw failed.reason;
  return results.map((r) => r.value);
}
