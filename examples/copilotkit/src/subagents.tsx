// Subagents as the agent's events announce them (SUBAGENT_STARTED / _FINISHED / _ERROR, with the
// `invoke_subagent` call that started each): CopilotKit keeps no record of them, so the page
// follows the agent's events itself, in a store the invocation's card reads. Only live runs carry
// these events; a reloaded thread's history has the subagents' messages, not their lifecycle.
import { useEffect, useSyncExternalStore } from "react";
import type { AbstractAgent } from "@ag-ui/client";

/** One subagent, as its events told it. */
export interface Subagent {
  id: string;
  description: string;
  status: "running" | "finished" | "failed";
  result?: string;
}

const NONE: Subagent[] = [];

/** The subagents seen so far, by the tool call that started them. */
class SubagentStore {
  private byCall = new Map<string, Subagent[]>();
  private parents = new Map<string, string>();
  private listeners = new Set<() => void>();

  subscribe = (listener: () => void) => {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  };

  of = (toolCallId: string): Subagent[] => this.byCall.get(toolCallId) ?? NONE;

  started(id: string, parent: string, description: string) {
    this.parents.set(id, parent);
    const siblings = this.of(parent).filter((s) => s.id !== id);
    this.set(parent, [...siblings, { id, description, status: "running" }]);
  }

  ended(id: string, change: Partial<Subagent>) {
    const parent = this.parents.get(id);
    if (parent) this.set(parent, this.of(parent).map((s) => (s.id === id ? { ...s, ...change } : s)));
  }

  private set(parent: string, subagents: Subagent[]) {
    this.byCall.set(parent, subagents);
    for (const listener of this.listeners) listener();
  }
}

const store = new SubagentStore();

/** Follows `agent`'s subagent events into the store. */
export function useSubagentEvents(agent: AbstractAgent | undefined): void {
  useEffect(() => {
    if (!agent) return;
    const subscription = agent.subscribe({
      onSubagentStartedEvent: ({ event }) => {
        const started = event as unknown as { subagentRunId: string; parentToolCallId?: string; description?: string };
        if (started.parentToolCallId) store.started(started.subagentRunId, started.parentToolCallId, started.description ?? "");
      },
      onSubagentFinishedEvent: ({ event }) => {
        const finished = event as unknown as { subagentRunId: string; result?: unknown };
        store.ended(finished.subagentRunId, { status: "finished", result: typeof finished.result === "string" ? finished.result : undefined });
      },
      onSubagentErrorEvent: ({ event }) => {
        const failed = event as unknown as { subagentRunId: string; message?: string };
        store.ended(failed.subagentRunId, { status: "failed", result: failed.message });
      },
    });
    return () => subscription.unsubscribe();
  }, [agent]);
}

/** The subagents an `invoke_subagent` call started (kept current as their events arrive). */
export function SubagentList({ toolCallId }: { toolCallId: string }) {
  const subagents = useSyncExternalStore(store.subscribe, () => store.of(toolCallId));
  if (!subagents.length) return null;
  return (
    <ul className="subagents">
      {subagents.map((s) => (
        <li key={s.id} className="subagent" data-status={s.status}>
          <span className="badge">{s.status}</span> subagent{s.description ? ` — ${s.description}` : ""}
          {s.result ? <div className="subagent-result">{s.result}</div> : null}
        </li>
      ))}
    </ul>
  );
}

/**
 * A label before each message a subagent wrote (its `subagentRunId`): CopilotKit's chat shows
 * them as the agent's own. Also on a reloaded thread while the server keeps the subagents' steps.
 */
function SubagentLabel({ message, position }: { message: { subagentRunId?: string }; position: "before" | "after" }) {
  if (position !== "before" || !message.subagentRunId) return null;
  return (
    <div className="subagent-label" data-subagent-run-id={message.subagentRunId}>
      from a subagent
    </div>
  );
}

/** The page's custom message renderers (a stable array, as CopilotKit asks). */
export const CUSTOM_MESSAGE_RENDERERS = [{ render: SubagentLabel }];
