// The soak: release servers, the real harness and the scripted model, driven for N minutes by
// M simulated users acting at random (reproducibly from the seed) while faults are injected; the
// invariants are checked every minute and at the end. Run by `cargo xtask soak` (which builds the
// binaries and sets AGUI_BIN, GEMINI_SCRIPT_BIN and ANTIGRAVITY_HARNESS_PATH).
//
//   node tests/soak/soak.mjs --minutes N [--seed S] [--users M] [--replicas R] [--out FILE]
//
// Servers (`lib/fleet.mjs`): one, or R replicas sharing one save dir and workspace root with
// leases on, behind nginx configured as `deploy/nginx.conf` routes (`../e2e/lib/nginx.mjs`).
// Users (`lib/users.mjs`, each its own owner: half by token, half named by the proxy's header):
// new threads and several turns on them; a frontend tool parked then answered now, late or
// never; a question and a tool approval answered now, late or never; stop mid-turn; a client
// that disconnects mid-stream then reconnects; connect (with replicas, half of them straight to
// a replica nginx would not pick); delete; a 12 MB reply; malformed requests; replies the model
// fails (500), rate-limits (429) or never sends (the stall timeout ends the turn).
// Faults (`lib/faults.mjs`): a harness or a launcher killed, a harness stopped past the stall
// timeout, the volume full; with one server, its restart by SIGTERM and by SIGKILL; with
// replicas, one killed or stopped and restarted, one frozen past its leases, one added and
// removed (nginx reloaded with streams open).
// Checked every minute (`lib/checks.mjs`, `lib/conversations.mjs`): no user message reached the
// model twice; no harness, launcher or agent command outlives the server that started it; no
// conversation is open in two running harness processes (sampled 4 times a second). At the end,
// also: one terminal event per run; every answered message reached the model; every thread
// answers a last message and its connect restates what it answered; nothing is left once the
// servers stop; every conversation file passes SQLite's integrity check; with replicas, every
// thread resumes cold on a fresh replica after all others stopped, and no sandbox root is left
// once it stops; resources per server life stay flat after warm-up (`lib/resources.mjs`).
import fs from "node:fs";
import path from "node:path";
import { startModel, tempDir } from "../e2e/lib/procs.mjs";
import { Leaks, ModelLog, sandboxRoots } from "./lib/checks.mjs";
import { ConversationWatch, checkConversationFiles } from "./lib/conversations.mjs";
import { Faults } from "./lib/faults.mjs";
import { Fleet } from "./lib/fleet.mjs";
import { Resources } from "./lib/resources.mjs";
import { Users, identities } from "./lib/users.mjs";
import { SCRIPT, generator, options, sleep, violate, world } from "./lib/world.mjs";

const opts = options();
const dir = tempDir("soak");
const ids = identities(opts.users);
// Threads hibernate and idle harnesses stop within seconds, so the live set settles early and
// what keeps growing after warm-up is a leak, not load (and hibernation and resume run often).
const ARGS = [
  "--api-key", "soak-key",
  ...ids.args,
  "--builtin-tools", "list_dir,ask_question,run_command", "--behavior", "interactive", "--tool-approval",
  "--turn-stall-timeout-secs", "8", "--hibernate-after-secs", "10", "--harness-idle-grace-secs", "5",
  "--sandbox", "owner",
];
const fleet = new Fleet({ dir, count: opts.replicas, args: ARGS, recipeFile: path.join(process.cwd(), "deploy", "nginx.conf") });
const users = new Users({ fleet, ids: ids.list, seed: opts.seed });
let model;

/** Sandbox roots over time (and how many of them a dead launcher left). */
const rootCounts = [];
function countRoots() {
  const roots = sandboxRoots(fleet.tmp);
  rootCounts.push({ t: Math.round((Date.now() - world.started) / 1000), roots: roots.length });
  return roots;
}

async function main() {
  console.log(`soak: ${opts.minutes} min, ${opts.users} users, ${opts.replicas} replica(s), seed ${opts.seed}, dir ${dir}`);
  fleet.mount();
  model = await startModel(SCRIPT);
  await fleet.start(model);
  const log = new ModelLog(model);
  const leaks = new Leaks(fleet, dir);
  const watch = new ConversationWatch(fleet.volume, fleet);
  const resources = new Resources(fleet, ids.metricsToken);
  const faults = new Faults({ fleet, users, rnd: generator(opts.seed * 1000), minutes: opts.minutes, only: opts.faults });
  watch.start();
  const deadline = world.started + opts.minutes * 60_000;
  const sampler = setInterval(() => resources.sample(), 5_000);
  const loads = [];
  const minute = setInterval(async () => {
    leaks.check();
    countRoots();
    await log.take().catch((err) => violate(`reading the model's log: ${err}`));
    const load = fs.readFileSync("/proc/loadavg", "utf8").split(" ").slice(0, 3).join(" ");
    loads.push(load);
    const per = resources.latest().map((s) => `${s.replica}: rss=${s.rssMb.toFixed(1)}MB fds=${s.fds} thr=${s.threads} tasks=${s.tasks} sess=${s.sessions} h=${s.harnesses}`);
    console.log(`t=${Math.round((Date.now() - world.started) / 1000)}s runs=${world.tally.runs} violations=${world.violations.length} load=${load} roots=${rootCounts.at(-1).roots} | ${per.join(" | ")}`);
  }, 60_000);
  const faulting = faults.run(deadline);
  const acted = await Promise.all(Array.from({ length: opts.users }, (_, n) => users.user(n, deadline)));
  await faulting;
  clearInterval(minute);
  // Resources are judged over the users' phase: the last words below resume every thread at
  // once, a load of its own.
  await resources.sample();
  clearInterval(sampler);
  const flat = resources.flatness();
  const live = acted.flatMap((u) => u.threads);
  const everyThread = [...acted.flatMap((u) => u.all), ...faults.threads];
  await users.lastWords(live);
  await log.take();
  leaks.check();
  // Every server stops: no harness, launcher or agent command may outlive them.
  await fleet.stopAll();
  watch.sample();
  const stopped = Date.now();
  while (Date.now() - stopped < 10_000 && leaks.leftAfterStop().length) await sleep(500);
  leaks.final();
  const files = checkConversationFiles(fleet.volume);
  let cold;
  if (fleet.several) {
    // A fresh replica, alone: every thread resumes cold from the files the others left, and
    // the roots its predecessors' killed launchers left are gone once it started.
    const fresh = await fleet.fresh();
    const stale = countRoots().filter((root) => !rootOfLive(root));
    if (stale.length) violate(`sandbox roots left by dead launchers after a fresh replica started: ${stale.join(", ")}`);
    await users.lastWords(live, { suffix: "cold", via: fresh });
    await log.take();
    cold = live.length;
    await fleet.stopAll();
    await sleep(2_000);
    leaks.final();
  }
  watch.stop();
  const roots = countRoots();
  if (roots.length) violate(`sandbox roots left after every server stopped: ${roots.join(", ")}`);
  const twice = log.askedTwice();
  const answered = log.answeredReached(everyThread);
  await model.stop();
  fleet.unmount();
  report({ log, flat, resources, faults, watch, files, twice, answered, everyThread, live, cold, loads });
}

/** Whether a root's launcher (named in it) still runs. */
function rootOfLive(root) {
  const pid = path.basename(root).match(/^agui-sandbox-(\d+)-/)?.[1];
  return pid !== undefined && fs.existsSync(`/proc/${pid}`);
}

function report({ log, flat, resources, faults, watch, files, twice, answered, everyThread, live, cold, loads }) {
  const t = world.tally;
  const shared = watch.summary();
  const out = opts.out ?? path.join(process.cwd(), "target", "soak", `soak-${Date.now()}.json`);
  const result = { ...opts, threads: everyThread.length, ...t, modelRequests: log.requests, answered, askedTwice: twice, violations: world.violations, flatness: flat, overTime: resources.overTime(), probes: faults.summary(), sharedOwnerTrees: shared, conversationFiles: files, roots: rootCounts, loads, samples: resources.samples };
  console.log("\n| figure | value |\n|---|---|");
  console.log(`| minutes / users / replicas / seed | ${opts.minutes} / ${opts.users} / ${opts.replicas} / ${opts.seed} |`);
  console.log(`| threads (live at the end; resumed cold on a fresh replica) | ${everyThread.length} (${live.length}; ${cold ?? "-"}) |`);
  console.log(`| runs (cut by a fault; errors a fault explains; THREAD_ELSEWHERE retries; LEASE_LOST) | ${t.runs} (${t.cutByFault}; ${t.faultedErrors}; ${t.elsewhere}; ${t.leaseLost}) |`);
  console.log(`| actions | ${Object.entries(t.actions).map(([k, v]) => `${k} ${v}`).join(", ")} |`);
  console.log(`| faults | ${Object.entries(t.faults).map(([k, v]) => `${k} ${v}`).join(", ")} |`);
  console.log(`| model requests / messages answered / asked twice (retries) | ${result.modelRequests} / ${answered} / ${twice.length} |`);
  console.log(`| conversation files checked (corrupt) | ${files.files} (${files.bad.length}) |`);
  console.log(`| sampler: samples / with an owner tree shared by replicas / trees shared / most harnesses in one tree | ${shared.samples} / ${shared.sharedTreeSamples} / ${shared.sharedTrees} / ${shared.mostHarnessesInOneTree.harnesses} of ${shared.mostHarnessesInOneTree.replicas} replicas |`);
  console.log(`| conversations open in two running harnesses / open while one holder was frozen / just after its thaw (longest, ms) | ${shared.conversationsOpenTwice.length} / ${shared.openWhileAHolderWasFrozen} / ${shared.openJustAfterAThaw} (${shared.longestOverlapAfterAThawMs}) |`);
  console.log(`| sandbox roots per minute | ${rootCounts.map((r) => r.roots).join(" ")} |`);
  console.log(`| load average per minute | ${loads.join("; ")} |`);
  console.log(`| violations | ${world.violations.length} |`);
  const probes = faults.summary();
  if (probes.length) {
    console.log("\n| fault | probes | answered again after (median / max) | what the probe met meanwhile |\n|---|---|---|---|");
    for (const p of probes) console.log(`| ${p.kind} | ${p.probes} | ${fmt(p.medianMs)} / ${fmt(p.maxMs)} | ${Object.entries(p.seen).map(([k, v]) => `${k} ×${v}`).join(", ") || "nothing"} |`);
  }
  console.log("\n| replica | from–to s | lives | rss MB | fds | threads | tasks | sessions | harnesses | volume MB |\n|---|---|---|---|---|---|---|---|---|---|");
  for (const r of resources.overTime()) console.log(`| ${r.replica} | ${r.from}–${r.to} | ${r.lives} | ${r.rssMb.toFixed(1)} | ${r.fds} | ${r.threads} | ${r.tasks} | ${r.sessions} | ${r.harnesses} | ${r.volumeMb.toFixed(1)} |`);
  console.log("\n| resource (life) | first third median | last third median | bound |\n|---|---|---|---|");
  for (const r of flat) console.log(`| ${r.key} (${r.life}) | ${r.first.toFixed(1)} | ${r.last.toFixed(1)} | ${r.bound.toFixed(1)} |`);
  fs.mkdirSync(path.dirname(out), { recursive: true });
  fs.writeFileSync(out, JSON.stringify(result, null, 2));
  console.log(`\nreport: ${out}`);
  // The servers' logs stay for a soak that found something.
  if (world.violations.length) console.log(`the servers' logs: ${dir}/server-*.log`);
  else fs.rmSync(dir, { recursive: true, force: true });
  for (const v of world.violations) console.log(`VIOLATION: ${v.what}`);
  process.exitCode = world.violations.length ? 1 : 0;
}

const fmt = (ms) => (ms === undefined ? "-" : `${(ms / 1000).toFixed(1)} s`);

// Whatever ends the soak, the tmpfs it mounted goes, and nginx with it.
process.on("exit", () => fleet.unmount());
process.on("SIGINT", () => process.exit(130));

main().catch((err) => {
  console.error(err?.stack ?? err);
  fleet.unmount();
  process.exit(2);
});
