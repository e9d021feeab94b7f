import type { BaseEvent } from "@ag-ui/client";
/** The blocks (messages, tool calls, reasoning, steps, subagents) a stream holds open. */
export declare class OpenBlocks {
    #private;
    /** Follows one event of the stream. */
    apply(event: BaseEvent): void;
    /** Whether the start event `event` opens a block that is open already. */
    isOpen(event: BaseEvent): boolean;
    /** The end events of the open blocks whose keys are not in `keep`, innermost (latest) first. */
    closersExcept(keep: ReadonlySet<string>): BaseEvent[];
    /** The key of the block a start event opens (undefined for any other event). */
    static startKey(event: BaseEvent): string | undefined;
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
export declare class Rejoin {
    #private;
    /** `open`: the run's blocks, which the run goes on updating with every event passed on. */
    constructor(open: OpenBlocks);
    /** The events to pass on for one event of the connect stream, in order. */
    take(event: BaseEvent): BaseEvent[];
}
