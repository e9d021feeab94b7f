/** An HTTP failure of one of the server's routes: its status, and the server's own message. */
export declare class AntigravityHttpError extends Error {
    /** The HTTP status. */
    readonly status: number;
    /** The response body (parsed JSON when it was JSON). */
    readonly payload: unknown;
    /** What the server said (`error` of its JSON body `{"error": "…"}`), when it said it that way. */
    readonly serverMessage: string | undefined;
    /** `route` names the request in the message (`POST …/connect`). */
    constructor(route: string, status: number, payload: unknown);
}
/** `base` with `extra` laid over it, header names compared case-insensitively. */
export declare function withHeaders(base: HeadersInit | undefined, extra: Record<string, string>): Record<string, string>;
/** The headers of a request about `threadId`: `base`, the routing key and the token. */
export declare function requestHeaders(base: HeadersInit | undefined, threadId: string | undefined, authToken: string | undefined): Record<string, string>;
/**
 * The URL of `segments` under the agent's path `agentUrl` (resolved against the page in a
 * browser). Each segment is sent as given: callers percent-encode what they take from users.
 */
export declare function agentRouteUrl(agentUrl: string, segments: string[], query?: Record<string, string | undefined>): string;
/** The error of a response that is not OK: its status and body. Consumes the body. */
export declare function httpError(route: string, response: Response): Promise<AntigravityHttpError>;
/** Whether `error` is the rejection of an aborted request. */
export declare const isAbort: (error: unknown) => boolean;
