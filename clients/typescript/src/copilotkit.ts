// `AntigravityRunner`: the runner of CopilotKit's v2 runtime (its `runner` option) for
// agui-antigravity agents. CopilotKit's default runner replays threads from its own memory, so a
// thread's history is lost when the runtime restarts and unseen by another runtime replica; this
// one asks the agent's server, which keeps every thread, and serves CopilotKit's thread
// endpoints (`/threads`, `useThreads()`) from the server's thread list.
import { AgentRunner, InMemoryAgentRunner } from "@copilotkit/runtime/v2";
import type {
  AgentRunnerConnectRequest,
  AgentRunnerIsRunningRequest,
  AgentRunnerRunRequest,
  AgentRunnerStopRequest,
  CopilotRuntimeHooks,
  HandlerHookContext,
  InMemoryAgentRunnerOptions,
  LocalThreadEndpointRecord,
  LocalThreadEndpointRunner,
  ResponseHookContext,
} from "@copilotkit/runtime/v2";
import type { AbstractAgent, BaseEvent, Message } from "@ag-ui/client";
import { EventType } from "@ag-ui/client";
import { Observable, defer, from, lastValueFrom, switchMap, takeWhile, tap, toArray } from "rxjs";
import { AntigravityAgent } from "./agent.js";
import { AntigravityHttpError } from "./http.js";
import { ThreadListCache } from "./thread-cache.js";
import type { ThreadChange, ThreadSummary } from "./threads.js";

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

/** A thread's history as the server restated it on the last connect. */
interface ThreadHistory {
  agentId: string;
  messages: Message[];
  state: Record<string, unknown> | null;
  events: BaseEvent[];
  /** The thread's `messageCount` when it was read, to see when it is stale. */
  messageCount: number | undefined;
  /** The thread's current branch when it was read: a switch or a fork makes it stale whatever the count. */
  branch: string | undefined;
}

/** A change to the runtime's thread list, and the agent (its id in the runtime) whose thread it is. */
export type RunnerThreadListener = (change: ThreadChange, agentId: string) => void;

/** The record CopilotKit's thread endpoints answer with, of one of the server's threads. */
function threadRecord(agentId: string, thread: ThreadSummary): LocalThreadEndpointRecord {
  return {
    id: thread.id,
    name: thread.title === "" ? null : thread.title,
    agentId,
    organizationId: "",
    createdById: "",
    archived: thread.archived,
    createdAt: thread.createdAt,
    updatedAt: thread.updatedAt,
  };
}

/** A JSON response, thrown from a hook to answer the request (CopilotKit's documented short-circuit). */
const answer = (body: unknown, status = 200) => Response.json(body, { status });

/** The response of a failed request to the agent's server: its status and message, for the page. */
function failure(error: unknown): Response {
  if (error instanceof AntigravityHttpError) return answer({ error: error.serverMessage ?? error.message }, error.status);
  return answer({ error: `the agent's server could not be reached: ${error instanceof Error ? error.message : String(error)}` }, 502);
}

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
export class AntigravityRunner extends AgentRunner implements LocalThreadEndpointRunner {
  /** CopilotKit serves its `/threads` endpoints from this runner (see `LocalThreadEndpointRunner`). */
  readonly ɵsupportsLocalThreadEndpoints = true as const;
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
  private readonly memory: InMemoryAgentRunner;
  private readonly agents: RunnerAgents;
  /** The agents once the promise given resolved (the synchronous endpoints need them at once). */
  private resolvedAgents: Record<string, AbstractAgent> | undefined;
  private readonly maxRememberedThreads: number;
  private readonly maxCachedHistories: number;
  private readonly listTimeoutMs: number;
  /** The agent of each thread seen, most recent last, for a stop the in-memory runner cannot serve. */
  private readonly threadAgents = new Map<string, AntigravityAgent>();
  /**
   * Each Antigravity agent's thread list, by its id in the runtime. CopilotKit's runtime asks a
   * runner for its threads synchronously (`listThreads()`, `getThreadMessages()`: their
   * results go straight into the response), so they are answered from these copies, which the
   * server's thread events keep current, rather than from a request to the server.
   */
  private readonly lists = new Map<string, ThreadListCache>();
  /** Histories read from the servers (most recent last), for the synchronous message and state getters. */
  private readonly histories = new Map<string, ThreadHistory>();
  /** History reads in flight, by thread id, so concurrent asks share one connect. */
  private readonly historyReads = new Map<string, Promise<ThreadHistory | undefined>>();
  private readonly listeners = new Set<RunnerThreadListener>();
  private closed = false;

  /** See {@link AntigravityRunnerOptions}. */
  constructor(options: AntigravityRunnerOptions) {
    const { agents, maxRememberedThreads, maxCachedHistories, listTimeoutMs, ...inMemory } = options;
    super();
    this.memory = new InMemoryAgentRunner(inMemory);
    this.agents = agents;
    this.maxRememberedThreads = maxRememberedThreads ?? 10_000;
    this.maxCachedHistories = maxCachedHistories ?? 200;
    this.listTimeoutMs = listTimeoutMs ?? 15_000;
    if (agents instanceof Promise) {
      agents.then(
        (resolved) => (this.resolvedAgents = resolved),
        () => undefined,
      );
    } else {
      this.resolvedAgents = agents;
    }
    this.hooks = {
      onBeforeHandler: (context) => this.beforeHandler(context),
      onResponse: (context) => this.afterHandler(context),
    };
  }

  /** A run, through CopilotKit's in-memory runner; the thread's agent is remembered for `stop()`. */
  run(request: AgentRunnerRunRequest): Observable<BaseEvent> {
    if (request.agent instanceof AntigravityAgent) this.remember(request.threadId, request.agent);
    return this.memory.run(request);
  }

  /**
   * The thread from its agent's server (`POST <url>/connect`): `RUN_STARTED`, the thread's whole
   * history as `MESSAGES_SNAPSHOT`, its state, then a turn in flight until it ends, or how the
   * thread waits (an interrupt, a frontend tool) — nothing for a thread the server does not
   * know. A thread of another kind of agent is replayed from memory, as CopilotKit does.
   */
  connect(request: AgentRunnerConnectRequest): Observable<BaseEvent> {
    return defer(() => from(this.antigravityAgent(request.agentId))).pipe(
      switchMap((found) => {
        if (!found) return this.memory.connect(request);
        const [agentId, agent] = found;
        this.remember(request.threadId, agent);
        const seen: BaseEvent[] = [];
        return agent.connectThread(request.threadId, { headers: request.headers ?? agent.headers }).pipe(
          // The restatement also answers CopilotKit's `/threads/<id>/messages` and `/state`.
          tap((event) => {
            if (event.type === EventType.MESSAGES_SNAPSHOT || event.type === EventType.STATE_SNAPSHOT) {
              seen.push(event);
              if (event.type === EventType.STATE_SNAPSHOT) this.keepHistory(request.threadId, agentId, seen);
            }
          }),
        );
      }),
    );
  }

  /**
   * Stops the thread's run. A run this runtime started is aborted as CopilotKit does, which
   * stops its turn on the server too (`AntigravityAgent.abortRun`); otherwise the turn on the
   * thread's server is stopped directly (`POST <url>/stop`) — a turn this runtime rejoined
   * through `connect`, started before a restart or by another replica.
   */
  async stop(request: AgentRunnerStopRequest): Promise<boolean | undefined> {
    if (await this.memory.stop(request)) return true;
    const agent = this.threadAgents.get(request.threadId);
    if (!agent) return false;
    return agent.stopThread(request.threadId);
  }

  /** Whether a run this runtime started on the thread is in flight. */
  isRunning(request: AgentRunnerIsRunningRequest): Promise<boolean> {
    return this.memory.isRunning(request);
  }

  // ------------------------------------------------------------ CopilotKit's thread endpoints

  /**
   * The unarchived threads of every Antigravity agent (from their servers, as last heard; the
   * first call starts following them), newest activity first, and CopilotKit's in-memory
   * threads of other agents. CopilotKit's `GET /threads` answers with it when the
   * {@link AntigravityRunner.hooks} are not installed (they answer with archived ones too).
   */
  listThreads(): LocalThreadEndpointRecord[] {
    const ours = this.records((thread) => !thread.archived);
    return this.sorted([...ours, ...this.otherThreads()]);
  }

  /**
   * A thread's messages as its server last restated them (on a connect through this runner, or
   * a read by the hooks before `GET /threads/<id>/messages`); CopilotKit's in-memory ones for
   * a thread of another agent.
   */
  getThreadMessages(threadId: string): Message[] {
    const history = this.histories.get(threadId);
    return history ? [...history.messages] : this.memory.getThreadMessages(threadId);
  }

  /** A thread's restated history (`MESSAGES_SNAPSHOT`, `STATE_SNAPSHOT`), as for `getThreadMessages`. */
  getThreadEvents(threadId: string): BaseEvent[] {
    const history = this.histories.get(threadId);
    return history ? [...history.events] : this.memory.getThreadEvents(threadId);
  }

  /** A thread's state as its server last restated it, as for `getThreadMessages`. */
  getThreadState(threadId: string): Record<string, unknown> | null {
    const history = this.histories.get(threadId);
    return history ? history.state : this.memory.getThreadState(threadId);
  }

  /**
   * Forgets what this runtime holds: CopilotKit's in-memory threads and the histories read
   * from the servers. The servers' threads are not touched (delete them with `deleteThread`),
   * and their list stays, as it mirrors the servers.
   */
  clearThreads(): void {
    this.memory.clearThreads();
    this.histories.clear();
  }

  // ------------------------------------------------------------------------- thread changes

  /**
   * Renames a thread on its agent's server (`agentId`: the agent's id in the runtime; the only
   * Antigravity agent if not given) and returns its record. Throws the server's
   * `AntigravityHttpError` (404: no such thread for the agent's caller; 422: a bad title).
   */
  async renameThread(threadId: string, name: string, agentId?: string): Promise<LocalThreadEndpointRecord> {
    const [id, agent] = await this.requireAgent(agentId);
    return this.changed(id, await agent.threads.renameThread(threadId, name));
  }

  /** Archives a thread on its server (or brings it back with `archived` false), as `renameThread` does. */
  async archiveThread(threadId: string, archived = true, agentId?: string): Promise<LocalThreadEndpointRecord> {
    const [id, agent] = await this.requireAgent(agentId);
    return this.changed(id, await agent.threads.archiveThread(threadId, archived));
  }

  /** Deletes a thread, its history and workspace on its server: false if the server has no such thread. */
  async deleteThread(threadId: string, agentId?: string): Promise<boolean> {
    const [id, agent] = await this.requireAgent(agentId);
    const deleted = await agent.threads.deleteThread(threadId);
    if (deleted) this.lists.get(id)?.apply({ type: "deleted", thread: { id: threadId } });
    this.histories.delete(threadId);
    return deleted;
  }

  /**
   * Calls `listener` on every change of the Antigravity agents' thread lists (starting to
   * follow them), e.g. to tell pages to fetch `useThreads()`'s list again; returns its removal.
   */
  subscribeThreads(listener: RunnerThreadListener): () => void {
    this.listeners.add(listener);
    void this.startLists();
    return () => this.listeners.delete(listener);
  }

  /** Resolves once every Antigravity agent's thread list has been read from its server. */
  async threadsReady(timeoutMs = this.listTimeoutMs): Promise<void> {
    await this.startLists();
    await Promise.all([...this.lists.values()].map((list) => list.ready(timeoutMs)));
  }

  /** Stops following the servers' thread events (a runtime that shuts down). */
  close(): void {
    this.closed = true;
    for (const list of this.lists.values()) list.close();
  }

  // -------------------------------------------------------------------------------- hooks

  private async beforeHandler({ request, route, runtime }: HandlerHookContext): Promise<void> {
    if (runtime.runner !== this) return;
    switch (route.method) {
      case "threads/list": {
        const query = new URL(request.url).searchParams;
        const agentId = query.get("agentId");
        const agents = await this.antigravityAgents();
        if (agentId && !agents.has(agentId)) return;
        try {
          await this.startLists();
          await Promise.all([...this.lists].filter(([id]) => !agentId || id === agentId).map(([, list]) => list.ready(this.listTimeoutMs)));
        } catch (error) {
          throw failure(error);
        }
        const archived = query.get("includeArchived") === "true";
        const records = this.records((thread) => archived || !thread.archived, agentId ?? undefined);
        const all = agentId ? records : this.sorted([...records, ...this.otherThreads()]);
        const limit = Number(query.get("limit") ?? "") || all.length;
        const offset = Number(query.get("cursor") ?? "0") || 0;
        const page = all.slice(offset, offset + limit);
        throw answer({ threads: page, nextCursor: offset + limit < all.length ? String(offset + limit) : null });
      }
      case "threads/update":
      case "threads/archive": {
        const body = (await request
          .clone()
          .json()
          .catch(() => ({}))) as { agentId?: unknown; name?: unknown; archived?: unknown };
        const agentId = typeof body.agentId === "string" ? body.agentId : undefined;
        const found = await this.antigravityAgent(agentId);
        if (!found) return;
        const threadId = route.threadId;
        try {
          if (route.method === "threads/archive") {
            await this.archiveThread(threadId, true, found[0]);
            throw answer({ threadId, archived: true });
          }
          if (request.method.toUpperCase() === "DELETE") {
            if (!(await this.deleteThread(threadId, found[0]))) throw answer({ error: `no thread ${threadId}` }, 404);
            throw answer({ threadId, deleted: true });
          }
          const update: { title?: string; archived?: boolean } = {};
          if (typeof body.name === "string") update.title = body.name;
          if (typeof body.archived === "boolean") update.archived = body.archived;
          if (update.title === undefined && update.archived === undefined) throw answer({ error: "nothing to change: give a name or archived" }, 400);
          const thread = await found[1].threads.updateThread(threadId, update);
          throw answer(this.changed(found[0], thread));
        } catch (error) {
          throw error instanceof Response ? error : failure(error);
        }
      }
      case "threads/messages":
      case "threads/events":
      case "threads/state": {
        const owner = await this.ownerOf(route.threadId);
        if (!owner) return;
        try {
          await this.readHistory(route.threadId, owner[0], owner[1]);
        } catch (error) {
          throw failure(error);
        }
        return;
      }
      default:
        return;
    }
  }

  /** `/info`: thread mutations are served (by the hooks), though CopilotKit says only Intelligence serves them. */
  private async afterHandler({ route, response, runtime }: ResponseHookContext): Promise<Response | void> {
    if (runtime.runner !== this || route.method !== "info" || !response.ok) return;
    if ((await this.antigravityAgents()).size === 0) return;
    const info = (await response.clone().json()) as { threadEndpoints?: { list?: boolean; mutations?: boolean }; singleRoute?: { threadEndpoints?: { list?: boolean; mutations?: boolean } } };
    let changed = false;
    for (const endpoints of [info.threadEndpoints, info.singleRoute?.threadEndpoints]) {
      if (endpoints?.list === true && endpoints.mutations === false) {
        endpoints.mutations = true;
        changed = true;
      }
    }
    if (!changed) return;
    const headers = new Headers(response.headers);
    headers.delete("content-length");
    return new Response(JSON.stringify(info), { status: response.status, statusText: response.statusText, headers });
  }

  // ------------------------------------------------------------------------------- helpers

  /** The registered `AntigravityAgent` for `agentId` (the only one if no id is given), with its id. */
  private async antigravityAgent(agentId: string | undefined): Promise<[string, AntigravityAgent] | undefined> {
    const ours = await this.antigravityAgents();
    if (agentId !== undefined) {
      const agent = ours.get(agentId);
      return agent ? [agentId, agent] : undefined;
    }
    return ours.size === 1 ? [...ours][0] : undefined;
  }

  private async requireAgent(agentId: string | undefined): Promise<[string, AntigravityAgent]> {
    const found = await this.antigravityAgent(agentId);
    if (!found) throw new Error(agentId === undefined ? "name the agent: the runtime has several Antigravity agents, or none" : `${agentId} is not an Antigravity agent of this runtime`);
    return found;
  }

  private async antigravityAgents(): Promise<Map<string, AntigravityAgent>> {
    return this.ours(await this.agents);
  }

  private ours(agents: Record<string, AbstractAgent>): Map<string, AntigravityAgent> {
    return new Map(Object.entries(agents).filter((entry): entry is [string, AntigravityAgent] => entry[1] instanceof AntigravityAgent));
  }

  /** Starts following every Antigravity agent's thread list (once each). */
  private async startLists(): Promise<void> {
    this.startKnownLists();
    if (!this.resolvedAgents) {
      this.resolvedAgents = await this.agents;
      this.startKnownLists();
    }
  }

  private startKnownLists(): void {
    if (!this.resolvedAgents || this.closed) return;
    for (const [agentId, agent] of this.ours(this.resolvedAgents)) {
      if (this.lists.has(agentId)) continue;
      const list = new ThreadListCache(agent.threads, agentId);
      list.subscribe((change) => this.onChange(agentId, change));
      this.lists.set(agentId, list);
      list.start();
    }
  }

  /** The records of the Antigravity agents' threads that pass `keep` (of `agentId` only, if given). */
  private records(keep: (thread: ThreadSummary) => boolean, agentId?: string): LocalThreadEndpointRecord[] {
    this.startKnownLists();
    const records: LocalThreadEndpointRecord[] = [];
    for (const [id, list] of this.lists) {
      if (agentId !== undefined && id !== agentId) continue;
      for (const thread of list.list()) if (keep(thread)) records.push(threadRecord(id, thread));
    }
    return this.sorted(records);
  }

  /** CopilotKit's in-memory threads of agents that are not Antigravity agents. */
  private otherThreads(): LocalThreadEndpointRecord[] {
    const ours = this.resolvedAgents ? this.ours(this.resolvedAgents) : new Map();
    return this.memory.listThreads().filter((thread) => !ours.has(thread.agentId));
  }

  private sorted(records: LocalThreadEndpointRecord[]): LocalThreadEndpointRecord[] {
    return records.sort((a, b) => (a.updatedAt === b.updatedAt ? a.id.localeCompare(b.id) : a.updatedAt < b.updatedAt ? 1 : -1));
  }

  /** The Antigravity agent whose list holds `threadId` (the only agent when no list does yet). */
  private async ownerOf(threadId: string): Promise<[string, AntigravityAgent] | undefined> {
    const agents = await this.antigravityAgents();
    for (const [agentId, list] of this.lists) if (list.get(threadId)) return [agentId, agents.get(agentId)!];
    const history = this.histories.get(threadId);
    if (history && agents.has(history.agentId)) return [history.agentId, agents.get(history.agentId)!];
    return agents.size === 1 ? [...agents][0] : undefined;
  }

  /** The server's answer to a change this runner made, in the list at once (its event follows). */
  private changed(agentId: string, thread: ThreadSummary): LocalThreadEndpointRecord {
    this.lists.get(agentId)?.apply({ type: "updated", thread });
    return threadRecord(agentId, thread);
  }

  private onChange(agentId: string, change: ThreadChange): void {
    const history = this.histories.get(change.thread.id);
    if (history && history.agentId === agentId) {
      if (change.type === "deleted") this.histories.delete(change.thread.id);
      // A cached history that a new message, a fork or a branch switch made stale is read again,
      // so the synchronous getters stay current.
      else if ((history.messageCount !== change.thread.messageCount || history.branch !== change.thread.branch) && !this.historyReads.has(change.thread.id)) {
        const agent = this.resolvedAgents?.[agentId];
        if (agent instanceof AntigravityAgent) this.readHistory(change.thread.id, agentId, agent).catch(() => undefined);
      }
    }
    for (const listener of this.listeners) {
      try {
        listener(change, agentId);
      } catch (error) {
        console.warn("AntigravityRunner: a thread listener failed:", error);
      }
    }
  }

  /** Reads a thread's history from its server (a connect, cut once the state is restated). */
  private readHistory(threadId: string, agentId: string, agent: AntigravityAgent): Promise<ThreadHistory | undefined> {
    const inFlight = this.historyReads.get(threadId);
    if (inFlight) return inFlight;
    const read = lastValueFrom(
      agent.connectThread(threadId, { headers: agent.headers }).pipe(
        // Only the restatement: a turn in flight would keep the connect open until it ends.
        takeWhile((event) => event.type !== EventType.STATE_SNAPSHOT, true),
        toArray(),
      ),
      { defaultValue: [] as BaseEvent[] },
    )
      .then((events) => this.keepHistory(threadId, agentId, events))
      .finally(() => this.historyReads.delete(threadId));
    this.historyReads.set(threadId, read);
    return read;
  }

  private keepHistory(threadId: string, agentId: string, events: BaseEvent[]): ThreadHistory {
    const snapshot = events.find((event) => event.type === EventType.MESSAGES_SNAPSHOT) as (BaseEvent & { messages?: Message[] }) | undefined;
    const state = events.find((event) => event.type === EventType.STATE_SNAPSHOT) as (BaseEvent & { snapshot?: unknown }) | undefined;
    const history: ThreadHistory = {
      agentId,
      messages: snapshot?.messages ?? [],
      state: state && typeof state.snapshot === "object" && state.snapshot !== null && !Array.isArray(state.snapshot) ? (state.snapshot as Record<string, unknown>) : null,
      events: events.filter((event) => event.type === EventType.MESSAGES_SNAPSHOT || event.type === EventType.STATE_SNAPSHOT),
      messageCount: this.lists.get(agentId)?.get(threadId)?.messageCount,
      branch: this.lists.get(agentId)?.get(threadId)?.branch,
    };
    this.histories.delete(threadId);
    this.histories.set(threadId, history);
    while (this.histories.size > this.maxCachedHistories) {
      const oldest = this.histories.keys().next().value;
      if (oldest === undefined) break;
      this.histories.delete(oldest);
    }
    return history;
  }

  private remember(threadId: string, agent: AntigravityAgent): void {
    this.threadAgents.delete(threadId);
    this.threadAgents.set(threadId, agent);
    while (this.threadAgents.size > this.maxRememberedThreads) {
      const oldest = this.threadAgents.keys().next().value;
      if (oldest === undefined) break;
      this.threadAgents.delete(oldest);
    }
  }
}
