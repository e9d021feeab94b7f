// Readable views of tool calls, their results and activities (plan, file diffs, command output).
// Paths are shown relative to the thread's workspace, and those inside it open in the Files panel.
import { h, parseJson, pretty } from "./dom";
import { type WorkspacePaths, plainPath } from "./workspace";

/** How the views show paths and open a workspace file (`rel`: relative to the workspace). */
export interface PathLinks {
  paths: WorkspacePaths;
  open(rel: string): void;
}

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
/** Argument names that hold a command's working directory. */
const CWD_KEYS = ["workingDir", "Cwd", "cwd"];
/** Argument names that hold file contents written by a tool. */
const CONTENT_KEYS = ["codeContent", "CodeContent", "content"];

function firstString(args: Record<string, unknown>, keys: string[]): string | undefined {
  for (const key of keys) {
    const value = args[key];
    if (typeof value === "string" && value) return value;
  }
  return undefined;
}

/**
 * The paths a tool call's arguments or an activity's content name, for WorkspacePaths.learn:
 * a command's working directory (`command: true`) and file or directory paths.
 */
export function namedPaths(value: unknown): { path: string; command: boolean }[] {
  if (!value || typeof value !== "object" || Array.isArray(value)) return [];
  const record = value as Record<string, unknown>;
  const found: { path: string; command: boolean }[] = [];
  const cwd = firstString(record, CWD_KEYS);
  if (cwd && firstString(record, COMMAND_KEYS) !== undefined) found.push({ path: cwd, command: true });
  const path = firstString(record, PATH_KEYS);
  if (path) found.push({ path, command: false });
  return found;
}

/** A path, relative to the workspace when it is in it; a link to the Files panel then. */
export function pathView(path: string, links: PathLinks): HTMLElement {
  const rel = links.paths.relative(path);
  const shown = links.paths.display(path);
  if (rel === undefined || rel === "") return h("div", { class: "path", title: plainPath(path) }, shown);
  return h(
    "div",
    { class: "path" },
    h("button", { type: "button", class: "link file-link", title: `Open ${rel} in the Files panel`, "data-path": rel, onclick: () => links.open(rel) }, shown),
  );
}

/** Where a command runs: `in the workspace`, `in src`, or its absolute path outside it. */
function cwdText(cwd: string, links: PathLinks): string {
  return links.paths.relative(cwd) === "" ? "in the workspace" : `in ${links.paths.display(cwd)}`;
}

/** The one-line gist of a call: its command, its path, or its first short string argument. */
export function callGist(args: unknown, paths: WorkspacePaths): string {
  if (!args || typeof args !== "object") return "";
  const record = args as Record<string, unknown>;
  const command = firstString(record, COMMAND_KEYS);
  if (command) return `$ ${command}`;
  const path = firstString(record, PATH_KEYS);
  if (path) return paths.display(path);
  for (const [key, value] of Object.entries(record)) {
    if (key === "toolSummary" || key === "toolAction") continue;
    if (typeof value === "string" && value.length <= 80) return value;
  }
  return "";
}

/** The arguments, readable: command and working directory, path and written content, then JSON. */
export function argsView(argsText: string, links: PathLinks): HTMLElement {
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
    const cwd = firstString(record, CWD_KEYS);
    box.append(h("pre", { class: "terminal" }, `$ ${command}`));
    if (cwd) box.append(h("div", { class: "muted small cwd" }, cwdText(cwd, links)));
  } else if (path) {
    box.append(pathView(path, links));
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
export function activityView(activityType: string, content: Record<string, unknown>, links: PathLinks): HTMLElement {
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
    if (path) box.append(pathView(path, links));
    const pre = h("pre", { class: "diff" });
    for (const line of diff.split("\n")) pre.append(h("span", { class: diffClass(line) }, `${line}\n`));
    box.append(pre);
  } else if (command !== undefined) {
    const state = content.state ?? content.status;
    box.append(h("pre", { class: "terminal" }, `$ ${command}\n${typeof content.output === "string" ? content.output : ""}`));
    const cwd = firstString(content, CWD_KEYS);
    if (cwd) box.append(h("div", { class: "muted small cwd" }, cwdText(cwd, links)));
    const exit = content.exitCode !== undefined ? ` · exit code ${String(content.exitCode)}` : "";
    if (state !== undefined || exit) box.append(h("div", { class: "muted small" }, `${state === undefined ? "" : String(state)}${exit}`));
  } else {
    box.append(h("pre", { class: "json" }, pretty(content)));
  }
  return box;
}
