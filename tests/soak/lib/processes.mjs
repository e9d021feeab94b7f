// The machine's processes, from /proc: which are the soak's harnesses, launchers and agent
// commands, and whose (which server's) they are.
import fs from "node:fs";
import { COMMAND, COMMAND_LEFT_RUNNING } from "./world.mjs";

/** Every process: pid, parent, start time (clock ticks since boot), state, name and command line. */
export function processTable() {
  const table = [];
  for (const entry of fs.readdirSync("/proc")) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = fs.readFileSync(`/proc/${entry}/stat`, "utf8");
      const end = stat.lastIndexOf(")");
      const fields = stat.slice(end + 2).split(" ");
      const cmdline = fs.readFileSync(`/proc/${entry}/cmdline`, "utf8").replaceAll("\0", " ").trim();
      table.push({ pid: Number(entry), ppid: Number(fields[1]), state: fields[0], start: fields[19], comm: stat.slice(stat.indexOf("(") + 1, end), cmdline });
    } catch {
      /* exited meanwhile */
    }
  }
  return table;
}

export function descendants(root, table = processTable()) {
  const found = [];
  const frontier = [root];
  while (frontier.length) {
    const parent = frontier.pop();
    for (const p of table) if (p.ppid === parent) (found.push(p), frontier.push(p.pid));
  }
  return found;
}

export const isHarness = (p) => p.comm === "localharness";
export const isLauncher = (p) => p.cmdline.includes("__sandbox-exec");
export const isCommand = (p) => p.cmdline === COMMAND || p.cmdline === COMMAND_LEFT_RUNNING;
export const isOurKind = (p) => isHarness(p) || isLauncher(p) || isCommand(p);

/** Whether a process belongs to this soak: its environment or command line names `dir`. */
export function ours(p, dir) {
  try {
    return p.cmdline.includes(dir) || fs.readFileSync(`/proc/${p.pid}/environ`, "utf8").includes(dir);
  } catch {
    return false;
  }
}

/** The value of `name` in the environment of process `pid`, if readable. */
export function environ(pid, name) {
  try {
    const entry = fs
      .readFileSync(`/proc/${pid}/environ`, "utf8")
      .split("\0")
      .find((e) => e.startsWith(`${name}=`));
    return entry?.slice(name.length + 1);
  } catch {
    return undefined;
  }
}
