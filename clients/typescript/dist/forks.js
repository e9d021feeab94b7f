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
export function regenerateProps(props = {}) {
    return { ...props, [REGENERATE_PROP]: true };
}
/**
 * A run the server refused to fork (`RUN_ERROR` code `CANNOT_FORK`): the thread is unchanged.
 * The message names the point and why (a turn in flight, the thread waiting for the client,
 * the conversation being opened, an empty message, a point the server no longer knows).
 */
export class AntigravityForkError extends Error {
    /** Always `CANNOT_FORK`. */
    code = CANNOT_FORK;
    /** The message the server named as the fork point, when its message names one. */
    messageId;
    /** `message` is the server's. */
    constructor(message) {
        super(message);
        this.name = "AntigravityForkError";
        this.messageId = /message (\S+) was edited|the answer to message (\S+) was removed/.exec(message)?.slice(1).find((id) => id !== undefined);
    }
}
/** The report carried by `event` when it is the rewind's `CUSTOM` event; undefined otherwise. */
export function rewindReportOf(event) {
    const custom = event;
    if (event.type !== "CUSTOM" || custom.name !== REWIND_EVENT || typeof custom.value !== "object" || custom.value === null)
        return undefined;
    const value = custom.value;
    return {
        restored: Array.isArray(value.restored) ? value.restored : [],
        notRestored: Array.isArray(value.notRestored) ? value.notRestored : [],
        commandsAfter: typeof value.commandsAfter === "number" ? value.commandsAfter : 0,
        ...(typeof value.unknown === "string" ? { unknown: value.unknown } : {}),
    };
}
/** The typed error of `event` when it is a `RUN_ERROR` with code `CANNOT_FORK`; undefined otherwise. */
export function forkErrorOf(event) {
    const error = event;
    if (event.type !== "RUN_ERROR" || error.code !== CANNOT_FORK)
        return undefined;
    return new AntigravityForkError(typeof error.message === "string" ? error.message : "the server cannot fork the thread here");
}
/** The index of user message `messageId` in `messages`; throws a `TypeError` naming what it found instead. */
function userIndex(messages, messageId) {
    const index = messages.findIndex((m) => m.id === messageId);
    if (index < 0)
        throw new TypeError(`no message ${messageId} in the agent's messages`);
    if (messages[index].role !== "user")
        throw new TypeError(`message ${messageId} is a ${messages[index].role} message, not a user message`);
    return index;
}
/**
 * The history that edits user message `messageId` to `content`: the messages before it, then it
 * under its own id with the new content; the messages after it are dropped (the server would
 * merge kept ones into the new branch as they are).
 */
export function editedHistory(messages, messageId, content) {
    const index = userIndex(messages, messageId);
    return [...messages.slice(0, index), { ...messages[index], content }];
}
/**
 * The history that regenerates the answer to a user message: the messages up to and including
 * it. `messageId` names the user message, or an assistant (or tool) message of the answer, whose
 * user message is the nearest before it; without it, the last user message. Run it with the
 * mark ({@link regenerateProps}), or a server that has not read the thread back yet restates
 * the old answer.
 */
export function regenerateHistory(messages, messageId) {
    let from = messages.length - 1;
    if (messageId !== undefined) {
        from = messages.findIndex((m) => m.id === messageId);
        if (from < 0)
            throw new TypeError(`no message ${messageId} in the agent's messages`);
    }
    for (let index = from; index >= 0; index -= 1) {
        if (messages[index].role === "user")
            return messages.slice(0, index + 1);
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
export function branchesAt(list, messageId, options = {}) {
    const here = list.branches.filter((b) => (b.leftAt || options.leftAt?.[b.id]) === messageId).map((b) => b.id);
    if (here.length === 0)
        return undefined;
    const members = new Set([...here, list.current]);
    const ids = (options.order ?? []).filter((id) => members.has(id));
    for (const id of [...here, list.current])
        if (!ids.includes(id))
            ids.push(id);
    return { index: ids.indexOf(list.current), count: ids.length, ids };
}
