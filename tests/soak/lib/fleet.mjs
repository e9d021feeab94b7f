// The servers under test: one release server alone, or N replicas sharing one save dir and
// workspace root (on a volume of their own: a size-limited tmpfs when run as root, so the soak
// can fill it) with leases on (`--replica-id`), behind nginx configured as `deploy/nginx.conf`.
// Each replica keeps its port across restarts, as a pod or a unit keeps its address, so nginx's
// configuration changes only when a replica is added or removed.
import { execFileSync } from "node:child_process";
import fs from "node:fs";
import path from "node:path";
import { startServer } from "../../e2e/lib/procs.mjs";
import { freePort, startNginx } from "../../e2e/lib/nginx.mjs";
import { descendants, isHarness, isLauncher, processTable } from "./processes.mjs";
import { violate, world } from "./world.mjs";

/** A replica's lease lifetime: short, so a dead or frozen replica's threads move within seconds. */
export const LEASE_TTL_SECS = 6;

export class Fleet {
  /**
   * `dir`: the soak's directory; `count`: 1 (one server, no leases, no proxy) or more
   * (replicas); `args`: every server's flags beside those the fleet sets.
   */
  constructor({ dir, count, args, recipeFile }) {
    this.dir = dir;
    this.count = count;
    this.several = count > 1;
    this.args = args;
    this.recipeFile = recipeFile;
    this.volume = path.join(dir, "vol");
    this.saveDir = path.join(this.volume, "s");
    this.workspaceRoot = path.join(this.volume, "w");
    this.filler = path.join(this.volume, ".soak-filler");
    /** The servers' temporary directory (one host's /tmp): sandbox roots are looked for here. */
    this.tmp = path.join(dir, "tmp");
    /** Whether the volume can be filled (root, on a tmpfs of its own). */
    this.fillable = false;
    this.replicas = [];
    this.lives = 0;
    /** Single mode: the server is restarting (users wait; there is no proxy to fail over). */
    this.restarting = false;
    this.nginx = undefined;
    this.model = undefined;
  }

  /** As root, the volume is a tmpfs of its own, so the soak can fill it without filling the machine. */
  mount() {
    fs.mkdirSync(this.volume, { recursive: true });
    fs.mkdirSync(this.tmp, { recursive: true, mode: 0o1777 });
    fs.chmodSync(this.tmp, 0o1777);
    if (process.getuid?.() !== 0) {
      console.log("not root: the full-volume fault is skipped (it needs a tmpfs of its own)");
      return;
    }
    try {
      execFileSync("mount", ["-t", "tmpfs", "-o", "size=3g,mode=0700", "soak-volume", this.volume]);
      this.fillable = true;
    } catch (err) {
      console.log(`the volume could not be mounted as a tmpfs (${String(err).split("\n")[0]}): the full-volume fault is skipped`);
    }
  }

  unmount() {
    if (!this.fillable) return;
    this.fillable = false;
    try {
      execFileSync("umount", ["--lazy", this.volume]);
    } catch (err) {
      console.error(`umount ${this.volume}: ${err}`);
    }
  }

  /** Starts the model's servers: the first `count` replicas (and nginx before them, with several). */
  async start(model) {
    this.model = model;
    for (let n = 0; n < this.count; n++) this.replicas.push({ id: `r${n}`, port: await freePort(), state: "down", extra: false });
    for (const r of this.replicas) await this.boot(r);
    if (this.several) this.nginx = await startNginx({ dir: path.join(this.dir, "nginx"), recipeFile: this.recipeFile, upstreams: this.upstreams() });
  }

  /** The URL clients use: nginx's, or the one server's. */
  get url() {
    return this.nginx?.url ?? this.replicas[0].server.url;
  }

  /** Replicas nginx routes to (all but a removed one). */
  upstreams() {
    return this.replicas.filter((r) => r.state !== "removed" && !r.unrouted).map((r) => `127.0.0.1:${r.port}`);
  }

  up() {
    return this.replicas.filter((r) => r.state === "up");
  }

  async boot(r) {
    const args = ["--gemini-base-url", this.model.url, ...this.args];
    if (this.several) args.push("--replica-id", r.id, "--lease-ttl-secs", String(LEASE_TTL_SECS));
    this.lives += 1;
    const life = this.several ? `${r.id} life ${(r.lives ?? 0) + 1}` : `server #${this.lives}`;
    r.server = await startServer({
      label: this.several ? `soak replica ${r.id}` : `soak server #${this.lives}`,
      dir: this.dir,
      port: r.port,
      saveDir: this.saveDir,
      workspaceRoot: this.workspaceRoot,
      env: { TMPDIR: this.tmp },
      args,
    });
    r.lives = (r.lives ?? 0) + 1;
    r.life = life;
    r.since = Date.now();
    r.state = "up";
    return r;
  }

  /** Harness processes below replica `r` (below every live one without `r`). */
  harnesses(r, table = processTable()) {
    return (r ? [r] : this.up()).flatMap((x) => descendants(x.server.pid, table).filter(isHarness));
  }

  launchers(r, table = processTable()) {
    return (r ? [r] : this.up()).flatMap((x) => descendants(x.server.pid, table).filter(isLauncher));
  }

  /** SIGKILL of replica `r` (as a crash), then its restart with the same id after `downMs`. */
  async kill(r, downMs) {
    r.state = "down";
    world.losses += 1;
    await r.server.kill();
    await r.server.stop().catch((e) => violate(`after SIGKILL of ${r.life}: ${e.message.split("\n")[0]}`));
    await new Promise((res) => setTimeout(res, downMs));
    await this.boot(r);
  }

  /** SIGTERM of replica `r` (a graceful stop), then its restart with the same id after `downMs`. */
  async term(r, downMs) {
    r.state = "down";
    world.losses += 1;
    const started = Date.now();
    await r.server.stop().catch((e) => violate(`SIGTERM stop of ${r.life}: ${e.message.split("\n")[0]}`));
    const stopMs = Date.now() - started;
    await new Promise((res) => setTimeout(res, downMs));
    await this.boot(r);
    return stopMs;
  }

  /** Single mode: the server restarted, users waiting meanwhile. */
  async restart(kill) {
    this.restarting = true;
    try {
      if (kill) await this.kill(this.replicas[0], 0);
      else await this.term(this.replicas[0], 0);
    } finally {
      this.restarting = false;
    }
  }

  /** SIGSTOP of replica `r`'s server process (its harnesses run on, as after a pause of the server alone). */
  freeze(r) {
    r.state = "frozen";
    world.losses += 1;
    process.kill(r.server.pid, "SIGSTOP");
  }

  thaw(r) {
    process.kill(r.server.pid, "SIGCONT");
    r.state = "up";
  }

  /** nginx stops (or starts again) routing to `r`, as an orchestrator does with a replica its readiness check fails. */
  async route(r, routed) {
    r.unrouted = !routed;
    return this.nginx.reload(this.upstreams());
  }

  /** A replica added: started, then routed to (nginx reloaded with streams open). */
  async add() {
    const r = { id: `r${this.replicas.length}`, port: await freePort(), state: "down", extra: true };
    this.replicas.push(r);
    await this.boot(r);
    const reload = await this.nginx.reload(this.upstreams());
    return { r, reload };
  }

  /** A replica removed: no longer routed to (nginx reloaded with streams open), then stopped by SIGTERM. */
  async remove(r) {
    r.state = "removed";
    world.losses += 1;
    const reload = await this.nginx.reload(this.upstreams());
    await r.server.stop().catch((e) => violate(`SIGTERM stop of removed ${r.life}: ${e.message.split("\n")[0]}`));
    return reload;
  }

  /** A replica no nginx routes to, started alone on the shared volume (the cold-resume check). */
  async fresh() {
    const r = { id: "fresh", port: await freePort(), state: "down", extra: true, unrouted: true };
    this.replicas.push(r);
    return this.boot(r);
  }

  /** Every replica still running stops by SIGTERM; nginx too. */
  async stopAll() {
    for (const r of this.replicas.filter((x) => x.state === "up" || x.state === "frozen")) {
      if (r.state === "frozen") this.thaw(r);
      r.state = "down";
      await r.server.stop().catch((e) => violate(`final stop of ${r.life}: ${e.message.split("\n")[0]}`));
    }
    await this.nginx?.stop();
  }
}
