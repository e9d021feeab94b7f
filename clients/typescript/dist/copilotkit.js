// `AntigravityRunner`: the runner of CopilotKit's v2 runtime (its `runner` option) for
// agui-antigravity agents. CopilotKit's default runner replays threads from its own memory, so a
// thread's history is lost when the runtime restarts and unseen by another runtime replica; this
// one asks the agent's server, which keeps every thread, and serves CopilotKit's thread
// endpoints (`/threads`, `useThreads()`) from the server's thread list.
import { AgentRunner, InMemoryAgentRunner } from "@copilotkit/runtime/v2";
import { EventType } from "@ag-ui/client";
import { defer, from, lastValueFrom, switchMap, takeWhile, tap, toArray } from "rxjs";
import { AntigravityAgent } from "./agent.js";
import { AntigravityHttpError } from "./http.js";
import { ThreadListCache } from "./thread-cache.js";
/** The record CopilotKit's thread endpoints answer with, of one of the server's threads. */
function threadRecord(agentId, thread) {
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
const answer = (body, status = 200) => Response.json(body, { status });
/** The response of a failed request to the agent's server: its status and message, for the page. */
function failure(error) {
    if (error instanceof AntigravityHttpError)
        return answer({ error: error.serverMessage ?? error.message }, error.status);
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
export class AntigravityRunner extends AgentRunner {
    /** CopilotKit serves its `/threads` endpoints from this runner (see `LocalThreadEndpointRunner`). */
    ɵsupportsLocalThreadEndpoints = true;
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
    hooks;
    /** CopilotKit's in-memory runner: every run, and the threads of agents of other kinds. */
    memory;
    agents;
    /** The agents once the promise given resolved (the synchronous endpoints need them at once). */
    resolvedAgents;
    maxRememberedThreads;
    maxCachedHistories;
    listTimeoutMs;
    /** The agent of each thread seen, most recent last, for a stop the in-memory runner cannot serve. */
    threadAgents = new Map();
    /**
     * Each Antigravity agent's thread list, by its id in the runtime. CopilotKit's runtime asks a
     * runner for its threads synchronously (`listThreads()`, `getThreadMessages()`: their
     * results go straight into the response), so they are answered from these copies, which the
     * server's thread events keep current, rather than from a request to the server.
     */
    lists = new Map();
    /** Histories read from the servers (most recent last), for the synchronous message and state getters. */
    histories = new Map();
    /** History reads in flight, by thread id, so concurrent asks share one connect. */
    historyReads = new Map();
    listeners = new Set();
    closed = false;
    /** See {@link AntigravityRunnerOptions}. */
    constructor(options) {
        const { agents, maxRememberedThreads, maxCachedHistories, listTimeoutMs, ...inMemory } = options;
        super();
        this.memory = new InMemoryAgentRunner(inMemory);
        this.agents = agents;
        this.maxRememberedThreads = maxRememberedThreads ?? 10_000;
        this.maxCachedHistories = maxCachedHistories ?? 200;
        this.listTimeoutMs = listTimeoutMs ?? 15_000;
        if (agents instanceof Promise) {
            agents.then((resolved) => (this.resolvedAgents = resolved), () => undefined);
        }
        else {
            this.resolvedAgents = agents;
        }
        this.hooks = {
            onBeforeHandler: (context) => this.beforeHandler(context),
            onResponse: (context) => this.afterHandler(context),
        };
    }
    /** A run, through CopilotKit's in-memory runner; the thread's agent is remembered for `stop()`. */
    run(request) {
        if (request.agent instanceof AntigravityAgent)
            this.remember(request.threadId, request.agent);
        return this.memory.run(request);
    }
    /**
     * The thread from its agent's server (`POST <url>/connect`): `RUN_STARTED`, the thread's whole
     * history as `MESSAGES_SNAPSHOT`, its state, then a turn in flight until it ends, or how the
     * thread waits (an interrupt, a frontend tool) — nothing for a thread the server does not
     * know. A thread of another kind of agent is replayed from memory, as CopilotKit does.
     */
    connect(request) {
        return defer(() => from(this.antigravityAgent(request.agentId))).pipe(switchMap((found) => {
            if (!found)
                return this.memory.connect(request);
            const [agentId, agent] = found;
            this.remember(request.threadId, agent);
            const seen = [];
            return agent.connectThread(request.threadId, { headers: request.headers ?? agent.headers }).pipe(
            // The restatement also answers CopilotKit's `/threads/<id>/messages` and `/state`.
            tap((event) => {
                if (event.type === EventType.MESSAGES_SNAPSHOT || event.type === EventType.STATE_SNAPSHOT) {
                    seen.push(event);
                    if (event.type === EventType.STATE_SNAPSHOT)
                        this.keepHistory(request.threadId, agentId, seen);
                }
            }));
        }));
    }
    /**
     * Stops the thread's run. A run this runtime started is aborted as CopilotKit does, which
     * stops its turn on the server too (`AntigravityAgent.abortRun`); otherwise the turn on the
     * thread's server is stopped directly (`POST <url>/stop`) — a turn this runtime rejoined
     * through `connect`, started before a restart or by another replica.
     */
    async stop(request) {
        if (await this.memory.stop(request))
            return true;
        const agent = this.threadAgents.get(request.threadId);
        if (!agent)
            return false;
        return agent.stopThread(request.threadId);
    }
    /** Whether a run this runtime started on the thread is in flight. */
    isRunning(request) {
        return this.memory.isRunning(request);
    }
    // ------------------------------------------------------------ CopilotKit's thread endpoints
    /**
     * The unarchived threads of every Antigravity agent (from their servers, as last heard; the
     * first call starts following them), newest activity first, and CopilotKit's in-memory
     * threads of other agents. CopilotKit's `GET /threads` answers with it when the
     * {@link AntigravityRunner.hooks} are not installed (they answer with archived ones too).
     */
    listThreads() {
        const ours = this.records((thread) => !thread.archived);
        return this.sorted([...ours, ...this.otherThreads()]);
    }
    /**
     * A thread's messages as its server last restated them (on a connect through this runner, or
     * a read by the hooks before `GET /threads/<id>/messages`); CopilotKit's in-memory ones for
     * a thread of another agent.
     */
    getThreadMessages(threadId) {
        const history = this.histories.get(threadId);
        return history ? [...history.messages] : this.memory.getThreadMessages(threadId);
    }
    /** A thread's restated history (`MESSAGES_SNAPSHOT`, `STATE_SNAPSHOT`), as for `getThreadMessages`. */
    getThreadEvents(threadId) {
        const history = this.histories.get(threadId);
        return history ? [...history.events] : this.memory.getThreadEvents(threadId);
    }
    /** A thread's state as its server last restated it, as for `getThreadMessages`. */
    getThreadState(threadId) {
        const history = this.histories.get(threadId);
        return history ? history.state : this.memory.getThreadState(threadId);
    }
    /**
     * Forgets what this runtime holds: CopilotKit's in-memory threads and the histories read
     * from the servers. The servers' threads are not touched (delete them with `deleteThread`),
     * and their list stays, as it mirrors the servers.
     */
    clearThreads() {
        this.memory.clearThreads();
        this.histories.clear();
    }
    // ------------------------------------------------------------------------- thread changes
    /**
     * Renames a thread on its agent's server (`agentId`: the agent's id in the runtime; the only
     * Antigravity agent if not given) and returns its record. Throws the server's
     * `AntigravityHttpError` (404: no such thread for the agent's caller; 422: a bad title).
     */
    async renameThread(threadId, name, agentId) {
        const [id, agent] = await this.requireAgent(agentId);
        return this.changed(id, await agent.threads.renameThread(threadId, name));
    }
    /** Archives a thread on its server (or brings it back with `archived` false), as `renameThread` does. */
    async archiveThread(threadId, archived = true, agentId) {
        const [id, agent] = await this.requireAgent(agentId);
        return this.changed(id, await agent.threads.archiveThread(threadId, archived));
    }
    /** Deletes a thread, its history and workspace on its server: false if the server has no such thread. */
    async deleteThread(threadId, agentId) {
        const [id, agent] = await this.requireAgent(agentId);
        const deleted = await agent.threads.deleteThread(threadId);
        if (deleted)
            this.lists.get(id)?.apply({ type: "deleted", thread: { id: threadId } });
        this.histories.delete(threadId);
        return deleted;
    }
    /**
     * Calls `listener` on every change of the Antigravity agents' thread lists (starting to
     * follow them), e.g. to tell pages to fetch `useThreads()`'s list again; returns its removal.
     */
    subscribeThreads(listener) {
        this.listeners.add(listener);
        void this.startLists();
        return () => this.listeners.delete(listener);
    }
    /** Resolves once every Antigravity agent's thread list has been read from its server. */
    async threadsReady(timeoutMs = this.listTimeoutMs) {
        await this.startLists();
        await Promise.all([...this.lists.values()].map((list) => list.ready(timeoutMs)));
    }
    /** Stops following the servers' thread events (a runtime that shuts down). */
    close() {
        this.closed = true;
        for (const list of this.lists.values())
            list.close();
    }
    // -------------------------------------------------------------------------------- hooks
    async beforeHandler({ request, route, runtime }) {
        if (runtime.runner !== this)
            return;
        switch (route.method) {
            case "threads/list": {
                const query = new URL(request.url).searchParams;
                const agentId = query.get("agentId");
                const agents = await this.antigravityAgents();
                if (agentId && !agents.has(agentId))
                    return;
                try {
                    await this.startLists();
                    await Promise.all([...this.lists].filter(([id]) => !agentId || id === agentId).map(([, list]) => list.ready(this.listTimeoutMs)));
                }
                catch (error) {
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
                    .catch(() => ({})));
                const agentId = typeof body.agentId === "string" ? body.agentId : undefined;
                const found = await this.antigravityAgent(agentId);
                if (!found)
                    return;
                const threadId = route.threadId;
                try {
                    if (route.method === "threads/archive") {
                        await this.archiveThread(threadId, true, found[0]);
                        throw answer({ threadId, archived: true });
                    }
                    if (request.method.toUpperCase() === "DELETE") {
                        if (!(await this.deleteThread(threadId, found[0])))
                            throw answer({ error: `no thread ${threadId}` }, 404);
                        throw answer({ threadId, deleted: true });
                    }
                    const update = {};
                    if (typeof body.name === "string")
                        update.title = body.name;
                    if (typeof body.archived === "boolean")
                        update.archived = body.archived;
                    if (update.title === undefined && update.archived === undefined)
                        throw answer({ error: "nothing to change: give a name or archived" }, 400);
                    const thread = await found[1].threads.updateThread(threadId, update);
                    throw answer(this.changed(found[0], thread));
                }
                catch (error) {
                    throw error instanceof Response ? error : failure(error);
                }
            }
            case "threads/messages":
            case "threads/events":
            case "threads/state": {
                const owner = await this.ownerOf(route.threadId);
                if (!owner)
                    return;
                try {
                    await this.readHistory(route.threadId, owner[0], owner[1]);
                }
                catch (error) {
                    throw failure(error);
                }
                return;
            }
            default:
                return;
        }
    }
    /** `/info`: thread mutations are served (by the hooks), though CopilotKit says only Intelligence serves them. */
    async afterHandler({ route, response, runtime }) {
        if (runtime.runner !== this || route.method !== "info" || !response.ok)
            return;
        if ((await this.antigravityAgents()).size === 0)
            return;
        const info = (await response.clone().json());
        let changed = false;
        for (const endpoints of [info.threadEndpoints, info.singleRoute?.threadEndpoints]) {
            if (endpoints?.list === true && endpoints.mutations === false) {
                endpoints.mutations = true;
                changed = true;
            }
        }
        if (!changed)
            return;
        const headers = new Headers(response.headers);
        headers.delete("content-length");
        return new Response(JSON.stringify(info), { status: response.status, statusText: response.statusText, headers });
    }
    // ------------------------------------------------------------------------------- helpers
    /** The registered `AntigravityAgent` for `agentId` (the only one if no id is given), with its id. */
    async antigravityAgent(agentId) {
        const ours = await this.antigravityAgents();
        if (agentId !== undefined) {
            const agent = ours.get(agentId);
            return agent ? [agentId, agent] : undefined;
        }
        return ours.size === 1 ? [...ours][0] : undefined;
    }
    async requireAgent(agentId) {
        const found = await this.antigravityAgent(agentId);
        if (!found)
            throw new Error(agentId === undefined ? "name the agent: the runtime has several Antigravity agents, or none" : `${agentId} is not an Antigravity agent of this runtime`);
        return found;
    }
    async antigravityAgents() {
        return this.ours(await this.agents);
    }
    ours(agents) {
        return new Map(Object.entries(agents).filter((entry) => entry[1] instanceof AntigravityAgent));
    }
    /** Starts following every Antigravity agent's thread list (once each). */
    async startLists() {
        this.startKnownLists();
        if (!this.resolvedAgents) {
            this.resolvedAgents = await this.agents;
            this.startKnownLists();
        }
    }
    startKnownLists() {
        if (!this.resolvedAgents || this.closed)
            return;
        for (const [agentId, agent] of this.ours(this.resolvedAgents)) {
            if (this.lists.has(agentId))
                continue;
            const list = new ThreadListCache(agent.threads, agentId);
            list.subscribe((change) => this.onChange(agentId, change));
            this.lists.set(agentId, list);
            list.start();
        }
    }
    /** The records of the Antigravity agents' threads that pass `keep` (of `agentId` only, if given). */
    records(keep, agentId) {
        this.startKnownLists();
        const records = [];
        for (const [id, list] of this.lists) {
            if (agentId !== undefined && id !== agentId)
                continue;
            for (const thread of list.list())
                if (keep(thread))
                    records.push(threadRecord(id, thread));
        }
        return this.sorted(records);
    }
    /** CopilotKit's in-memory threads of agents that are not Antigravity agents. */
    otherThreads() {
        const ours = this.resolvedAgents ? this.ours(this.resolvedAgents) : new Map();
        return this.memory.listThreads().filter((thread) => !ours.has(thread.agentId));
    }
    sorted(records) {
        return records.sort((a, b) => (a.updatedAt === b.updatedAt ? a.id.localeCompare(b.id) : a.updatedAt < b.updatedAt ? 1 : -1));
    }
    /** The Antigravity agent whose list holds `threadId` (the only agent when no list does yet). */
    async ownerOf(threadId) {
        const agents = await this.antigravityAgents();
        for (const [agentId, list] of this.lists)
            if (list.get(threadId))
                return [agentId, agents.get(agentId)];
        const history = this.histories.get(threadId);
        if (history && agents.has(history.agentId))
            return [history.agentId, agents.get(history.agentId)];
        return agents.size === 1 ? [...agents][0] : undefined;
    }
    /** The server's answer to a change this runner made, in the list at once (its event follows). */
    changed(agentId, thread) {
        this.lists.get(agentId)?.apply({ type: "updated", thread });
        return threadRecord(agentId, thread);
    }
    onChange(agentId, change) {
        const history = this.histories.get(change.thread.id);
        if (history && history.agentId === agentId) {
            if (change.type === "deleted")
                this.histories.delete(change.thread.id);
            // A cached history that a new message, a fork or a branch switch made stale is read again,
            // so the synchronous getters stay current.
            else if ((history.messageCount !== change.thread.messageCount || history.branch !== change.thread.branch) && !this.historyReads.has(change.thread.id)) {
                const agent = this.resolvedAgents?.[agentId];
                if (agent instanceof AntigravityAgent)
                    this.readHistory(change.thread.id, agentId, agent).catch(() => undefined);
            }
        }
        for (const listener of this.listeners) {
            try {
                listener(change, agentId);
            }
            catch (error) {
                console.warn("AntigravityRunner: a thread listener failed:", error);
            }
        }
    }
    /** Reads a thread's history from its server (a connect, cut once the state is restated). */
    readHistory(threadId, agentId, agent) {
        const inFlight = this.historyReads.get(threadId);
        if (inFlight)
            return inFlight;
        const read = lastValueFrom(agent.connectThread(threadId, { headers: agent.headers }).pipe(
        // Only the restatement: a turn in flight would keep the connect open until it ends.
        takeWhile((event) => event.type !== EventType.STATE_SNAPSHOT, true), toArray()), { defaultValue: [] })
            .then((events) => this.keepHistory(threadId, agentId, events))
            .finally(() => this.historyReads.delete(threadId));
        this.historyReads.set(threadId, read);
        return read;
    }
    keepHistory(threadId, agentId, events) {
        const snapshot = events.find((event) => event.type === EventType.MESSAGES_SNAPSHOT);
        const state = events.find((event) => event.type === EventType.STATE_SNAPSHOT);
        const history = {
            agentId,
            messages: snapshot?.messages ?? [],
            state: state && typeof state.snapshot === "object" && state.snapshot !== null && !Array.isArray(state.snapshot) ? state.snapshot : null,
            events: events.filter((event) => event.type === EventType.MESSAGES_SNAPSHOT || event.type === EventType.STATE_SNAPSHOT),
            messageCount: this.lists.get(agentId)?.get(threadId)?.messageCount,
            branch: this.lists.get(agentId)?.get(threadId)?.branch,
        };
        this.histories.delete(threadId);
        this.histories.set(threadId, history);
        while (this.histories.size > this.maxCachedHistories) {
            const oldest = this.histories.keys().next().value;
            if (oldest === undefined)
                break;
            this.histories.delete(oldest);
        }
        return history;
    }
    remember(threadId, agent) {
        this.threadAgents.delete(threadId);
        this.threadAgents.set(threadId, agent);
        while (this.threadAgents.size > this.maxRememberedThreads) {
            const oldest = this.threadAgents.keys().next().value;
            if (oldest === undefined)
                break;
            this.threadAgents.delete(oldest);
        }
    }
}
