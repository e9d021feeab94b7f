// Readable views of tool calls, their results and activities (plan, file diffs, command output).
import { h, parseJson, pretty } from "./dom";

/** Argument names that hold a file or directory path, in the harness's and the model's spelling. */
const PATH_KEYS = [
  "absolutePath",
  "AbsolutePath",
  "targetFile",
  "TargetFile",
  "directoryPath",
  "DirectoryPath",
  "filePath",
  "FilePath",
  "searchDirectory",
  "SearchDirectory",
  "searchPath",
  "SearchPath",
  "path",
];
/** Argument names that hold a shell command. */
const COMMAND_KEYS = ["commandLine", "CommandLine", "command"];
/** Argument names that hold file contents written by a tool. */
const CONTENT_KEYS = ["codeContent", "CodeContent", "content"];

/** `file:///x` as `/x`; other strings unchanged. */
function plainPath(value: string): string {
  return value.startsWith("file://") ? decodeURIComponent(value.slice("file://".length)) : value;
}

function firstString(args: Record<string, unknown>, keys: string[]): string | undefined {
  for (const key of keys) {
    const value = args[key];
    if (typeof value === "string" && value) return value;
  }
  return undefined;
}

/** The one-line gist of a call: its command, its path, or its first short string argument. */
export function callGist(args: unknown): string {
  if (!args || typeof args !== "object") return "";
  const record = args as Record<string, unknown>;
  const command = firstString(record, COMMAND_KEYS);
  if (command) return `$ ${command}`;
  const path = firstString(record, PATH_KEYS);
  if (path) return plainPath(path);
  for (const [key, value] of Object.entries(record)) {
    if (key === "toolSummary" || key === "toolAction") continue;
    if (typeof value === "string" && value.length <= 80) return value;
  }
  return "";
}

/** The arguments, readable: command and working directory, path and written content, then JSON. */
export function argsView(argsText: string): HTMLElement {
  const args = parseJson(argsText);
  const box = h("div", { class: "tool-args" });
  if (!args || typeof args !== "object" || Array.isArray(args)) {
    box.append(h("pre", { class: "json" }, argsText || "(no arguments)"));
    return box;
  }
  const record = args as Record<string, unknown>;
  const command = firstString(record, COMMAND_KEYS);
  const path = firstString(record, PATH_KEYS);
  const content = firstString(record, CONTENT_KEYS);
  if (command) {
    const cwd = firstString(record, ["workingDir", "Cwd", "cwd"]);
    box.append(h("pre", { class: "terminal" }, `$ ${command}`));
    if (cwd) box.append(h("div", { class: "muted small" }, `in ${plainPath(cwd)}`));
  } else if (path) {
    box.append(h("div", { class: "path" }, plainPath(path)));
  }
  if (content) box.append(h("pre", { class: "code" }, content));
  box.append(
    h(
      "details",
      { class: "raw" },
      h("summary", {}, "arguments"),
      h("pre", { class: "json" }, pretty(args)),
    ),
  );
  return box;
}

interface ListedFile {
  name: string;
  isDirectory?: boolean;
  fileSize?: string | number;
}

function isListing(value: unknown): value is ListedFile[] {
  return (
    Array.isArray(value) &&
    value.length > 0 &&
    value.every((v) => v && typeof v === "object" && typeof (v as ListedFile).name === "string")
  );
}

/** A tool result, readable: command output with its exit code, a directory listing, or text. */
export function resultView(content: string): HTMLElement {
  const value = parseJson(content);
  const box = h("div", { class: "tool-result" });
  if (value && typeof value === "object" && !Array.isArray(value)) {
    const record = value as Record<string, unknown>;
    const output = record.combinedOutput ?? record.output ?? record.stdout;
    if (typeof output === "string") {
      box.append(h("pre", { class: "terminal" }, output || "(no output)"));
      if (record.exitCode !== undefined) {
        const ok = Number(record.exitCode) === 0;
        box.append(h("div", { class: `exit ${ok ? "ok" : "fail"}` }, `exit code ${String(record.exitCode)}`));
      }
      return box;
    }
  }
  if (isListing(value)) {
    const list = h("ul", { class: "listing" });
    for (const file of value) {
      const size = file.fileSize !== undefined ? ` · ${String(file.fileSize)} B` : "";
      list.append(
        h(
          "li",
          { class: file.isDirectory ? "dir" : "file" },
          h("span", { class: "name" }, file.isDirectory ? `${file.name}/` : file.name),
          h("span", { class: "muted small" }, size),
        ),
      );
    }
    box.append(list);
    return box;
  }
  box.append(h("pre", { class: value === undefined ? "text" : "json" }, value === undefined ? content : pretty(value)));
  return box;
}

/** The tool call an activity belongs to, when its content or metadata names one. */
export function activityParent(content: Record<string, unknown>, metadata: unknown): string | undefined {
  const fromContent = content.toolCallId ?? content.parentToolCallId;
  if (typeof fromContent === "string") return fromContent;
  const meta = metadata as Record<string, unknown> | undefined;
  const fromMeta = meta?.toolCallId ?? meta?.parentToolCallId;
  return typeof fromMeta === "string" ? fromMeta : undefined;
}

interface PlanItem {
  title?: string;
  content?: string;
  description?: string;
  text?: string;
  status?: string;
}

function planItems(content: Record<string, unknown>): PlanItem[] | undefined {
  for (const key of ["tasks", "items", "steps", "entries", "todos"]) {
    const value = content[key];
    if (Array.isArray(value)) return value as PlanItem[];
  }
  return undefined;
}

/** One diff line's class: added, removed, a hunk header or context. */
function diffClass(line: string): string {
  if (line.startsWith("+++") || line.startsWith("---")) return "meta";
  if (line.startsWith("+")) return "add";
  if (line.startsWith("-")) return "del";
  if (line.startsWith("@@")) return "hunk";
  return "ctx";
}

/** An activity (AG-UI `role: "activity"`): a plan, a file diff, command output, or its JSON. */
export function activityView(activityType: string, content: Record<string, unknown>): HTMLElement {
  const box = h("div", { class: "activity", "data-activity-type": activityType });
  const title = typeof content.title === "string" ? content.title : activityType;
  box.append(h("div", { class: "activity-head" }, h("span", { class: "badge" }, activityType), " ", title === activityType ? "" : title));
  const items = planItems(content);
  const diff = typeof content.diff === "string" ? content.diff : typeof content.patch === "string" ? content.patch : undefined;
  const command = firstString(content, COMMAND_KEYS);
  if (items) {
    const list = h("ul", { class: "plan" });
    for (const item of items) {
      const text = item.title ?? item.content ?? item.description ?? item.text ?? pretty(item);
      const status = (item.status ?? "pending").toLowerCase();
      list.append(h("li", { class: `plan-item ${status.replace(/[^a-z_-]/g, "")}` }, h("span", { class: "mark" }), text));
    }
    box.append(list);
  } else if (diff !== undefined) {
    const path = firstString(content, PATH_KEYS) ?? firstString(content, ["file", "filename"]);
    if (path) box.append(h("div", { class: "path" }, plainPath(path)));
    const pre = h("pre", { class: "diff" });
    for (const line of diff.split("\n")) pre.append(h("span", { class: diffClass(line) }, `${line}\n`));
    box.append(pre);
  } else if (command !== undefined) {
    const state = content.state ?? content.status;
    box.append(h("pre", { class: "terminal" }, `$ ${command}\n${typeof content.output === "string" ? content.output : ""}`));
    const exit = content.exitCode !== undefined ? ` · exit code ${String(content.exitCode)}` : "";
    if (state !== undefined || exit) box.append(h("div", { class: "muted small" }, `${state === undefined ? "" : String(state)}${exit}`));
  } else {
    box.append(h("pre", { class: "json" }, pretty(content)));
  }
  return box;
}
