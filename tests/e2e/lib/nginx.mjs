// nginx in front of replicas (the e2e replicas test's and the soak's), configured as
// `deploy/nginx.conf` routes: that file's `map`s, `upstream` and `location` are used as they are,
// with three changes only — its upstream `server` lines name the test's replicas (each line's
// options, `max_fails`, `fail_timeout`, kept), it listens on a loopback port without TLS, and the
// location adds response headers naming the replica that answered and the configuration's
// generation (for routing checks and diagnostics; they change no routing). Started as a
// non-daemon child; `reload()` changes the replicas while streams are open.
import { execFileSync, spawn } from "node:child_process";
import fs from "node:fs";
import net from "node:net";
import path from "node:path";
import { fileURLToPath } from "node:url";

/** A free loopback port (closed again at once: the caller binds it next). */
export async function freePort() {
  const server = net.createServer();
  await new Promise((r) => server.listen(0, "127.0.0.1", r));
  const { port } = server.address();
  await new Promise((r) => server.close(r));
  return port;
}

function nginxBinary() {
  for (const candidate of ["/usr/sbin/nginx", "/usr/local/sbin/nginx", "/usr/bin/nginx"]) if (fs.existsSync(candidate)) return candidate;
  throw new Error("nginx is not installed: `apt-get install nginx-light` (`cargo xtask test` installs it as root)");
}

/**
 * `deploy/nginx.conf` (`recipe`: its text) for `upstreams` (host:port each) behind
 * `127.0.0.1:<port>`, labelled with `generation`. Fails when the recipe no longer has the
 * parts it rewrites, so a change there cannot silently leave the soak testing something else.
 */
export function fromRecipe(recipe, upstreams, port, generation) {
  const serverLine = /^(\s*)server\s+\S+:\d+(\s[^;]*)?;\s*$/;
  const lines = recipe.split("\n");
  const options = lines.map((l) => l.match(serverLine)).find(Boolean)?.[2] ?? "";
  const out = [];
  let inUpstream = false;
  let replaced = false;
  let listened = false;
  let located = false;
  for (const line of lines) {
    const trimmed = line.trim();
    if (/^upstream\s+\S+\s*\{/.test(trimmed)) inUpstream = true;
    if (inUpstream && serverLine.test(line)) {
      if (!replaced) for (const u of upstreams) out.push(`    server ${u}${options};`);
      replaced = true;
      continue;
    }
    if (inUpstream && trimmed === "}") inUpstream = false;
    if (/^listen\s/.test(trimmed)) {
      out.push(`    listen 127.0.0.1:${port};`);
      listened = true;
      continue;
    }
    if (/^(ssl_\S+|server_name)\s/.test(trimmed)) continue;
    out.push(line);
    if (/^location\s+\/\s*\{/.test(trimmed)) {
      out.push("        add_header X-Upstream $upstream_addr always;");
      out.push(`        add_header X-Config-Generation ${generation} always;`);
      located = true;
    }
  }
  if (!replaced || !listened || !located) {
    throw new Error(`deploy/nginx.conf no longer has the upstream server lines, the listen line and the "location /" block the soak rewrites (found: ${replaced}, ${listened}, ${located})`);
  }
  return out.join("\n");
}

/** The deployment recipe the tests route by. */
export const RECIPE = fileURLToPath(new URL("../../../deploy/nginx.conf", import.meta.url));

/** nginx in `dir`, routing to `upstreams` (host:port each) as `recipeFile` does. */
export async function startNginx({ dir, recipeFile = RECIPE, upstreams }) {
  fs.mkdirSync(dir, { recursive: true });
  fs.chmodSync(dir, 0o777);
  const port = await freePort();
  const recipe = fs.readFileSync(recipeFile, "utf8");
  const main = path.join(dir, "nginx.conf");
  const site = path.join(dir, "agui.conf");
  let generation = 0;
  const write = (list) => {
    fs.writeFileSync(site, fromRecipe(recipe, list, port, generation));
    const temp = (name) => `${name}_temp_path ${dir}/${name};`;
    fs.writeFileSync(
      main,
      `${process.getuid?.() === 0 ? "user root;\n" : ""}worker_processes 1;
daemon off;
pid ${dir}/nginx.pid;
error_log ${dir}/error.log warn;
events { worker_connections 4096; }
http {
  access_log off;
  ${["client_body", "proxy", "fastcgi", "uwsgi", "scgi"].map(temp).join("\n  ")}
  include ${site};
}
`,
    );
  };
  write(upstreams);
  const child = spawn(nginxBinary(), ["-c", main, "-p", dir], { stdio: ["ignore", "pipe", "pipe"] });
  let output = "";
  child.stdout.on("data", (c) => (output = (output + c).slice(-8000)));
  child.stderr.on("data", (c) => (output = (output + c).slice(-8000)));
  const url = `http://127.0.0.1:${port}`;
  /** The pids of nginx's worker processes (the master's children). */
  const workers = () =>
    fs
      .readdirSync("/proc")
      .filter((entry) => /^\d+$/.test(entry))
      .filter((entry) => {
        try {
          const stat = fs.readFileSync(`/proc/${entry}/stat`, "utf8");
          return Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[1]) === child.pid;
        } catch {
          return false;
        }
      });
  for (let i = 0; ; i++) {
    try {
      await fetch(`${url}/healthz`);
      break;
    } catch {
      if (i > 100 || child.exitCode !== null) throw new Error(`nginx did not start: ${output}`);
      await new Promise((r) => setTimeout(r, 100));
    }
  }
  return {
    url,
    pid: child.pid,
    workers,
    /**
     * Routes to `list` from now on. Returns once a new worker answers; with `untilOldGone`, once
     * the old workers are gone too (none still serves a connection made before the reload).
     */
    async reload(list, { untilOldGone = false } = {}) {
      const old = workers();
      generation++;
      write(list);
      execFileSync(nginxBinary(), ["-c", main, "-p", dir, "-s", "reload"]);
      // The new workers route by the new list once they answer; the old ones finish the streams
      // they serve (however long, so only a caller that holds none waits for them to go): a wait
      // of fixed length was too short on a loaded machine.
      const deadline = Date.now() + 30_000;
      for (;;) {
        let current = false;
        try {
          const res = await fetch(`${url}/healthz`, { headers: { connection: "close" } });
          current = res.headers.get("x-config-generation") === String(generation);
        } catch {
          /* a connection an old worker closed */
        }
        const oldWorkers = old.filter((pid) => workers().includes(pid)).length;
        if (current && (!untilOldGone || oldWorkers === 0)) return { oldWorkers };
        if (Date.now() > deadline) throw new Error(`nginx did not take configuration ${generation} within 30 s: ${output}`);
        await new Promise((r) => setTimeout(r, 50));
      }
    },
    async stop() {
      child.kill("SIGTERM");
      if (child.exitCode === null) await new Promise((r) => child.once("exit", r));
    },
  };
}
