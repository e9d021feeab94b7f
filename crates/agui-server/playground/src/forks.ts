// Edits, regenerates and file rewinds (issue 42), as the server's rule (`divergence.rs`) reads
// them: an edit resends a user message under its id with the messages after it dropped; a
// regenerate sends the history up to and including the user message whose answer is redone.
// Either may ask for the files the agent's file tools changed since to be rewound
// (`forwardedProps.rewindFiles`), which the server reports in one `antigravity:rewind` event.
// A regenerate's run is marked as one (`forwardedProps.regenerate`), an edit's is not: unmarked,
// a server that has not read the thread back yet (restarted, another replica) takes a regenerate
// for a retry of a cut run and restates the old answer.
import type { Message } from "@ag-ui/client";
import { type PathLinks, pathView } from "./cards";
import { h } from "./dom";

/** The name of the CUSTOM event that reports a rewind. */
export const REWIND_EVENT = "antigravity:rewind";

/** The code of the RUN_ERROR of a run whose edit or regenerate the thread cannot follow. */
export const CANNOT_FORK = "CANNOT_FORK";

/** The `antigravity:rewind` report. */
export interface RewindReport {
  restored: { path: string; action: string }[];
  notRestored: { path: string; why: string }[];
  commandsAfter: number;
  /** Set when nothing could be known (right after a server restart). */
  unknown?: string;
}

/** What the page does for the controls of this module. */
export interface ForkActions {
  /** Runs the thread with user message `messageId` changed to `text`. */
  edit(messageId: string, text: string, rewind: boolean): void;
  /** Runs the thread again from user message `messageId` (its answer regenerated). */
  regenerate(messageId: string, rewind: boolean): void;
}

/** The report of a CUSTOM event's value, read leniently (missing lists are empty). */
export function parseRewind(value: unknown): RewindReport {
  const v = (value && typeof value === "object" ? value : {}) as Record<string, unknown>;
  const list = (key: string) => (Array.isArray(v[key]) ? (v[key] as Record<string, unknown>[]) : []).filter((e) => e && typeof e.path === "string");
  return {
    restored: list("restored").map((e) => ({ path: String(e.path), action: String(e.action ?? "restored") })),
    notRestored: list("notRestored").map((e) => ({ path: String(e.path), why: String(e.why ?? "") })),
    commandsAfter: typeof v.commandsAfter === "number" ? v.commandsAfter : 0,
    unknown: typeof v.unknown === "string" && v.unknown ? v.unknown : undefined,
  };
}

/** The history of an edit: the messages before user message `id`, then it with `text`; attachments kept. */
export function editedHistory(messages: Message[], id: string, text: string): Message[] | undefined {
  const at = messages.findIndex((m) => m.id === id && m.role === "user");
  if (at < 0) return undefined;
  const old = messages[at] as Message & { content: unknown };
  const content = Array.isArray(old.content)
    ? [{ type: "text", text }, ...old.content.filter((part) => !(part && typeof part === "object" && (part as { type?: string }).type === "text"))]
    : text;
  return [...messages.slice(0, at), { ...old, content } as Message];
}

/**
 * The `forwardedProps` of an edit's (`regenerate` false) or a regenerate's run: the rewind when
 * asked for, and a regenerate's mark (`regenerate: true`, so it forks on any server).
 */
export function forkProps(regenerate: boolean, rewind: boolean): Record<string, unknown> {
  return { ...(rewind ? { rewindFiles: true } : {}), ...(regenerate ? { regenerate: true } : {}) };
}

/** The history of a regenerate: the messages up to and including user message `id`. */
export function regeneratedHistory(messages: Message[], id: string): Message[] | undefined {
  const at = messages.findIndex((m) => m.id === id && m.role === "user");
  return at < 0 ? undefined : messages.slice(0, at + 1);
}

/** The last top-level assistant message of each turn, with the user message it answers. */
export function answers(messages: Message[]): Map<string, string> {
  const found = new Map<string, string>();
  let user: string | undefined;
  let last: string | undefined;
  const close = () => {
    if (user && last) found.set(last, user);
  };
  for (const m of messages) {
    if ((m as { subagentRunId?: string }).subagentRunId) continue;
    if (m.role === "user") {
      close();
      user = m.id;
      last = undefined;
    } else if (m.role === "assistant") {
      last = m.id;
    }
  }
  close();
  return found;
}

/** The "rewind files" choice; unchecked leaves it to the agent's setting (off unless configured). */
function rewindChoice(): { label: HTMLElement; input: HTMLInputElement } {
  const input = h("input", { type: "checkbox", class: "rewind-files" });
  const label = h(
    "label",
    { class: "rewind-choice small", title: "Undo what the agent's file tools changed after this point (commands' changes are not undone). Unchecked: the agent's own setting decides." },
    input,
    " Rewind files",
  );
  return { label, input };
}

/**
 * The row under a user message: "Edit", which opens an inline editor over the bubble (save sends
 * the edit, cancel closes it), and `nav` (its branches).
 */
export function userTools(msg: HTMLElement, messageId: string, text: () => string, actions: ForkActions): HTMLElement {
  const edit = h("button", { type: "button", class: "link edit-message", title: "Edit this message and run the conversation again from it" }, "Edit");
  const row = h("div", { class: "msg-tools" }, edit);
  edit.addEventListener("click", () => {
    if (msg.querySelector(".msg-editor")) return;
    const area = h("textarea", { class: "edit-text", rows: 3, "aria-label": "Edited message" });
    area.value = text();
    const rewind = rewindChoice();
    const close = () => {
      form.remove();
      msg.classList.remove("editing");
    };
    const form = h(
      "form",
      { class: "msg-editor" },
      area,
      h(
        "div",
        { class: "editor-row" },
        rewind.label,
        h("button", { type: "button", class: "ghost cancel-edit", onclick: close }, "Cancel"),
        h("button", { type: "submit", class: "primary save-edit" }, "Save & send"),
      ),
    );
    form.addEventListener("submit", (event) => {
      event.preventDefault();
      const value = area.value.trim();
      if (!value || edit.disabled) return;
      close();
      actions.edit(messageId, value, rewind.input.checked);
    });
    area.addEventListener("keydown", (event) => {
      if (event.key === "Escape") close();
      else if (event.key === "Enter" && !event.shiftKey && !event.isComposing) {
        event.preventDefault();
        form.requestSubmit();
      }
    });
    msg.classList.add("editing");
    msg.insertBefore(form, row);
    area.focus();
  });
  return row;
}

/**
 * The row under a turn's last answer: "Regenerate", which asks (with the rewind choice) and
 * then runs the thread again from the user message it answers.
 */
export function answerTools(userMessageId: () => string, actions: ForkActions): HTMLElement {
  const regenerate = h("button", { type: "button", class: "link regenerate", title: "Answer the message again" }, "↻ Regenerate");
  const row = h("div", { class: "msg-tools" }, regenerate);
  regenerate.addEventListener("click", () => {
    if (row.querySelector(".regen-confirm")) return;
    const rewind = rewindChoice();
    const bar = h(
      "div",
      { class: "regen-confirm" },
      h("span", { class: "muted small" }, "Regenerate this answer?"),
      rewind.label,
      h("button", { type: "button", class: "ghost cancel-regen", onclick: () => bar.remove() }, "Cancel"),
      h(
        "button",
        {
          type: "button",
          class: "primary confirm-regen",
          onclick: () => {
            if (regenerate.disabled) return;
            bar.remove();
            actions.regenerate(userMessageId(), rewind.input.checked);
          },
        },
        "Regenerate",
      ),
    );
    row.append(bar);
  });
  return row;
}

/** Enables or disables every edit, regenerate and branch control under `root`. */
export function setForkControls(root: HTMLElement, enabled: boolean): void {
  root.classList.toggle("forks-locked", !enabled);
  for (const button of root.querySelectorAll<HTMLButtonElement>(".msg-tools button, .msg-editor button[type=submit]")) {
    if (button.classList.contains("branch-prev") || button.classList.contains("branch-next")) {
      if (!enabled) button.disabled = true;
      else button.disabled = button.dataset.end === "true";
    } else {
      button.disabled = !enabled;
    }
  }
}

/** The `antigravity:rewind` report: what was restored or removed, what was not and why, commands. */
export function rewindView(report: RewindReport, links: PathLinks): HTMLElement {
  const box = h("div", { class: "rewind-report" });
  const changed = report.restored.length + report.notRestored.length;
  box.append(h("div", { class: "rewind-head" }, h("span", { class: "badge" }, "rewind"), " ", report.unknown ? "Files not rewound" : changed ? "Files rewound" : "No file to rewind"));
  if (report.restored.length) {
    const list = h("ul", { class: "rewind-restored" });
    for (const r of report.restored) {
      list.append(h("li", { "data-action": r.action }, h("span", { class: `status ${r.action === "removed" ? "removed" : "done"}` }, r.action), pathView(r.path, links)));
    }
    box.append(list);
  }
  if (report.notRestored.length) {
    const list = h("ul", { class: "rewind-not-restored" });
    for (const r of report.notRestored) {
      list.append(h("li", {}, h("span", { class: "status error" }, "not restored"), pathView(r.path, links), h("div", { class: "why muted small" }, r.why)));
    }
    box.append(list);
  }
  if (report.commandsAfter > 0) {
    const n = report.commandsAfter;
    box.append(
      h("div", { class: "commands-after" }, n === 1 ? "1 command ran after this point; its changes were not undone." : `${n} commands ran after this point; their changes were not undone.`),
    );
  }
  if (report.unknown) box.append(h("div", { class: "rewind-unknown" }, report.unknown));
  if (!changed && !report.unknown && report.commandsAfter === 0) {
    box.append(h("div", { class: "muted small" }, "The file tools changed nothing after this point."));
  }
  return box;
}
