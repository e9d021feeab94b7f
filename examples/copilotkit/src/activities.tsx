// The agent's work as activity messages (role `activity`): a file it wrote or edited
// (`file_change`, with a unified diff) and a command it ran (`command`, with its state, exit
// code and output), rendered by CopilotKit's `renderActivityMessages`.
import { z } from "zod";

const fileChange = z
  .object({ path: z.string(), operation: z.string().optional(), diff: z.string().optional(), toolCallId: z.string().optional() })
  .passthrough();
const command = z
  .object({
    command: z.string(),
    cwd: z.string().optional(),
    state: z.string(),
    output: z.string().optional(),
    exitCode: z.number().nullable().optional(),
    toolCallId: z.string().optional(),
  })
  .passthrough();

function FileChange({ content }: { content: z.infer<typeof fileChange> }) {
  return (
    <div className="activity file-change" data-activity="file_change">
      <div className="activity-head">
        <span className="badge">{content.operation ?? "edit"}</span> {content.path}
      </div>
      {content.diff ? <pre className="diff">{content.diff}</pre> : null}
    </div>
  );
}

function Command({ content }: { content: z.infer<typeof command> }) {
  return (
    <div className="activity command" data-activity="command" data-state={content.state}>
      <div className="activity-head">
        <span className={`badge ${content.state === "running" ? "busy" : content.state === "completed" ? "ok" : "warn"}`}>{content.state}</span>
        {content.exitCode !== undefined && content.exitCode !== null ? <span className="exit">exit {content.exitCode}</span> : null}
      </div>
      <pre className="terminal">
        $ {content.command}
        {content.output ? `\n${content.output}` : ""}
      </pre>
    </div>
  );
}

/** The page's activity renderers (a stable array, as CopilotKit asks). */
export const ACTIVITY_RENDERERS = [
  { activityType: "file_change", content: fileChange, render: FileChange },
  { activityType: "command", content: command, render: Command },
];
