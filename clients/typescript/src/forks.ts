// Edit, regenerate and branches (the server's issue 42 contract): the histories a client sends
// to edit a message or regenerate an answer (and the mark a regenerate's run carries in its
// `forwardedProps`), the report of a rewind of the workspace's files, the typed error of a run
// that cannot fork, and a thread's branches grouped per message.
// Pure functions and types, so a page that drives another agent (CopilotKit's) uses them too.
import type { BaseEvent, Message } from "@ag-ui/client";

/** The `CUSTOM` event's name that reports a rewind, right after `RUN_STARTED`. */
export const REWIND_EVENT = "antigravity:rewind";

/** The `RUN_ERROR` code of a run whose history differs from the thread's where it cannot fork. */
export const CANNOT_FORK = "CANNOT_FORK";

/**
 * The `forwardedProps` key that marks a run as a regenerate (`true`): the run redoes the answer
 * to its last message, a user message the thread already sent. Unmarked, a regenerate reaching
 * a server before it read the thread's history back (after a restart, on another replica) is
 * taken for a retry of a cut run and the old answer is restated; marked, it always forks.
 * Only a regenerate's run carries it (never an edit's, never a plain run's).
 */
export const REGENERATE_PROP = "regenerate";

/**
 * The `forwardedProps` of a regenerate's run: `props` (the caller's, e.g. `rewindFiles`) with
 * the mark ({@link REGENERATE_PROP}: `true`).
 */
export function regenerateProps(props: Record<string, unknown> = {}): Record<string, unknown> {
  return { ...props, [REGENERATE_PROP]: true };
}

/** A file a rewind put back as it was at the fork point. */
export interface RewoundFile {
  /** The path as the agent saw it (absolute, in the workspace). */
  path: string;
  /** `restored`: its content is back; `removed`: it was created after the point. */
  action: "restored" | "removed" | (string & {});
}

/** A file a rewind left as it is, and why. */
export interface NotRewoundFile {
  /** The path as the agent saw it. */
  path: string;
  /** Why (changed since by other means, a link planted in its place, outside the workspace…). */
  why: string;
}

/**
 * What a rewind did (`forwardedProps.rewindFiles` on an edit or a regenerate): the file tools'
 * changes after the fork point are undone, newest first. Commands' changes are never undone.
 */
export interface RewindReport {
  /** The files put back. */
  restored: RewoundFile[];
  /** The files left as they are. */
  notRestored: NotRewoundFile[];
  /** How many commands ran after the point: their changes were not undone. */
  commandsAfter: number;
  /** Set when nothing could be known (e.g. right after a server restart): nothing was rewound. */
  unknown?: string;
}

/**
 * A run the server refused to fork (`RUN_ERROR` code `CANNOT_FORK`): the thread is unchanged.
 * The message names the point and why (a turn in flight, the thread waiting for the client,
 * the conversation being opened, an empty message, a point the server no longer knows).
 */
export class AntigravityForkError extends Error {
  /** Always `CANNOT_FORK`. */
  readonly code = CANNOT_FORK;
  /** The message the server named as the fork point, when its message names one. */
  readonly messageId: string | undefined;

  /** `message` is the server's. */
  constructor(message: string) {
    super(message);
    this.name = "AntigravityForkError";
    this.messageId = /message (\S+) was edited|the answer to message (\S+) was removed/.exec(message)?.slice(1).find((id) => id !== undefined);
  }
}

/** A thread's branch other than its current one (`GET <path>/threads/<id>`, `branches`). */
export interface Branch {
  /** Its id (what `switchBranch` names). */
  id: string;
  /**
   * The message where the thread left it: the one edited, or whose answer was regenerated;
   * for a branch left by `switchBranch`, where the branch switched to parts from it (`""` from
   * servers before that was kept).
   */
  leftAt: string;
  /** When the thread left it (RFC 3339, UTC). */
  leftWhen: string;
  /** Its messages, when last known. */
  messageCount: number;
}

/** A thread's branches: the current one's id, and the others, oldest first (at most 32). */
export interface ThreadBranches {
  /** The current branch's id. */
  current: string;
  /** The other branches, oldest first. */
  branches: Branch[];
}

/** Where one message's alternatives stand: `index` of `count` (`ids[index]` is the current branch). */
export interface MessageBranches {
  /** The position of the current branch among `ids` (0-based). */
  index: number;
  /** How many alternatives the message has (the current branch included). */
  count: number;
  /** The branch ids, in the order shown. */
  ids: string[];
}

/** The options of an edit or a regenerate. */
export interface ForkOptions {
  /**
   * Undo what the file tools changed after the fork point (`forwardedProps.rewindFiles`);
   * unset: the server's default (`rewind_files`, off unless configured).
   */
  rewindFiles?: boolean;
  /** Called with the rewind's report as soon as it arrives (before the new answer). */
  onRewind?: (report: RewindReport) => void;
  /** More `forwardedProps` for the run (a regenerate adds its mark, `regenerate: true`, to them). */
  forwardedProps?: Record<string, unknown>;
}

/** What an edit or a regenerate ended with. */
export interface ForkResult {
  /** The messages the run added (the new answer). */
  newMessages: Message[];
  /** The rewind's report, when files were asked to be rewound. */
  rewind: RewindReport | undefined;
}

/** The report carried by `event` when it is the rewind's `CUSTOM` event; undefined otherwise. */
export function rewindReportOf(event: BaseEvent): RewindReport | undefined {
  const custom = event as BaseEvent & { name?: unknown; value?: unknown };
  if (event.type !== "CUSTOM" || custom.name !== REWIND_EVENT || typeof custom.value !== "object" || custom.value === null) return undefined;
  const value = custom.value as Partial<RewindReport>;
  return {
    restored: Array.isArray(value.restored) ? value.restored : [],
    notRestored: Array.isArray(value.notRestored) ? value.notRestored : [],
    commandsAfter: typeof value.commandsAfter === "number" ? value.commandsAfter : 0,
    ...(typeof value.unknown === "string" ? { unknown: value.unknown } : {}),
  };
}

/** The typed error of `event` when it is a `RUN_ERROR` with code `CANNOT_FORK`; undefined otherwise. */
export function forkErrorOf(event: BaseEvent): AntigravityForkError | undefined {
  const error = event as BaseEvent & { code?: unknown; message?: unknown };
  if (event.type !== "RUN_ERROR" || error.code !== CANNOT_FORK) return undefined;
  return new AntigravityForkError(typeof error.message === "string" ? error.message : "the server cannot fork the thread here");
}

/** The index of user message `messageId` in `messages`; throws a `TypeError` naming what it found instead. */
function userIndex(messages: Message[], messageId: string): number {
  const index = messages.findIndex((m) => m.id === messageId);
  if (index < 0) throw new TypeError(`no message ${messageId} in the agent's messages`);
  if (messages[index].role !== "user") throw new TypeError(`message ${messageId} is a ${messages[index].role} message, not a user message`);
  return index;
}

/**
 * The history that edits user message `messageId` to `content`: the messages before it, then it
 * under its own id with the new content; the messages after it are dropped (the server would
 * merge kept ones into the new branch as they are).
 */
export function editedHistory(messages: Message[], messageId: string, content: Message["content"]): Message[] {
  const index = userIndex(messages, messageId);
  return [...messages.slice(0, index), { ...messages[index], content } as Message];
}

/**
 * The history that regenerates the answer to a user message: the messages up to and including
 * it. `messageId` names the user message, or an assistant (or tool) message of the answer, whose
 * user message is the nearest before it; without it, the last user message. Run it with the
 * mark ({@link regenerateProps}), or a server that has not read the thread back yet restates
 * the old answer.
 */
export function regenerateHistory(messages: Message[], messageId?: string): Message[] {
  let from = messages.length - 1;
  if (messageId !== undefined) {
    from = messages.findIndex((m) => m.id === messageId);
    if (from < 0) throw new TypeError(`no message ${messageId} in the agent's messages`);
  }
  for (let index = from; index >= 0; index -= 1) {
    if (messages[index].role === "user") return messages.slice(0, index + 1);
  }
  throw new TypeError(messageId === undefined ? "the agent has no user message to regenerate the answer to" : `no user message at or before ${messageId}`);
}

/**
 * The alternatives of message `messageId` for per-message navigation (CopilotKit's
 * `branchIndex`/`numberOfBranches`): the branches the thread left at that message, and the
 * current one; undefined when it has none. A branch listed with no `leftAt` (by a server
 * that did not keep it for a switch): `leftAt` (branch id → message id) supplies what the
 * caller remembers of it, and
 * `order` (the ids shown last time) keeps their order stable across switches — new ones come
 * after, the server's oldest first, the current one last.
 */
export function branchesAt(list: ThreadBranches, messageId: string, options: { leftAt?: Record<string, string>; order?: string[] } = {}): MessageBranches | undefined {
  const here = list.branches.filter((b) => (b.leftAt || options.leftAt?.[b.id]) === messageId).map((b) => b.id);
  if (here.length === 0) return undefined;
  const members = new Set([...here, list.current]);
  const ids = (options.order ?? []).filter((id) => members.has(id));
  for (const id of [...here, list.current]) if (!ids.includes(id)) ids.push(id);
  return { index: ids.indexOf(list.current), count: ids.length, ids };
}
