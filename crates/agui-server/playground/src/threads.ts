// The thread list, from the server: `GET <path>/threads` page by page, kept live by
// `GET <path>/threads/events`, renamed, archived and deleted through the thread routes. Only
// what the server says is kept (nothing in the browser's storage).
import { ApiError, Routes, apiFetch, apiJson, ensureOk, readEventStream } from "./api";
import type { BranchInfo } from "./branches";

/** A thread as the server summarises it (`ThreadSummary`). */
export interface ThreadSummary {
  id: string;
  title: string;
  createdAt: string;
  updatedAt: string;
  status: "running" | "waiting" | "idle" | "hibernated";
  waitingFor?: "question" | "approval" | "frontend_tool";
  archived: boolean;
  messageCount: number;
  workspaceBytes: number;
  /** The current branch's id (issue 42). */
  branch?: string;
  /** The other branches, oldest first. */
  branches?: BranchInfo[];
}

interface ThreadPage {
  threads: ThreadSummary[];
  nextCursor: string | null;
}

interface ThreadEvent {
  type: "created" | "updated" | "status" | "deleted";
  thread: Partial<ThreadSummary> & { id: string };
}

/** How many threads one page asks for. */
const PAGE_SIZE = 50;

/** The caller's threads as far as the pages loaded so far and the live events tell. */
export class ThreadIndex {
  private readonly summaries = new Map<string, ThreadSummary>();
  /** Threads listed by this page before the server listed them. */
  private readonly provisionals = new Set<string>();
  /** The next page's cursor; `undefined` before the first page, `null` after the last. */
  private cursor: string | null | undefined;
  private loading: Promise<void> | undefined;
  private listening = false;
  /** Archived threads are listed too (`archived=all`). */
  showArchived = false;
  /** Called after every change (a page, an event, an edit). */
  onChange: () => void = () => {};
  /** Called with each live event, after it is applied. */
  onEvent: (event: ThreadEvent["type"], thread: ThreadSummary | { id: string }) => void = () => {};
  /** The last failure to load or listen, shown under the list. */
  error = "";

  constructor(private readonly routes: Routes) {}

  get(id: string): ThreadSummary | undefined {
    return this.summaries.get(id);
  }

  /** Whether another page can be loaded. */
  get hasMore(): boolean {
    return this.cursor !== null;
  }

  get isLoading(): boolean {
    return this.loading !== undefined;
  }

  /** How many threads are loaded. */
  get size(): number {
    return this.visible().length;
  }

  /** The listed threads, newest activity first (then by id), archived ones only when shown. */
  visible(): ThreadSummary[] {
    return [...this.summaries.values()]
      .filter((t) => this.showArchived || !t.archived)
      .sort((a, b) => (a.updatedAt === b.updatedAt ? (a.id < b.id ? -1 : 1) : a.updatedAt < b.updatedAt ? 1 : -1));
  }

  /** Loads the next page (the first one the first time); one load at a time. */
  loadMore(): Promise<void> {
    if (this.cursor === null) return Promise.resolve();
    this.loading ??= this.load().finally(() => {
      this.loading = undefined;
      this.onChange();
    });
    return this.loading;
  }

  /** Starts again from the first page (after the archived toggle, or a lost event stream). */
  async reload(): Promise<void> {
    await this.loading;
    for (const id of [...this.summaries.keys()]) if (!this.provisionals.has(id)) this.summaries.delete(id);
    this.cursor = undefined;
    await this.loadMore();
  }

  private async load(): Promise<void> {
    const query: Record<string, string> = { limit: String(PAGE_SIZE), archived: this.showArchived ? "all" : "false" };
    if (this.cursor) query.cursor = this.cursor;
    try {
      const page = await apiJson<ThreadPage>(this.routes.threads(query), "Could not list the threads");
      for (const thread of page.threads) {
        this.summaries.set(thread.id, thread);
        this.provisionals.delete(thread.id);
      }
      this.cursor = page.nextCursor ?? null;
      this.error = "";
    } catch (error) {
      this.error = (error as Error).message;
      // A failed page is not retried by scrolling: the user can press the button again.
      if (error instanceof ApiError && error.status === 404) this.cursor = null;
    }
  }

  /** A thread this page just started (its first message sent): listed until the server says more. */
  provisional(id: string, firstMessage: string): void {
    if (this.summaries.has(id)) return;
    this.provisionals.add(id);
    const now = new Date().toISOString().replace(/\.\d+Z$/, "Z");
    this.summaries.set(id, {
      id,
      title: titleOf(firstMessage),
      createdAt: now,
      updatedAt: now,
      status: "running",
      archived: false,
      messageCount: 1,
      workspaceBytes: 0,
    });
    this.onChange();
  }

  /** Unlists a provisional thread the server did not take (its first run was refused). */
  forgetProvisional(id: string): void {
    if (!this.provisionals.delete(id)) return;
    this.summaries.delete(id);
    this.onChange();
  }

  /** Asks the server for one thread's summary (after a run, in case an event was missed). */
  async refresh(id: string): Promise<void> {
    const res = await apiFetch(this.routes.thread(id));
    if (res.status === 404) {
      await res.body?.cancel();
      return;
    }
    if (!res.ok) {
      await res.body?.cancel();
      return;
    }
    this.summaries.set(id, (await res.json()) as ThreadSummary);
    this.provisionals.delete(id);
    this.onChange();
  }

  async rename(id: string, title: string): Promise<void> {
    await this.patch(id, { title }, "Could not rename the thread");
  }

  async setArchived(id: string, archived: boolean): Promise<void> {
    await this.patch(id, { archived }, archived ? "Could not archive the thread" : "Could not unarchive the thread");
  }

  /** Makes `branch` the thread's current branch (an ApiError with the status when refused: 409 busy, 422 unknown). */
  async switchBranch(id: string, branch: string): Promise<void> {
    await this.patch(id, { branch }, "Could not switch branches");
  }

  private async patch(id: string, body: { title?: string; archived?: boolean; branch?: string }, what: string): Promise<void> {
    const summary = await apiJson<ThreadSummary>(this.routes.thread(id), what, {
      method: "PATCH",
      headers: { "Content-Type": "application/json" },
      body: JSON.stringify(body),
    });
    this.summaries.set(id, summary);
    this.onChange();
  }

  /** Deletes the thread on the server (its history and workspace). */
  async remove(id: string): Promise<void> {
    const res = await apiFetch(this.routes.thread(id), { method: "DELETE" });
    // Already gone is what the user wanted.
    if (res.status !== 404) await ensureOk(res, "Could not delete the thread");
    else await res.body?.cancel();
    this.summaries.delete(id);
    this.onChange();
  }

  /**
   * Follows `GET <path>/threads/events` for as long as the page lives, reconnecting with a
   * growing pause; after a reconnection the first page is loaded again (events may be lost).
   */
  listen(): void {
    if (this.listening) return;
    this.listening = true;
    void this.follow();
  }

  private async follow(): Promise<void> {
    let pause = 1_000;
    let first = true;
    for (;;) {
      let opened = false;
      try {
        const res = await apiFetch(this.routes.events(), { headers: { Accept: "text/event-stream" } });
        if (res.status === 404 || res.status === 405 || res.status === 401) {
          await res.body?.cancel();
          this.error =
            res.status === 401
              ? "The thread list needs the server's access token."
              : "This server sends no live thread updates: the list refreshes after each run.";
          this.listening = false;
          this.onChange();
          return;
        }
        await ensureOk(res, "Could not follow the threads");
        opened = true;
        // Says the list is live (tests wait for it before another client acts).
        document.body.dataset.threadsLive = "true";
        if (!first) await this.reload();
        first = false;
        pause = 1_000;
        await readEventStream(res, (type, data) => {
          if (type === "thread") this.apply(data);
        });
      } catch {
        // The stream broke (server restarted, network): try again below.
      }
      delete document.body.dataset.threadsLive;
      if (!opened) pause = Math.min(pause * 2, 15_000);
      await new Promise((resolve) => setTimeout(resolve, pause));
    }
  }

  private apply(data: string): void {
    let event: ThreadEvent;
    try {
      event = JSON.parse(data) as ThreadEvent;
    } catch {
      return;
    }
    const id = event.thread?.id;
    if (typeof id !== "string") return;
    this.provisionals.delete(id);
    if (event.type === "deleted") {
      this.summaries.delete(id);
    } else {
      const summary = { ...this.summaries.get(id), ...event.thread } as ThreadSummary;
      if (summary.status !== "waiting") delete summary.waitingFor;
      this.summaries.set(id, summary);
    }
    this.onChange();
    this.onEvent(event.type, this.summaries.get(id) ?? { id });
  }
}

/** The title the server gives a thread: the first line of its first message, 80 characters. */
export function titleOf(text: string): string {
  return [...(text.trim().split(/\r?\n/)[0] ?? "")].slice(0, 80).join("");
}

/** A fresh thread id (the server accepts letters, digits and `-_.:@`). */
export function newThreadId(): string {
  return `pg-${crypto.randomUUID()}`;
}
