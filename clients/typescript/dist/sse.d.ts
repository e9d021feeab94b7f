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
