// `AntigravityRunner`: the runner of CopilotKit's v2 runtime (its `runner` option) for
// agui-antigravity agents. CopilotKit's default runner replays threads from its own memory, so a
// thread's history is lost when the runtime restarts and unseen by another runtime replica; this
// one asks the agent's server, which keeps every thread.
import { InMemoryAgentRunner } from "@copilotkit/runtime/v2";
import { defer, from, switchMap } from "rxjs";
import { AntigravityAgent } from "./agent.js";
/**
 * A CopilotKit runner (`new CopilotRuntime({ agents, runner: new AntigravityRunner({ agents }) })`)
 * whose `connect` asks an {@link AntigravityAgent}'s server for the thread: its whole history,
 * then the turn in flight if there is one, wherever and whenever the turn started — after a
 * runtime restart, or from another runtime replica. Runs go through CopilotKit's in-memory
 * runner unchanged; a stop also reaches the server's turn when this runtime is not the one
 * running it (the in-memory runner only knows runs it started). Agents of other kinds keep
 * CopilotKit's in-memory behaviour.
 */
export class AntigravityRunner extends InMemoryAgentRunner {
    agents;
    maxRememberedThreads;
    /** The agent of each thread seen, most recent last, for a stop the in-memory runner cannot serve. */
    threadAgents = new Map();
    /** See {@link AntigravityRunnerOptions}. */
    constructor(options) {
        const { agents, maxRememberedThreads, ...inMemory } = options;
        super(inMemory);
        this.agents = agents;
        this.maxRememberedThreads = maxRememberedThreads ?? 10_000;
    }
    /** A run, through CopilotKit's in-memory runner; the thread's agent is remembered for `stop()`. */
    run(request) {
        if (request.agent instanceof AntigravityAgent)
            this.remember(request.threadId, request.agent);
        return super.run(request);
    }
    /**
     * The thread from its agent's server (`POST <url>/connect`): `RUN_STARTED`, the thread's whole
     * history as `MESSAGES_SNAPSHOT`, its state, then a turn in flight until it ends, or how the
     * thread waits (an interrupt, a frontend tool) — nothing for a thread the server does not
     * know. A thread of another kind of agent is replayed from memory, as CopilotKit does.
     */
    connect(request) {
        return defer(() => from(this.antigravityAgent(request.agentId))).pipe(switchMap((agent) => {
            if (!agent)
                return super.connect(request);
            this.remember(request.threadId, agent);
            return agent.connectThread(request.threadId, { headers: request.headers ?? agent.headers });
        }));
    }
    /**
     * Stops the thread's run. A run this runtime started is aborted as CopilotKit does, which
     * stops its turn on the server too (`AntigravityAgent.abortRun`); otherwise the turn on the
     * thread's server is stopped directly (`POST <url>/stop`) — a turn this runtime rejoined
     * through `connect`, started before a restart or by another replica.
     */
    async stop(request) {
        if (await super.stop(request))
            return true;
        const agent = this.threadAgents.get(request.threadId);
        if (!agent)
            return false;
        return agent.stopThread(request.threadId);
    }
    /** The registered `AntigravityAgent` for `agentId` (the only one if no id is given), if any. */
    async antigravityAgent(agentId) {
        const agents = await this.agents;
        if (agentId !== undefined) {
            const agent = agents[agentId];
            return agent instanceof AntigravityAgent ? agent : undefined;
        }
        const ours = Object.values(agents).filter((agent) => agent instanceof AntigravityAgent);
        return ours.length === 1 ? ours[0] : undefined;
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
