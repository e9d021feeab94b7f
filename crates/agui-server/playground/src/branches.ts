// A thread's branches (issue 42): the server lists the current one (`branch`) and the others
// (`branches`, each with `leftAt`, the message where the thread left it), and switches with
// `PATCH {"branch"}`. The page shows them where they part: at a user message, its versions are
// the branches that left there plus the current one ("‹ 2/2 ›"). A branch switched away from by
// a PATCH parts where the branch switched to did (the server lists it so); older servers listed
// `leftAt: ""` there, so the page also remembers where each branch parts (for the tab's
// session) and gives the one it leaves the place of the one it switches to; every branch is also
// in the header's branch menu, wherever it parts.
import { h } from "./dom";

/** A branch the thread left (`ThreadSummary.branches`). */
export interface BranchInfo {
  id: string;
  /** The message where the thread left it; `""` when it was left by a switch. */
  leftAt: string;
  leftWhen: string;
  messageCount: number;
}

/** What the page needs of a thread's summary. */
export interface Branched {
  id: string;
  branch?: string;
  branches?: BranchInfo[];
  messageCount?: number;
}

interface Saved {
  /** Where each branch parts from the others, by branch id. */
  anchors: Record<string, string>;
  /** The versions at a message in the order first seen, by message id. */
  order: Record<string, string[]>;
  /** The current branch when last seen. */
  current?: string;
}

const STORAGE_PREFIX = "agui-playground:branches:";

/** Where one thread's branches part, as far as the server said and this tab saw. */
export class BranchMemory {
  private saved: Saved;
  /** What was stored last (the storage is written only on a change). */
  private stored: string;

  constructor(private readonly threadId: string) {
    this.saved = load(threadId);
    this.stored = JSON.stringify(this.saved);
  }

  /** Learns from a summary: the server's `leftAt`s, and where a switch left the last current branch. */
  observe(summary: Branched | undefined): void {
    if (!summary?.branch) return;
    const { anchors } = this.saved;
    const listed = summary.branches ?? [];
    for (const b of listed) if (b.leftAt) anchors[b.id] = b.leftAt;
    const before = this.saved.current;
    if (before && before !== summary.branch) {
      const left = listed.find((b) => b.id === before);
      // Switched away from `before` (by this page or another client): it parts where the branch
      // switched to does.
      const at = anchors[summary.branch];
      if (left && !left.leftAt && at) anchors[before] = at;
    }
    this.saved.current = summary.branch;
    this.save();
  }

  /** The versions at user message `messageId` (branch ids, in a stable order) when there are several. */
  versionsAt(summary: Branched | undefined, messageId: string): string[] | undefined {
    if (!summary?.branch) return undefined;
    const here = (summary.branches ?? []).filter((b) => (b.leftAt || this.saved.anchors[b.id]) === messageId).map((b) => b.id);
    if (!here.length) return undefined;
    const candidates = [...here, summary.branch];
    // Remembered in full (a branch out of sight now keeps its place for later).
    const order = this.saved.order[messageId] ?? [];
    for (const id of candidates) if (!order.includes(id)) order.push(id);
    this.saved.order[messageId] = order;
    this.save();
    return order.filter((id) => candidates.includes(id));
  }

  /** Stores what was learned, when it was something new. */
  private save(): void {
    const now = JSON.stringify(this.saved);
    if (now === this.stored) return;
    this.stored = now;
    store(this.threadId, this.saved);
  }
}

/** The memory of every thread seen in this page. */
const memories = new Map<string, BranchMemory>();

/** The branch memory of `threadId`. */
export function branchMemory(threadId: string): BranchMemory {
  let memory = memories.get(threadId);
  if (!memory) {
    memory = new BranchMemory(threadId);
    memories.set(threadId, memory);
  }
  return memory;
}

function load(threadId: string): Saved {
  try {
    const raw = sessionStorage.getItem(STORAGE_PREFIX + threadId);
    const value = raw ? (JSON.parse(raw) as Partial<Saved>) : {};
    return { anchors: value.anchors ?? {}, order: value.order ?? {}, current: value.current };
  } catch {
    return { anchors: {}, order: {} };
  }
}

function store(threadId: string, saved: Saved): void {
  try {
    sessionStorage.setItem(STORAGE_PREFIX + threadId, JSON.stringify(saved));
  } catch {
    // Storage full or refused: the page still works from what the server says.
  }
}

/**
 * The "‹ k/n ›" control of a user message (`versions` from BranchMemory.versionsAt), or an empty
 * one; `disabled` while the thread cannot switch (a run, a question).
 */
export function branchNav(versions: string[] | undefined, current: string | undefined, disabled: boolean, go: (branchId: string) => void): HTMLElement {
  const nav = h("span", { class: "branch-nav" });
  if (!versions || !current) {
    nav.hidden = true;
    return nav;
  }
  const at = versions.indexOf(current);
  const step = (by: number) => {
    const target = versions[at + by];
    return h(
      "button",
      {
        type: "button",
        class: by < 0 ? "branch-prev" : "branch-next",
        title: by < 0 ? "The earlier version of the conversation from here" : "The later version of the conversation from here",
        "aria-label": by < 0 ? "Previous version" : "Next version",
        disabled: disabled || !target,
        "data-end": target ? undefined : "true",
        onclick: () => target && go(target),
      },
      by < 0 ? "‹" : "›",
    );
  };
  nav.append(step(-1), h("span", { class: "branch-pos" }, `${at + 1}/${versions.length}`), step(1));
  return nav;
}

/** How a branch is named in the header's menu. */
function branchLabel(b: BranchInfo, anchorText: (messageId: string) => string | undefined): string {
  const when = new Date(b.leftWhen);
  const left = Number.isNaN(when.getTime()) ? "" : `left ${when.toLocaleString()} · `;
  const at = b.leftAt ? anchorText(b.leftAt) : undefined;
  const where = b.leftAt ? ` · parts at “${at ?? b.leftAt}”` : "";
  return `Switch to the branch ${left}${b.messageCount} messages${where}`;
}

/**
 * Fills the header's branch menu (a `<select>`): the current branch and the others, hidden when
 * the thread has only one. `anchorText` shortens a message id to its text, when shown.
 */
export function renderBranchMenu(select: HTMLSelectElement, summary: Branched | undefined, disabled: boolean, anchorText: (messageId: string) => string | undefined): void {
  const others = summary?.branches ?? [];
  select.hidden = !summary?.branch || !others.length;
  select.disabled = disabled;
  if (select.hidden || !summary?.branch) {
    select.replaceChildren();
    return;
  }
  const key = JSON.stringify([summary.branch, others, summary.messageCount]);
  if (select.dataset.key !== key) {
    select.dataset.key = key;
    select.replaceChildren(
      h("option", { value: summary.branch, selected: true }, `This branch (of ${others.length + 1})`),
      ...others.map((b) => h("option", { value: b.id }, branchLabel(b, anchorText))),
    );
  }
  // Back on the current one after a refused switch.
  select.value = summary.branch;
}

/** Why a switch was refused, for the user. */
export function switchFailure(status: number | undefined, message: string): string {
  if (status === 409) {
    return "The thread is busy (a run, a turn, or a question or approval waiting for an answer): let it finish, stop it or answer first, then switch branches.";
  }
  if (status === 422) return `${message} (the branch list was out of date: it is loaded again).`;
  return message;
}
