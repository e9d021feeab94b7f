// What a run's stream has opened and not closed, and how a rejoined stream (a `/connect` after
// the run's own stream broke) is spliced onto it so the client sees one valid run.
import { EventType } from "@ag-ui/client";
/** Reads a string field of an event (the events are plain JSON objects). */
function field(event, name) {
    const value = event[name];
    return typeof value === "string" ? value : undefined;
}
/** The kind and id of the block a start event opens, or of the block an end event closes. */
function blockOf(event) {
    const step = () => `${field(event, "subagentRunId") ?? ""}/${field(event, "stepName") ?? ""}`;
    switch (event.type) {
        case EventType.SUBAGENT_STARTED:
            return { kind: "subagent", id: field(event, "subagentRunId") ?? "", opens: true };
        case EventType.SUBAGENT_FINISHED:
        case EventType.SUBAGENT_ERROR:
            return { kind: "subagent", id: field(event, "subagentRunId") ?? "", opens: false };
        case EventType.STEP_STARTED:
            return { kind: "step", id: step(), opens: true };
        case EventType.STEP_FINISHED:
            return { kind: "step", id: step(), opens: false };
        case EventType.REASONING_START:
            return { kind: "reasoning", id: field(event, "messageId") ?? "", opens: true };
        case EventType.REASONING_END:
            return { kind: "reasoning", id: field(event, "messageId") ?? "", opens: false };
        case EventType.REASONING_MESSAGE_START:
            return { kind: "reasoningMessage", id: field(event, "messageId") ?? "", opens: true };
        case EventType.REASONING_MESSAGE_END:
            return { kind: "reasoningMessage", id: field(event, "messageId") ?? "", opens: false };
        case EventType.TEXT_MESSAGE_START:
            return { kind: "text", id: field(event, "messageId") ?? "", opens: true };
        case EventType.TEXT_MESSAGE_END:
            return { kind: "text", id: field(event, "messageId") ?? "", opens: false };
        case EventType.TOOL_CALL_START:
            return { kind: "toolCall", id: field(event, "toolCallId") ?? "", opens: true };
        case EventType.TOOL_CALL_END:
            return { kind: "toolCall", id: field(event, "toolCallId") ?? "", opens: false };
        default:
            return undefined;
    }
}
const keyOf = (kind, id) => `${kind}:${id}`;
/** The event that closes `block`, carrying what the client needs to match it. */
function closer(block) {
    const { start } = block;
    const subagent = field(start, "subagentRunId");
    const attributed = subagent === undefined ? {} : { subagentRunId: subagent };
    switch (block.kind) {
        case "subagent":
            return { type: EventType.SUBAGENT_FINISHED, subagentRunId: block.id };
        case "step":
            return { type: EventType.STEP_FINISHED, stepName: field(start, "stepName") ?? "", ...attributed };
        case "reasoning":
            return { type: EventType.REASONING_END, messageId: block.id, ...attributed };
        case "reasoningMessage":
            return { type: EventType.REASONING_MESSAGE_END, messageId: block.id, ...attributed };
        case "text":
            return { type: EventType.TEXT_MESSAGE_END, messageId: block.id, ...attributed };
        case "toolCall":
            return { type: EventType.TOOL_CALL_END, toolCallId: block.id, ...attributed };
    }
}
/** The blocks (messages, tool calls, reasoning, steps, subagents) a stream holds open. */
export class OpenBlocks {
    #open = new Map();
    /** Follows one event of the stream. */
    apply(event) {
        if (event.type === EventType.RUN_FINISHED || event.type === EventType.RUN_ERROR) {
            this.#open.clear();
            return;
        }
        const block = blockOf(event);
        if (!block)
            return;
        const key = keyOf(block.kind, block.id);
        if (block.opens)
            this.#open.set(key, { kind: block.kind, id: block.id, start: event });
        else
            this.#open.delete(key);
    }
    /** Whether the start event `event` opens a block that is open already. */
    isOpen(event) {
        const block = blockOf(event);
        return block !== undefined && block.opens && this.#open.has(keyOf(block.kind, block.id));
    }
    /** The end events of the open blocks whose keys are not in `keep`, innermost (latest) first. */
    closersExcept(keep) {
        return [...this.#open.entries()]
            .filter(([key]) => !keep.has(key))
            .reverse()
            .map(([, block]) => closer(block));
    }
    /** The key of the block a start event opens (undefined for any other event). */
    static startKey(event) {
        const block = blockOf(event);
        return block?.opens ? keyOf(block.kind, block.id) : undefined;
    }
}
/**
 * A `MESSAGES_SNAPSHOT` that empties the client's message list before `snapshot` is applied.
 * @ag-ui/client merges a snapshot into what it holds — messages it has keep their place, new ones
 * go at the end — so a history whose order differs from the client's (a message the client holds
 * under another id, a reply between two it has) would be merged out of order. After this one the
 * client holds only messages of roles it keeps as its own when a snapshot has none of them
 * (activity, reasoning): so for each of those roles `snapshot` has, it carries a placeholder of
 * that role, which `snapshot` then removes.
 */
function emptying(snapshot) {
    const messages = (snapshot.messages ?? []).map((m) => m.role);
    const placeholders = [
        ...(messages.includes("activity") ? [{ id: "agui-antigravity:rejoin:activity", role: "activity", activityType: "agui-antigravity:rejoin", content: {} }] : []),
        ...(messages.includes("reasoning") ? [{ id: "agui-antigravity:rejoin:reasoning", role: "reasoning", content: "" }] : []),
    ];
    return { type: EventType.MESSAGES_SNAPSHOT, messages: placeholders };
}
/**
 * Splices a `/connect` stream onto a run whose own stream broke. The connect restates the thread
 * (`RUN_STARTED`, `MESSAGES_SNAPSHOT`, `STATE_SNAPSHOT`), reopens the blocks of a turn still in
 * flight, then streams the turn's live events up to its end. The run already started, so the
 * connect's `RUN_STARTED` is dropped; its history replaces the client's messages (emptied
 * first, so the client ends with the history in its order); a reopened block the client still
 * holds open is not reopened twice; a block the client holds open that the connect does not
 * reopen ended while the stream was broken (the snapshot holds it whole), so it is closed —
 * before the blocks opened meanwhile are opened, and before the live events.
 */
export class Rejoin {
    #open;
    #reopened = new Set();
    /** Starts of blocks opened while the stream was broken, held until the restatement is over. */
    #opened = [];
    #restating = true;
    /** `open`: the run's blocks, which the run goes on updating with every event passed on. */
    constructor(open) {
        this.#open = open;
    }
    /** The events to pass on for one event of the connect stream, in order. */
    take(event) {
        if (!this.#restating)
            return [event];
        if (event.type === EventType.RUN_STARTED)
            return [];
        if (event.type === EventType.MESSAGES_SNAPSHOT)
            return [emptying(event), event];
        if (event.type === EventType.STATE_SNAPSHOT)
            return [event];
        const key = OpenBlocks.startKey(event);
        if (key !== undefined) {
            this.#reopened.add(key);
            if (!this.#open.isOpen(event))
                this.#opened.push(event);
            return [];
        }
        this.#restating = false;
        return [...this.#open.closersExcept(this.#reopened), ...this.#opened.splice(0), event];
    }
}
