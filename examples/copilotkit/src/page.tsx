// The app's page: CopilotKit's chat on the agent `antigravity` of the runtime (src/server.ts),
// with what an agui-antigravity agent streams made visible — tool cards for every tool, a
// frontend tool the page runs itself, questions and approvals answered in the page, the files
// and commands of the agent's work, subagents under the call that started them, CopilotKit's
// edit, regenerate and branch buttons forking the thread on the server; beside it the server's
// threads (a drawer) and the thread's workspace (a files panel). The thread id lives in the
// address (`#<threadId>`), so a reload returns to the thread.
import { useEffect, useRef, useState } from "react";
import { createRoot } from "react-dom/client";
import { z } from "zod";
import type { AbstractAgent } from "@ag-ui/client";
import {
  CopilotChat,
  CopilotKitProvider,
  useAgent,
  useCapabilities,
  useDefaultRenderTool,
  useFrontendTool,
  useInterrupt,
  useRenderTool,
} from "@copilotkit/react-core/v2";
import "@copilotkit/react-core/v2/styles.css";
import { ACTIVITY_RENDERERS } from "./activities";
import { ForkBar, ForksProvider, onCopilotKitError, useForks, useMessageView } from "./branches";
import { FilesPanel } from "./files";
import { InterruptCard } from "./interrupts";
import { CUSTOM_MESSAGE_RENDERERS, SubagentList, useSubagentEvents } from "./subagents";
import { ThreadsDrawer } from "./threads";
import { RunningContext, ToolCard } from "./tools";
import "./page.css";

const AGENT = "antigravity";

/** The thread in the address, or a new one written there. */
function threadFromAddress(): string {
  const existing = decodeURIComponent(location.hash.slice(1));
  if (existing) return existing;
  const created = crypto.randomUUID();
  history.replaceState(null, "", `#${created}`);
  return created;
}

/** What the server says about its agent (`/capabilities`, through the runtime's `/info`). */
function AgentHeader({ threadId }: { threadId: string }) {
  const capabilities = useCapabilities(AGENT);
  const identity = capabilities?.identity;
  const custom = capabilities?.custom as { model?: string; builtinTools?: string[] } | undefined;
  return (
    <header className="app-header">
      <div>
        <strong>{identity?.name ?? AGENT}</strong>
        <span className="identity" data-testid="identity">
          {identity?.description ?? "…"}
        </span>
      </div>
      <div className="header-side">
        {custom?.model ? <span className="chip" data-testid="model">{custom.model}</span> : null}
        <span className="chip thread" data-testid="thread" title="thread id">
          {threadId.slice(0, 8)}
        </span>
        <button type="button" className="new-thread" onClick={() => (location.hash = crypto.randomUUID())}>
          New thread
        </button>
      </div>
    </header>
  );
}

/**
 * Whether the agent has a run in flight; also marks the page with it (`body[data-state]`:
 * `running` or `idle`, and `body[data-runs]`: runs and connects ended), for tests, and calls
 * `onEnded` when one ends.
 */
function useRunState(agent: AbstractAgent | undefined, onEnded: () => void): boolean {
  const [running, setRunning] = useState(false);
  const ending = useRef(onEnded);
  ending.current = onEnded;
  useEffect(() => {
    if (!agent) return;
    const body = document.body;
    body.dataset.runs ??= "0";
    const ended = () => {
      body.dataset.state = "idle";
      body.dataset.runs = String(Number(body.dataset.runs ?? 0) + 1);
      setRunning(false);
      ending.current();
    };
    const subscription = agent.subscribe({
      onRunInitialized: () => {
        body.dataset.state = "running";
        setRunning(true);
      },
      onRunFinalized: ended,
      onRunFailed: ended,
    });
    return () => subscription.unsubscribe();
  }, [agent]);
  return running;
}

/**
 * Registers the tool renderers, the frontend tool and the interrupt UI; renders the chat, its
 * messages' edit, regenerate and branch buttons wired to the thread's branches (`runs`: runs
 * and connects ended, on which the branches are read again).
 */
function Chat({ threadId, runs, onRunEnded }: { threadId: string; runs: number; onRunEnded: () => void }) {
  const { agent } = useAgent({ agentId: AGENT });
  useSubagentEvents(agent);
  const running = useRunState(agent, onRunEnded);
  const forks = useForks(agent, threadId, runs);
  const messageView = useMessageView(forks);

  // Every tool call without a renderer of its own (built-in tools, server tools) as a card.
  useDefaultRenderTool({ render: (props) => <ToolCard {...props} /> });
  // A subagent's invocation shows the subagents it started.
  useRenderTool({
    name: "invoke_subagent",
    parameters: z.object({}).passthrough(),
    render: (props) => (
      <ToolCard {...props} name="invoke_subagent">
        <SubagentList toolCallId={props.toolCallId} />
      </ToolCard>
    ),
  });

  // A frontend tool: the agent's turn waits for it, the page runs it, the turn goes on.
  useFrontendTool({
    name: "change_background",
    description: "Change the page's background.",
    parameters: z.object({ background: z.string().describe("a CSS background: a colour or a gradient") }),
    handler: async ({ background }) => {
      document.documentElement.style.setProperty("--app-background", background);
      document.body.dataset.background = background;
      return `The background is now ${background}.`;
    },
    render: (props) => <ToolCard {...props} name="change_background" />,
  });

  // Questions and approvals: AG-UI interrupts, answered with `resume`.
  useInterrupt({
    agentId: AGENT,
    render: ({ interrupt, resolve, cancel }) => (interrupt ? <InterruptCard interrupt={interrupt} resolve={resolve} cancel={cancel} /> : <></>),
  });

  return (
    <RunningContext.Provider value={running}>
      <ForksProvider forks={forks}>
        <div className="chat-column">
          <ForkBar />
          <CopilotChat agentId={AGENT} threadId={threadId} className="chat" messageView={messageView} />
        </div>
      </ForksProvider>
    </RunningContext.Provider>
  );
}

function App() {
  const [threadId, setThreadId] = useState(threadFromAddress);
  // Runs (and connects) ended: the drawer and the files panel read the server again on each.
  const [runs, setRuns] = useState(0);
  useEffect(() => {
    const onHash = () => setThreadId(threadFromAddress());
    window.addEventListener("hashchange", onHash);
    return () => window.removeEventListener("hashchange", onHash);
  }, []);
  return (
    <CopilotKitProvider
      runtimeUrl="/api/copilotkit"
      agentId={AGENT}
      renderActivityMessages={ACTIVITY_RENDERERS}
      renderCustomMessages={CUSTOM_MESSAGE_RENDERERS}
      enableInspector={false}
      onError={onCopilotKitError}
    >
      <div className="app">
        <AgentHeader threadId={threadId} />
        <div className="app-body">
          <ThreadsDrawer threadId={threadId} runs={runs} />
          <Chat key={threadId} threadId={threadId} runs={runs} onRunEnded={() => setRuns((n) => n + 1)} />
          <FilesPanel threadId={threadId} runs={runs} />
        </div>
      </div>
    </CopilotKitProvider>
  );
}

createRoot(document.getElementById("root")!).render(<App />);
