import { Observable } from "rxjs";
/** An event the client cannot take (not JSON, no type, or refused by its schema): not a broken stream. */
export declare class InvalidEventError extends Error {
    /** `detail` says what is wrong with the event. */
    constructor(detail: string, options?: {
        cause?: unknown;
    });
}
/**
 * The parsed `data` of every SSE frame of the response `respond()` resolves to, in order; errors
 * with what `respond()` throws, with a frame that is not JSON, or with the body's read error.
 * Unsubscribing cancels the body.
 */
export declare function sseJson(respond: () => Promise<Response>): Observable<unknown>;
/** One Server-Sent Events frame: its `event` name (`message` when it has none) and its `data`. */
export interface SseFrame {
    event: string;
    data: string;
}
/**
 * The frames of an SSE body as they arrive; ends when the body does (an incomplete last frame
 * is discarded), throws the body's read error. Leaving the loop early cancels the body.
 */
export declare function sseFrames(body: ReadableStream<Uint8Array>): AsyncGenerator<SseFrame, void, undefined>;
