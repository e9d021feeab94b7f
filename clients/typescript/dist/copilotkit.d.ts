import { AgentRunner } from "@copilotkit/runtime/v2";
import type { AgentRunnerConnectRequest, AgentRunnerIsRunningRequest, AgentRunnerRunRequest, AgentRunnerStopRequest, CopilotRuntimeHooks, InMemoryAgentRunnerOptions, LocalThreadEndpointRecord, LocalThreadEndpointRunner } from "@copilotkit/runtime/v2";
import type { AbstractAgent, BaseEvent, Message } from "@ag-ui/client";
import { Observable } from "rxjs";
import type { ThreadChange } from "./threads.js";
/** The agents the runtime serves, as given to `CopilotRuntime` (a record, or a promise of one). */
export type RunnerAgents = Record<string, AbstractAgent> | Promise<Record<string, AbstractAgent>>;
/** Options of an {@link AntigravityRunner}. */
export interface AntigravityRunnerOptions extends InMemoryAgentRunnerOptions {
    /** The runtime's agents; those that are `AntigravityAgent`s get their threads from their server. */
    agents: RunnerAgents;
    /** How many threads' agents are remembered for `stop()` (default 10 000; the oldest go first). */
    maxRememberedThreads?: number;
    /** How many threads' histories are kept for CopilotKit's `/threads/<id>/messages` (default 200; the oldest go first). */
    maxCachedHistories?: number;
    /** How long a thread endpoint waits for the server's first thread list (default 15 000 ms). */
    listTimeoutMs?: number;
}
/** A change to the runtime's thread list, and the agent (its id in the runtime) whose thread it is. */
export type RunnerThreadListener = (change: ThreadChange, agentId: string) => void;
/**
 * A CopilotKit runner (`new CopilotRuntime({ agents, runner: new AntigravityRunner({ agents }) })`)
 * whose `connect` asks an {@link AntigravityAgent}'s server for the thread: its whole history,
 * then the turn in flight if there is one, wherever and whenever the turn started — after a
 * runtime restart, or from another runtime replica. Runs go through CopilotKit's in-memory
 * runner (`InMemoryAgentRunner`, which this one wraps) unchanged; a stop also reaches the server's turn when this runtime is not the one
 * running it (the in-memory runner only knows runs it started). Agents of other kinds keep
 * CopilotKit's in-memory behaviour.
 *
 * It is also CopilotKit's thread backend without CopilotKit Intelligence (a
 * `LocalThreadEndpointRunner`): the runtime's `/threads` endpoints, and so `useThreads()`, list
 * the server's threads of the agent's caller (its token, its identity headers), their messages
 * and state. Pass {@link AntigravityRunner.hooks} to the runtime's handler
 * (`createCopilotNodeListener({ runtime, basePath, hooks: runner.hooks })`) so that renames,
 * archiving and deletes reach the server too, which CopilotKit 1.75 otherwise refuses without
 * Intelligence, and so that the endpoints wait for the server's list instead of answering from
 * a cache not filled yet.
 */
export declare class AntigravityRunner extends AgentRunner implements LocalThreadEndpointRunner {
    /** CopilotKit serves its `/threads` endpoints from this runner (see `LocalThreadEndpointRunner`). */
    readonly ɵsupportsLocalThreadEndpoints: true;
    /**
     * CopilotKit runtime hooks (`createCopilotNodeListener({ runtime, basePath, hooks: runner.hooks })`,
     * or `createCopilotRuntimeHandler`): they answer CopilotKit's thread endpoints for this
     * runner's Antigravity agents from their servers — the list (waiting for the server's first
     * listing, with `includeArchived`, `limit` and `cursor`), a rename or an unarchive
     * (`PATCH /threads/<id>`), an archive (`POST /threads/<id>/archive`), a delete
     * (`DELETE /threads/<id>`) — read a thread's history from its server before
     * `/threads/<id>/messages`, `/events` and `/state` answer, and tell pages (`/info`) that
     * thread mutations are available. Requests about other agents go on to CopilotKit.
     */
    readonly hooks: CopilotRuntimeHooks;
    /** CopilotKit's in-memory runner: every run, and the threads of agents of other kinds. */
    private readonly memory;
    private readonly agents;
    /** The agents once the promise given resolved (the synchronous endpoints need them at once). */
    private resolvedAgents;
    private readonly maxRememberedThreads;
    private readonly maxCachedHistories;
    private readonly listTimeoutMs;
    /** The agent of each thread seen, most recent last, for a stop the in-memory runner cannot serve. */
    private readonly threadAgents;
    /**
     * Each Antigravity agent's thread list, by its id in the runtime. CopilotKit's runtime asks a
     * runner for its threads synchronously (`listThreads()`, `getThreadMessages()`: their
     * results go straight into the response), so they are answered from these copies, which the
     * server's thread events keep current, rather than from a request to the server.
     */
    private readonly lists;
    /** Histories read from the servers (most recent last), for the synchronous message and state getters. */
    private readonly histories;
    /** History reads in flight, by thread id, so concurrent asks share one connect. */
    private readonly historyReads;
    private readonly listeners;
    private closed;
    /** See {@link AntigravityRunnerOptions}. */
    constructor(options: AntigravityRunnerOptions);
    /** A run, through CopilotKit's in-memory runner; the thread's agent is remembered for `stop()`. */
    run(request: AgentRunnerRunRequest): Observable<BaseEvent>;
    /**
     * The thread from its agent's server (`POST <url>/connect`): `RUN_STARTED`, the thread's whole
     * history as `MESSAGES_SNAPSHOT`, its state, then a turn in flight until it ends, or how the
     * thread waits (an interrupt, a frontend tool) — nothing for a thread the server does not
     * know. A thread of another kind of agent is replayed from memory, as CopilotKit does.
     */
    connect(request: AgentRunnerConnectRequest): Observable<BaseEvent>;
    /**
     * Stops the thread's run. A run this runtime started is aborted as CopilotKit does, which
     * stops its turn on the server too (`AntigravityAgent.abortRun`); otherwise the turn on the
     * thread's server is stopped directly (`POST <url>/stop`) — a turn this runtime rejoined
     * through `connect`, started before a restart or by another replica.
     */
    stop(request: AgentRunnerStopRequest): Promise<boolean | undefined>;
    /** Whether a run this runtime started on the thread is in flight. */
    isRunning(request: AgentRunnerIsRunningRequest): Promise<boolean>;
    /**
     * The unarchived threads of every Antigravity agent (from their servers, as last heard; the
     * first call starts following them), newest activity first, and CopilotKit's in-memory
     * threads of other agents. CopilotKit's `GET /threads` answers with it when the
     * {@link AntigravityRunner.hooks} are not installed (they answer with archived ones too).
     */
    listThreads(): LocalThreadEndpointRecord[];
    /**
     * A thread's messages as its server last restated them (on a connect through this runner, or
     * a read by the hooks before `GET /threads/<id>/messages`); CopilotKit's in-memory ones for
     * a thread of another agent.
     */
    getThreadMessages(threadId: string): Message[];
    /** A thread's restated history (`MESSAGES_SNAPSHOT`, `STATE_SNAPSHOT`), as for `getThreadMessages`. */
    getThreadEvents(threadId: string): BaseEvent[];
    /** A thread's state as its server last restated it, as for `getThreadMessages`. */
    getThreadState(threadId: string): Record<string, unknown> | null;
    /**
     * Forgets what this runtime holds: CopilotKit's in-memory threads and the histories read
     * from the servers. The servers' threads are not touched (delete them with `deleteThread`),
     * and their list stays, as it mirrors the servers.
     */
    clearThreads(): void;
    /**
     * Renames a thread on its agent's server (`agentId`: the agent's id in the runtime; the only
     * Antigravity agent if not given) and returns its record. Throws the server's
     * `AntigravityHttpError` (404: no such thread for the agent's caller; 422: a bad title).
     */
    renameThread(threadId: string, name: string, agentId?: string): Promise<LocalThreadEndpointRecord>;
    /** Archives a thread on its server (or brings it back with `archived` false), as `renameThread` does. */
    archiveThread(threadId: string, archived?: boolean, agentId?: string): Promise<LocalThreadEndpointRecord>;
    /** Deletes a thread, its history and workspace on its server: false if the server has no such thread. */
    deleteThread(threadId: string, agentId?: string): Promise<boolean>;
    /**
     * Calls `listener` on every change of the Antigravity agents' thread lists (starting to
     * follow them), e.g. to tell pages to fetch `useThreads()`'s list again; returns its removal.
     */
    subscribeThreads(listener: RunnerThreadListener): () => void;
    /** Resolves once every Antigravity agent's thread list has been read from its server. */
    threadsReady(timeoutMs?: number): Promise<void>;
    /** Stops following the servers' thread events (a runtime that shuts down). */
    close(): void;
    private beforeHandler;
    /** `/info`: thread mutations are served (by the hooks), though CopilotKit says only Intelligence serves them. */
    private afterHandler;
    /** The registered `AntigravityAgent` for `agentId` (the only one if no id is given), with its id. */
    private antigravityAgent;
    private requireAgent;
    private antigravityAgents;
    private ours;
    /** Starts following every Antigravity agent's thread list (once each). */
    private startLists;
    private startKnownLists;
    /** The records of the Antigravity agents' threads that pass `keep` (of `agentId` only, if given). */
    private records;
    /** CopilotKit's in-memory threads of agents that are not Antigravity agents. */
    private otherThreads;
    private sorted;
    /** The Antigravity agent whose list holds `threadId` (the only agent when no list does yet). */
    private ownerOf;
    /** The server's answer to a change this runner made, in the list at once (its event follows). */
    private changed;
    private onChange;
    /** Reads a thread's history from its server (a connect, cut once the state is restated). */
    private readHistory;
    private keepHistory;
    private remember;
}
