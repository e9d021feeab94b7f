// `AntigravityAgent`: the AG-UI `HttpAgent` of the installed @ag-ui/client (0.0.59, the one
// CopilotKit pins, or 1.x), extended with what an agui-antigravity server offers beside a run.
import { AGUIConnectNotImplementedError, EventType, HttpAgent } from "@ag-ui/client";
import * as agui from "@ag-ui/client";
import type { AgentCapabilities, BaseEvent, Message, RunAgentInput } from "@ag-ui/client";
import { EMPTY, Observable, type Subscription, catchError, map, throwError } from "rxjs";
import { toClientEvent } from "./events.js";
import { AntigravityForkError, editedHistory, forkErrorOf, regenerateHistory, regenerateProps, rewindReportOf } from "./forks.js";
import type { ForkOptions, ForkResult, RewindReport, ThreadBranches } from "./forks.js";
import { OpenBlocks, Rejoin } from "./open-blocks.js";
import { AntigravityHttpError, agentRouteUrl, httpError, isAbort, requestHeaders, withHeaders } from "./http.js";
import { InvalidEventError, sseJson } from "./sse.js";
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

const DEFAULT_RECONNECT: Required<ReconnectOptions> = { attempts: 5, delayMs: 500 };
const DEFAULT_STOP_GRACE_MS = 3000;

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
export class AntigravityAgent extends HttpAgent {
  /** The server's `auth_token`, if it needs one. */
  authToken: string | undefined;
  /** The server's description of itself, once `getCapabilities()` has read it. */
  identity: AgentCapabilities["identity"];
  /** How a broken run stream is recovered (`false`: not at all). */
  reconnect: Required<ReconnectOptions> | false;
  /** How long `abortRun()` waits for the server's end of a stopped run. */
  stopGraceMs: number;
  // Plain (not `#`) private members: `clone()` builds the copy with `Object.create`, which gives
  // it no `#` slots.
  /** Whether the description came from the configuration (then the server's does not replace it). */
  private configuredDescription: boolean;
  /** The thread of the run in flight (undefined when none is), for `abortRun()`. */
  private runThread: string | undefined;

  /** See {@link AntigravityAgentConfig}; `url` is the agent's path on the server (`http://host:8027/`). */
  constructor(config: AntigravityAgentConfig) {
    super(config);
    this.authToken = config.authToken;
    this.identity = undefined;
    this.reconnect = config.reconnect === false ? false : { ...DEFAULT_RECONNECT, ...config.reconnect };
    this.stopGraceMs = config.stopGraceMs ?? DEFAULT_STOP_GRACE_MS;
    this.configuredDescription = config.description !== undefined;
    this.runThread = undefined;
  }

  /** The URL of one of the agent's routes beside the run (`connect`, `stop`, `capabilities`). */
  routeUrl(route: "connect" | "stop" | "capabilities"): string {
    return agentRouteUrl(this.url, [route]);
  }

  /** The headers of a request about `threadId`: the agent's own, the routing key and the token. */
  headersFor(threadId: string | undefined, base: HeadersInit | undefined = this.headers): Record<string, string> {
    return requestHeaders(base, threadId, this.authToken);
  }

  /**
   * The caller's threads on the agent's server and their workspaces' files (list, rename,
   * archive, delete, watch; list, download, upload): an {@link AntigravityThreads} that reads
   * this agent's `url`, `headers`, `authToken` and `fetch` at each request.
   */
  get threads(): AntigravityThreads {
    return new AntigravityThreads(this);
  }

  protected requestInit(input: RunAgentInput): RequestInit {
    const init = super.requestInit(input);
    return { ...init, headers: this.headersFor(input.threadId, init.headers) };
  }

  /**
   * The server's capabilities (`GET <url>/capabilities`); also sets `identity`, and
   * `description` unless the configuration gave one. Throws {@link AntigravityHttpError}.
   */
  async getCapabilities(): Promise<AgentCapabilities> {
    const url = this.routeUrl("capabilities");
    const response = await this.fetch(url, { method: "GET", headers: this.headersFor(undefined, { ...this.headers, Accept: "application/json" }) });
    if (!response.ok) throw await httpError(`GET ${url}`, response);
    const capabilities = (await response.json()) as AgentCapabilities;
    this.identity = capabilities.identity;
    if (!this.configuredDescription && typeof capabilities.identity?.description === "string") {
      this.description = capabilities.identity.description;
    }
    return capabilities;
  }

  /**
   * Stops the turn in flight on `threadId` on the server (`POST <url>/stop`): true if one was
   * running, false if none was or the server does not know the thread. Throws
   * {@link AntigravityHttpError} on any other failure.
   */
  async stopThread(threadId: string): Promise<boolean> {
    const url = this.routeUrl("stop");
    const response = await this.fetch(url, {
      method: "POST",
      headers: this.headersFor(threadId, { ...this.headers, "Content-Type": "application/json" }),
      body: JSON.stringify({ threadId }),
    });
    if (response.status === 404) return false;
    if (!response.ok) throw await httpError(`POST ${url}`, response);
    const body = (await response.json()) as { stopped?: unknown };
    return body.stopped === true;
  }

  /**
   * Aborts the run in flight and stops its turn on the server: the server ends the run with its
   * own `RUN_FINISHED` (outcome `cancelled`), which the stream still delivers; the request is cut
   * once the server says nothing was running, or after `stopGraceMs`. A stop that cannot reach
   * the server is logged, and the request is cut at once. With no run in flight it only aborts
   * the request, as `HttpAgent` does (a turn another client started is not this agent's to stop;
   * `stopThread` stops any).
   */
  abortRun(): void {
    const controller = this.abortController;
    const threadId = this.runThread;
    const cut = () => {
      if (this.abortController === controller) super.abortRun();
      else controller.abort();
    };
    if (controller.signal.aborted) return;
    if (threadId === undefined) {
      cut();
      return;
    }
    const timer = setTimeout(cut, this.stopGraceMs);
    (timer as { unref?: () => void }).unref?.();
    this.stopThread(threadId).then(
      (stopped) => {
        if (!stopped) cut();
      },
      (error: unknown) => {
        console.warn(`AntigravityAgent: could not stop the turn of thread ${threadId} on the server:`, error);
        cut();
      },
    );
  }

  /**
   * The events of a `POST <url>/connect` on `threadId` (history, then a turn in flight, then its
   * end); no events when the server does not know the thread. `headers` replaces the agent's own
   * headers (the routing key and token are added either way); `signal` cancels the request.
   */
  connectThread(threadId: string, options: { runId?: string; headers?: Record<string, string>; signal?: AbortSignal } = {}): Observable<BaseEvent> {
    return this.connectEvents(
      {
        threadId,
        runId: options.runId ?? `connect-${agui.randomUUID()}`,
        messages: [],
        tools: [],
        context: [],
        state: {},
        forwardedProps: {},
      },
      options.headers ?? this.headers,
      options.signal ?? this.abortController.signal,
    ).pipe(
      // An unknown thread has no history: nothing to restate.
      catchError((error: unknown) => (error instanceof AntigravityHttpError && error.status === 404 ? EMPTY : throwError(() => error))),
    );
  }

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
  async editMessage(messageId: string, content: Message["content"], options: ForkOptions = {}): Promise<ForkResult> {
    return this.fork(editedHistory(this.messages, messageId, content), options, false);
  }

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
  async regenerate(messageId?: string, options: ForkOptions = {}): Promise<ForkResult> {
    return this.fork(regenerateHistory(this.messages, messageId), options, true);
  }

  /**
   * The thread's branches (`GET <url>/threads/<id>`; the agent's thread by default): the
   * current one's id and the others, oldest first, each with the message where the thread left
   * it. Throws {@link AntigravityHttpError} (404 for a thread the server does not have).
   */
  listBranches(threadId: string = this.threadId): Promise<ThreadBranches> {
    return this.threads.listBranches(threadId);
  }

  /**
   * Makes branch `branchId` the thread's current one (`PATCH <url>/threads/<id>`), then, when
   * it is the agent's thread, connects so that the agent's messages are the branch's. The next
   * run continues that branch. Returns the thread as the server has it now. Throws
   * {@link AntigravityHttpError}: 422 for a branch the thread does not have, 409 while it is
   * busy (a run, a turn, something waiting for the client).
   */
  async switchBranch(threadId: string, branchId: string): Promise<ThreadSummary> {
    const thread = await this.threads.switchBranch(threadId, branchId);
    if (threadId === this.threadId) {
      this.setMessages([]);
      await this.connectAgent();
    }
    return thread;
  }

  /**
   * Runs on `history` (an edit's or a regenerate's), reading the rewind and a refusal to fork;
   * `regenerate` marks the run as a regenerate.
   */
  private async fork(history: Message[], options: ForkOptions, regenerate: boolean): Promise<ForkResult> {
    const before = this.messages;
    let rewind: RewindReport | undefined;
    let refused: AntigravityForkError | undefined;
    this.setMessages(history);
    const props = { ...options.forwardedProps, ...(options.rewindFiles === undefined ? {} : { rewindFiles: options.rewindFiles }) };
    const forwardedProps = regenerate ? regenerateProps(props) : props;
    const { newMessages } = await this.runAgent(
      { forwardedProps },
      {
        onCustomEvent: ({ event }) => {
          const report = rewindReportOf(event);
          if (!report) return;
          rewind = report;
          options.onRewind?.(report);
        },
        onRunErrorEvent: ({ event }) => {
          refused ??= forkErrorOf(event);
        },
      },
    );
    if (refused) {
      // The server changed nothing: neither does the agent.
      this.setMessages(before);
      throw refused;
    }
    return { newMessages, rewind };
  }

  /** `connectAgent()`'s stream: `POST <url>/connect`; a thread the server does not know has no history. */
  protected connect(input: RunAgentInput): Observable<BaseEvent> {
    return this.connectEvents(input, this.headers, this.abortController.signal).pipe(
      catchError((error: unknown) =>
        throwError(() => (error instanceof AntigravityHttpError && (error.status === 404 || error.status === 405) ? new AGUIConnectNotImplementedError() : error)),
      ),
    );
  }

  /**
   * A run (`POST <url>`), carried on through `/connect` if its stream breaks once it has
   * started and before it ends: the connect's restatement replaces the messages, what the
   * broken stream left open is closed or continued, and the run ends as the turn does.
   */
  run(input: RunAgentInput): Observable<BaseEvent> {
    const enforce = (agui as unknown as { enforceOutgoingInput?: (input: RunAgentInput) => RunAgentInput }).enforceOutgoingInput;
    const signal = this.abortController.signal;
    return new Observable<BaseEvent>((subscriber) => {
      this.runThread = input.threadId;
      const open = new OpenBlocks();
      let started = false;
      let ended = false;
      let failures = 0;
      let current: Subscription | undefined;
      let retry: ReturnType<typeof setTimeout> | undefined;

      const follow = (events: Observable<BaseEvent>, rejoin: Rejoin | undefined) => {
        current = events.subscribe({
          next: (event) => {
            if (rejoin && event.type === EventType.RUN_STARTED) failures = 0;
            for (const passed of rejoin ? rejoin.take(event) : [event]) {
              if (passed.type === EventType.RUN_STARTED) started = true;
              if (passed.type === EventType.RUN_FINISHED || passed.type === EventType.RUN_ERROR) ended = true;
              open.apply(passed);
              subscriber.next(passed);
            }
          },
          error: (error: unknown) => broken(error, rejoin !== undefined),
          complete: () => (ended || !started ? subscriber.complete() : broken(new Error("the run's stream ended before the run did"), rejoin !== undefined)),
        });
      };

      const broken = (error: unknown, whileRejoining: boolean) => {
        if (isAbort(error) || signal.aborted) {
          // As the stock HttpAgent reports an aborted request.
          subscriber.next({ type: EventType.RUN_ERROR, message: "Request aborted", code: "abort" } as BaseEvent);
          subscriber.complete();
          return;
        }
        const recoverable =
          this.reconnect !== false &&
          started &&
          !ended &&
          // What the server sent cannot be read: a new stream would not read better.
          !(error instanceof InvalidEventError) &&
          // The run's own request answered with an error: there is no run to carry on.
          (whileRejoining || !(error instanceof AntigravityHttpError)) &&
          // The thread went away (its owner changed, or it was deleted).
          !(error instanceof AntigravityHttpError && error.status >= 400 && error.status < 500);
        if (!recoverable || this.reconnect === false || failures >= this.reconnect.attempts) {
          subscriber.error(
            whileRejoining && error instanceof Error
              ? new Error(
                  `the run's stream broke, and connecting to thread ${input.threadId} to carry it on failed after ${failures} attempt${failures === 1 ? "" : "s"}: ${error.message}`,
                  { cause: error },
                )
              : error,
          );
          return;
        }
        const delay = this.reconnect.delayMs * 2 ** failures;
        failures += 1;
        retry = setTimeout(() => {
          retry = undefined;
          follow(this.connectEvents(input, this.headers, signal), new Rejoin(open));
        }, delay);
      };

      follow(this.eventStream(this.url, this.requestInit(enforce ? enforce(input) : input), "POST " + this.url), undefined);
      return () => {
        if (retry !== undefined) clearTimeout(retry);
        current?.unsubscribe();
        if (this.runThread === input.threadId) this.runThread = undefined;
      };
    });
  }

  /** The events of `POST <url>/connect` with `input`, as the installed client accepts them. */
  private connectEvents(input: RunAgentInput, headers: HeadersInit, signal: AbortSignal): Observable<BaseEvent> {
    const url = this.routeUrl("connect");
    const init = super.requestInit(input);
    return this.eventStream(url, { ...init, headers: this.headersFor(input.threadId, withHeaders(headers, { "Content-Type": "application/json", Accept: "text/event-stream" })), signal }, `POST ${url}`);
  }

  /** The events of an SSE response to `fetch(url, init)`; an HTTP error becomes an {@link AntigravityHttpError}. */
  private eventStream(url: string, init: RequestInit, route: string): Observable<BaseEvent> {
    return sseJson(async () => {
      const response = await this.fetch(url, init);
      if (!response.ok) throw await httpError(route, response);
      return response;
    }).pipe(map(toClientEvent));
  }

  /** A copy for another request (CopilotKit's runtime clones each registered agent per request). */
  clone(): AntigravityAgent {
    const cloned = super.clone() as AntigravityAgent;
    cloned.authToken = this.authToken;
    cloned.identity = this.identity;
    cloned.reconnect = this.reconnect === false ? false : { ...this.reconnect };
    cloned.stopGraceMs = this.stopGraceMs;
    cloned.configuredDescription = this.configuredDescription;
    cloned.runThread = undefined;
    return cloned;
  }
}
