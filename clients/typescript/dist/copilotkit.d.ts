import { InMemoryAgentRunner } from "@copilotkit/runtime/v2";
import type { AgentRunnerConnectRequest, AgentRunnerRunRequest, AgentRunnerStopRequest, InMemoryAgentRunnerOptions } from "@copilotkit/runtime/v2";
import type { AbstractAgent, BaseEvent } from "@ag-ui/client";
import { Observable } from "rxjs";
/** The agents the runtime serves, as given to `CopilotRuntime` (a record, or a promise of one). */
export type RunnerAgents = Record<string, AbstractAgent> | Promise<Record<string, AbstractAgent>>;
/** Options of an {@link AntigravityRunner}. */
export interface AntigravityRunnerOptions extends InMemoryAgentRunnerOptions {
    /** The runtime's agents; those that are `AntigravityAgent`s get their threads from their server. */
    agents: RunnerAgents;
    /** How many threads' agents are remembered for `stop()` (default 10 000; the oldest go first). */
    maxRememberedThreads?: number;
}
/**
 * A CopilotKit runner (`new CopilotRuntime({ agents, runner: new AntigravityRunner({ agents }) })`)
 * whose `connect` asks an {@link AntigravityAgent}'s server for the thread: its whole history,
 * then the turn in flight if there is one, wherever and whenever the turn started — after a
 * runtime restart, or from another runtime replica. Runs go through CopilotKit's in-memory
 * runner unchanged; a stop also reaches the server's turn when this runtime is not the one
 * running it (the in-memory runner only knows runs it started). Agents of other kinds keep
 * CopilotKit's in-memory behaviour.
 */
export declare class AntigravityRunner extends InMemoryAgentRunner {
    private readonly agents;
    private readonly maxRememberedThreads;
    /** The agent of each thread seen, most recent last, for a stop the in-memory runner cannot serve. */
    private readonly threadAgents;
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
    /** The registered `AntigravityAgent` for `agentId` (the only one if no id is given), if any. */
    private antigravityAgent;
    private remember;
}
