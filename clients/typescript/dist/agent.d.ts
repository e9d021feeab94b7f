import { HttpAgent } from "@ag-ui/client";
import type { AgentCapabilities, BaseEvent, Message, RunAgentInput } from "@ag-ui/client";
import { Observable } from "rxjs";
import type { ForkOptions, ForkResult, ThreadBranches } from "./forks.js";
import { AntigravityHttpError } from "./http.js";
import { AntigravityThreads } from "./threads.js";
import type { ThreadSummary } from "./threads.js";
export { AntigravityHttpError };
/** The configuration `HttpAgent` takes (`url`, `headers`, `threadId`, `fetch`, …). */
export type HttpAgentConfig = ConstructorParameters<typeof HttpAgent>[0];
/** How a run whose stream breaks is recovered through `POST <url>/connect`. */
export interface ReconnectOptions {
    /** Connect attempts in a row before the run fails (default 5). */
    attempts?: number;
    /** Wait before the first attempt, doubled for each next one (default 500 ms). */
    delayMs?: number;
}
/** Configuration of an {@link AntigravityAgent}. */
export interface AntigravityAgentConfig extends HttpAgentConfig {
    /** The server's `auth_token`, sent as `Authorization: Bearer …` on every request. */
    authToken?: string;
    /**
     * Recovery of a run whose stream breaks after it started (a network error, a proxy or a
     * replica going away): the agent connects to the thread and carries the run on from the
     * server's history. `false` lets the run fail instead. Default: 5 attempts from 500 ms.
     */
    reconnect?: ReconnectOptions | false;
    /**
     * How long `abortRun()` waits, once the server has stopped the turn, for the run's stream to
     * end with the server's own `RUN_FINISHED` before cutting it (default 3000 ms).
     */
    stopGraceMs?: number;
}
/**
 * An AG-UI agent served by agui-antigravity: an `HttpAgent` (so it registers wherever one does,
 * e.g. in CopilotKit's runtime) that also
 * - reports the server's capabilities (`getCapabilities()`, `GET <url>/capabilities`) and takes
 *   its description from the server's identity;
 * - stops the turn on the server when a run is aborted (`POST <url>/stop`), whatever the
 *   server's `on_disconnect` says;
 * - connects to a thread (`connect()`/`connectAgent()`, `POST <url>/connect`): its whole history,
 *   then a turn in flight;
 * - routes every request by thread (`X-Thread-Id`) and sends the auth token;
 * - reaches the caller's threads and their files (`threads`: list, rename, archive, delete,
 *   watch; list, download, upload);
 * - carries a run on when its stream breaks, through `/connect`, so the client ends on the
 *   server's history instead of a network error;
 * - edits a user message and regenerates an answer (the server forks the thread: the old
 *   branch is kept), optionally rewinding the workspace's files, and lists and switches the
 *   thread's branches.
 */
export declare class AntigravityAgent extends HttpAgent {
    /** The server's `auth_token`, if it needs one. */
    authToken: string | undefined;
    /** The server's description of itself, once `getCapabilities()` has read it. */
    identity: AgentCapabilities["identity"];
    /** How a broken run stream is recovered (`false`: not at all). */
    reconnect: Required<ReconnectOptions> | false;
    /** How long `abortRun()` waits for the server's end of a stopped run. */
    stopGraceMs: number;
    /** Whether the description came from the configuration (then the server's does not replace it). */
    private configuredDescription;
    /** The thread of the run in flight (undefined when none is), for `abortRun()`. */
    private runThread;
    /** See {@link AntigravityAgentConfig}; `url` is the agent's path on the server (`http://host:8027/`). */
    constructor(config: AntigravityAgentConfig);
    /** The URL of one of the agent's routes beside the run (`connect`, `stop`, `capabilities`). */
    routeUrl(route: "connect" | "stop" | "capabilities"): string;
    /** The headers of a request about `threadId`: the agent's own, the routing key and the token. */
    headersFor(threadId: string | undefined, base?: HeadersInit | undefined): Record<string, string>;
    /**
     * The caller's threads on the agent's server and their workspaces' files (list, rename,
     * archive, delete, watch; list, download, upload): an {@link AntigravityThreads} that reads
     * this agent's `url`, `headers`, `authToken` and `fetch` at each request.
     */
    get threads(): AntigravityThreads;
    protected requestInit(input: RunAgentInput): RequestInit;
    /**
     * The server's capabilities (`GET <url>/capabilities`); also sets `identity`, and
     * `description` unless the configuration gave one. Throws {@link AntigravityHttpError}.
     */
    getCapabilities(): Promise<AgentCapabilities>;
    /**
     * Stops the turn in flight on `threadId` on the server (`POST <url>/stop`): true if one was
     * running, false if none was or the server does not know the thread. Throws
     * {@link AntigravityHttpError} on any other failure.
     */
    stopThread(threadId: string): Promise<boolean>;
    /**
     * Aborts the run in flight and stops its turn on the server: the server ends the run with its
     * own `RUN_FINISHED` (outcome `cancelled`), which the stream still delivers; the request is cut
     * once the server says nothing was running, or after `stopGraceMs`. A stop that cannot reach
     * the server is logged, and the request is cut at once. With no run in flight it only aborts
     * the request, as `HttpAgent` does (a turn another client started is not this agent's to stop;
     * `stopThread` stops any).
     */
    abortRun(): void;
    /**
     * The events of a `POST <url>/connect` on `threadId` (history, then a turn in flight, then its
     * end); no events when the server does not know the thread. `headers` replaces the agent's own
     * headers (the routing key and token are added either way); `signal` cancels the request.
     */
    connectThread(threadId: string, options?: {
        runId?: string;
        headers?: Record<string, string>;
        signal?: AbortSignal;
    }): Observable<BaseEvent>;
    /**
     * Edits user message `messageId` to `content` and runs: the message is sent again under its
     * id with the messages after it dropped, so the server forks the thread there (the old
     * branch is kept, see `listBranches`) and the model answers from the history before it.
     * Resolves with the new answer's messages and, with `rewindFiles`, the rewind's report.
     * Throws {@link AntigravityForkError} when the server cannot fork (a turn in flight, the
     * thread waiting for a tool result or an answer…): the thread is unchanged, and so are the
     * agent's messages. A `TypeError` when `messageId` is not one of the agent's user messages.
     * The run is not marked as a regenerate (the changed message is what the server forks on).
     */
    editMessage(messageId: string, content: Message["content"], options?: ForkOptions): Promise<ForkResult>;
    /**
     * Regenerates the answer to a user message and runs: the history up to and including it is
     * sent, so the server forks the thread there (the old answer's branch is kept) and the model
     * answers it again. `messageId` names the user message or a message of its answer (as
     * CopilotKit's regenerate button gives it); without it, the last user message. The run is
     * marked (`forwardedProps.regenerate: true`, beside `options.forwardedProps` and
     * `rewindFiles`), so a server that has not read the thread back yet (restarted, another
     * replica, no `connect` first) forks too instead of taking it for a retry and restating the
     * old answer. Resolves and throws as {@link AntigravityAgent.editMessage}.
     */
    regenerate(messageId?: string, options?: ForkOptions): Promise<ForkResult>;
    /**
     * The thread's branches (`GET <url>/threads/<id>`; the agent's thread by default): the
     * current one's id and the others, oldest first, each with the message where the thread left
     * it. Throws {@link AntigravityHttpError} (404 for a thread the server does not have).
     */
    listBranches(threadId?: string): Promise<ThreadBranches>;
    /**
     * Makes branch `branchId` the thread's current one (`PATCH <url>/threads/<id>`), then, when
     * it is the agent's thread, connects so that the agent's messages are the branch's. The next
     * run continues that branch. Returns the thread as the server has it now. Throws
     * {@link AntigravityHttpError}: 422 for a branch the thread does not have, 409 while it is
     * busy (a run, a turn, something waiting for the client).
     */
    switchBranch(threadId: string, branchId: string): Promise<ThreadSummary>;
    /**
     * Runs on `history` (an edit's or a regenerate's), reading the rewind and a refusal to fork;
     * `regenerate` marks the run as a regenerate.
     */
    private fork;
    /** `connectAgent()`'s stream: `POST <url>/connect`; a thread the server does not know has no history. */
    protected connect(input: RunAgentInput): Observable<BaseEvent>;
    /**
     * A run (`POST <url>`), carried on through `/connect` if its stream breaks once it has
     * started and before it ends: the connect's restatement replaces the messages, what the
     * broken stream left open is closed or continued, and the run ends as the turn does.
     */
    run(input: RunAgentInput): Observable<BaseEvent>;
    /** The events of `POST <url>/connect` with `input`, as the installed client accepts them. */
    private connectEvents;
    /** The events of an SSE response to `fetch(url, init)`; an HTTP error becomes an {@link AntigravityHttpError}. */
    private eventStream;
    /** A copy for another request (CopilotKit's runtime clones each registered agent per request). */
    clone(): AntigravityAgent;
}
