// A tool call as a card: its name, status, arguments and result — for the agent's built-in tools
// (files, commands), the server's tools, the page's own frontend tool, and subagent invocations.
import { createContext, useContext, type ReactNode } from "react";

/** Whether the agent has a run in flight: a call without a result is still running only then. */
export const RunningContext = createContext(false);

/** What CopilotKit gives a tool renderer (`useDefaultRenderTool`, `useRenderTool`, `useFrontendTool`). */
export interface ToolCardProps {
  name: string;
  toolCallId?: string;
  /** The call's arguments (`parameters` from the render-tool hooks, `args` from a frontend tool's). */
  parameters?: unknown;
  args?: unknown;
  status: string;
  result?: unknown;
  /** More to show inside the card (an invocation's subagents). */
  children?: ReactNode;
}

const pretty = (value: unknown) => (typeof value === "string" ? value : JSON.stringify(value, null, 2));

/** The result as text: the JSON the server sends, unwrapped to its `output` or `error` when it has one. */
function resultText(result: unknown): string {
  if (typeof result !== "string") return pretty(result);
  try {
    const parsed = JSON.parse(result) as Record<string, unknown>;
    if (typeof parsed?.output === "string") return parsed.output;
    if (typeof parsed?.error === "string") return parsed.error;
    return JSON.stringify(parsed, null, 2);
  } catch {
    return result;
  }
}

export function ToolCard({ name, toolCallId, parameters, args: frontendArgs, status, result, children }: ToolCardProps) {
  const running = useContext(RunningContext);
  const done = status === "complete";
  // A call that never got its result (its turn was stopped, or ended in an error) is not running.
  const state = done ? "complete" : running ? "running" : "incomplete";
  const given = parameters ?? frontendArgs;
  const args = given && typeof given === "object" && Object.keys(given).length ? given : undefined;
  return (
    <div className="tool-card" data-tool-name={name} data-status={state} data-tool-call-id={toolCallId}>
      <div className="tool-head">
        <span className="tool-name">{name}</span>
        <span className={`badge ${{ complete: "ok", running: "busy", incomplete: "warn" }[state]}`}>{{ complete: "done", running: "running", incomplete: "no result" }[state]}</span>
      </div>
      {args ? <pre className="tool-args">{pretty(args)}</pre> : null}
      {children}
      {done && result !== undefined && result !== "" ? <pre className="tool-result">{resultText(result)}</pre> : null}
    </div>
  );
}
