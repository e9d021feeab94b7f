// The page's own frontend tool, and small readings of messages and runs the views share.
import type { Message, TokenUsage, Tool, ToolCall } from "@ag-ui/client";
import { byId, parseJson } from "./dom";

/** The demo frontend tool: the page runs it itself (the demo model calls it on "background"). */
const CHANGE_BACKGROUND: Tool = {
  name: "change_background",
  description:
    "Change the background of the chat page. Use any CSS background: a color name, a hex color or a gradient.",
  parameters: {
    type: "object",
    properties: {
      background: { type: "string", description: "A CSS background, e.g. `teal`, `#fde68a` or a linear-gradient(…)" },
    },
    required: ["background"],
  },
};

/** The tools the page offers the agent. */
export const FRONTEND_TOOLS: Tool[] = [CHANGE_BACKGROUND];

/** Runs a frontend tool call; returns the tool message's content. */
export function executeFrontendTool(call: ToolCall): string {
  if (call.function.name !== CHANGE_BACKGROUND.name) {
    return `Error: this page has no tool named ${call.function.name}.`;
  }
  const args = (parseJson(call.function.arguments) ?? {}) as Record<string, unknown>;
  const value = args.background ?? args.color;
  if (typeof value !== "string" || !CSS.supports("background", value)) {
    return `Error: ${JSON.stringify(value)} is not a CSS background.`;
  }
  byId("chat").style.background = value;
  return `The page's background is now ${value}.`;
}

/** A message's text (a multimodal message's text parts, joined). */
export function messageText(message: Message): string {
  const content = (message as { content?: unknown }).content;
  if (typeof content === "string") return content;
  if (Array.isArray(content)) {
    return content.map((part) => (part && typeof part === "object" && "text" in part ? String(part.text) : "")).join("");
  }
  return "";
}

/** A run's token usage in one line (`12 in · 30 out · 42 tokens`), or `""`. */
export function usageText(usage: TokenUsage[] | undefined): string {
  if (!usage?.length) return "";
  const sum = (key: keyof TokenUsage) => usage.reduce((n, u) => n + (typeof u[key] === "number" ? (u[key] as number) : 0), 0);
  const input = sum("inputTokens");
  const output = sum("outputTokens");
  const reasoning = sum("reasoningTokens");
  const total = sum("totalTokens") || input + output;
  return `${input} in · ${output} out${reasoning ? ` (${reasoning} reasoning)` : ""} · ${total} tokens`;
}
