// What every part of the soak shares: its options, its randomness, the scripted model's replies,
// and the tallies, the journal and the violations it reports.

/** The command line: `--minutes N [--seed S] [--users M] [--replicas R] [--faults K,K…] [--out FILE]`. */
export function options(argv = process.argv.slice(2)) {
  const value = (name, fallback) => {
    const i = argv.indexOf(`--${name}`);
    return i >= 0 ? argv[i + 1] : fallback;
  };
  const minutes = Number(value("minutes", "3"));
  const users = Number(value("users", "4"));
  const replicas = Number(value("replicas", "1"));
  const seed = Number(value("seed", String(Date.now() % 1_000_000)));
  if (!(minutes > 0) || !(users > 0) || !Number.isInteger(users) || !Number.isInteger(seed) || !Number.isInteger(replicas) || replicas < 1) {
    throw new Error("usage: soak.mjs --minutes N (> 0) [--seed S (integer)] [--users M (integer > 0)] [--replicas R (integer > 0)] [--faults K,K… (only these kinds)] [--out FILE]");
  }
  const faults = value("faults", undefined)?.split(",").filter(Boolean);
  return { minutes, users, seed, replicas, faults, out: value("out", undefined) };
}

/** mulberry32: a small seeded generator, so a seed replays the same choices. */
export function generator(seed) {
  let a = seed >>> 0;
  const next = () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
  return { next, pick: (list) => list[Math.floor(next() * list.length)], int: (lo, hi) => lo + Math.floor(next() * (hi - lo + 1)) };
}

export const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

const SLOW = Array.from({ length: 30 }, (_, i) => `w${i} `).join("");
/** 12 MB of text, sent by the model in 512 KB chunks. */
export const BIG = "lorem ".repeat(2_000_000);
const BIG_CHUNK = 512 * 1024;
/** The agent command run within its turn. Its odd length marks it as the soak's. */
export const COMMAND = "sleep 4.5";
/**
 * The agent command left running in the background: the run ends with the model's reply, and
 * the harness's answer to the command's end is a turn of its own.
 */
export const COMMAND_LEFT_RUNNING = "sleep 2.75";
export const TOOLS = [{ name: "set_color", description: "Sets the page color.", parameters: { type: "object", properties: { color: { type: "string" } }, required: ["color"] } }];
export const SCRIPT = {
  replies: [
    { name: "say", repeat: "forever", match: { user_text_contains: "s-say", last_part: "text" }, reply: { text: "Echo: {{user_text}}" } },
    { name: "slow", repeat: "forever", match: { user_text_contains: "s-slow", last_part: "text" }, reply: { text: SLOW, chunking: { words: 1 }, delay_ms: 100 } },
    { name: "park", repeat: "forever", match: { user_text_contains: "s-park", last_part: "text" }, reply: { text: "Setting it.", calls: [{ name: "set_color", args: { color: "teal" } }] } },
    { name: "answered", repeat: "forever", match: { function_response: "set_color" }, reply: { text: "The page answered." } },
    { name: "ask", repeat: "forever", match: { user_text_contains: "s-ask", last_part: "text" }, reply: { text: "One question first.", calls: [{ name: "ask_question", args: { questions: [{ question: "Which fruit?", options: ["Apple", "Pear"], is_multi_select: false }] } }] } },
    { name: "asked", repeat: "forever", match: { function_response: "ask_question" }, reply: { text: "Noted." } },
    { name: "list", repeat: "forever", match: { user_text_contains: "s-list", last_part: "text" }, reply: { calls: [{ name: "list_dir", args: { DirectoryPath: "{{workspace}}" } }] } },
    { name: "listed", repeat: "forever", match: { function_response: "list_dir" }, reply: { text: "Listed." } },
    { name: "command", repeat: "forever", match: { user_text_contains: "s-cmd", last_part: "text" }, reply: { calls: [{ name: "run_command", args: { CommandLine: COMMAND, Cwd: "{{workspace}}", WaitMsBeforeAsync: 30_000 } }] } },
    { name: "command left running", repeat: "forever", match: { user_text_contains: "s-bgcmd", last_part: "text" }, reply: { calls: [{ name: "run_command", args: { CommandLine: COMMAND_LEFT_RUNNING, Cwd: "{{workspace}}", WaitMsBeforeAsync: 100 } }] } },
    { name: "command runs", repeat: "forever", match: { function_response: "run_command" }, reply: { text: "It runs on." } },
    { name: "big", repeat: "forever", match: { user_text_contains: "s-big", last_part: "text" }, reply: { text: BIG, chunking: { chars: BIG_CHUNK } } },
    { name: "fail", repeat: "forever", match: { user_text_contains: "s-fail", last_part: "text" }, reply: { error: { code: 500, message: "Internal error." } } },
    { name: "limited", match: { user_text_contains: "s-limit", last_part: "text" }, reply: { error: { code: 429 } } },
    { name: "after the limit", repeat: "forever", match: { user_text_contains: "s-limit", last_part: "text" }, reply: { text: "Recovered." } },
    { name: "hang", repeat: "forever", match: { user_text_contains: "s-hang", last_part: "text" }, reply: { text: "Too late.", hang: 20_000 } },
  ],
  default: { text: "No scripted answer." },
};
/** The tag of a user message of the soak's (`u3-17`, or a thread id's last words). */
export const TAG = /s-(?:say|slow|park|ask|list|cmd|bgcmd|big|fail|limit|hang) (u\d+-\d+|soak-[\w-]+)/g;
/**
 * Errors a fault leaves behind on a thread's next run, whenever that comes (a turn that failed
 * while no client watched is reported to the next run: `STORAGE_FULL` for one the volume filled
 * up during).
 */
export const AFTER_A_FAULT = ["TURN_INTERRUPTED", "HARNESS_LOST", "TURN_STALLED", "CONVERSATION_LOST", "STORAGE_FULL"];

/** The soak's shared state: what happened, and what was found. */
export const world = {
  started: Date.now(),
  /** What each user's action was, by its tag: a violation names the actions behind it. */
  journal: new Map(),
  tally: { actions: {}, faults: {}, runs: 0, cutByFault: 0, faultedErrors: 0, elsewhere: 0, leaseLost: 0 },
  violations: [],
  /** Bumped when a fault starts and when it ends: an action that saw it change may fail. */
  faultClock: 0,
  faultActive: false,
  /** Bumped whenever a server is killed, stopped, frozen or removed: a run across it may be cut. */
  losses: 0,
  /** Every thread of every user, by id (the faults act on some). */
  threads: new Map(),
};

export const count = (map, key, n = 1) => (map[key] = (map[key] ?? 0) + n);

export function violate(what) {
  world.violations.push({ at: Date.now(), what });
  console.error(`VIOLATION: ${what}`);
}

/** Whether a fault ran during an action that began at `since` (a `faultClock` value). */
export const faulted = (since) => since !== world.faultClock || world.faultActive;
