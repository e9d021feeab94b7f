// The side bar's thread list: the ThreadIndex's threads with their live status, a search over
// the loaded pages' titles, a menu per thread (rename inline, archive, delete after a
// confirmation), the archived toggle and "Load more" (also when it scrolls into view).
import { formatBytes } from "./api";
import { h } from "./dom";
import type { ThreadIndex, ThreadSummary } from "./threads";

/** What the list asks of the page. */
export interface ThreadListHost {
  /** The open thread's id. */
  current(): string;
  /** Opens a listed thread. */
  open(id: string): void;
  /** Asks the user to confirm; resolves true to go ahead. */
  confirm(message: string, action: string): Promise<boolean>;
  /** Shows an error. */
  fail(message: string): void;
  /** The open thread was deleted. */
  deletedCurrent(): void;
}

/** What a status badge says. */
function statusText(thread: ThreadSummary): string {
  if (thread.status === "waiting") {
    const what = thread.waitingFor === "frontend_tool" ? "frontend tool" : thread.waitingFor;
    return what ? `waiting · ${what}` : "waiting";
  }
  return thread.status ?? "idle";
}

function tooltip(thread: ThreadSummary): string {
  const updated = new Date(thread.updatedAt);
  const when = Number.isNaN(updated.getTime()) ? thread.updatedAt : updated.toLocaleString();
  return [
    thread.title || "Untitled",
    thread.id,
    `updated ${when} · ${thread.messageCount ?? 0} messages · workspace ${formatBytes(thread.workspaceBytes ?? 0)}`,
  ].join("\n");
}

/** How long ago `time` was, briefly (`just now`, `5 min ago`, `3 h ago`, a date). */
function ago(time: string): string {
  const then = new Date(time).getTime();
  if (Number.isNaN(then)) return "";
  const minutes = Math.floor((Date.now() - then) / 60_000);
  if (minutes < 1) return "just now";
  if (minutes < 60) return `${minutes} min ago`;
  if (minutes < 24 * 60) return `${Math.floor(minutes / 60)} h ago`;
  return new Date(then).toLocaleDateString();
}

/** The thread list's view. */
export class ThreadListView {
  private query = "";
  private editing: { id: string; input: HTMLInputElement } | undefined;
  private menu: HTMLElement | undefined;
  /** The thread whose menu is open. */
  private menuFor: string | undefined;
  private readonly more: HTMLElement;
  private readonly moreButton: HTMLButtonElement;
  private readonly moreNote: HTMLElement;
  private readonly observer: IntersectionObserver;

  constructor(
    private readonly index: ThreadIndex,
    private readonly list: HTMLElement,
    search: HTMLInputElement,
    archived: HTMLInputElement,
    private readonly host: ThreadListHost,
  ) {
    this.moreButton = h("button", { type: "button", class: "link", onclick: () => void this.index.loadMore() }, "Load more");
    this.moreNote = h("div", { class: "muted small" });
    this.more = h("li", { class: "more" }, this.moreNote, this.moreButton);
    // Scrolling to the end of the list loads the next page (not after a failure: the button then).
    this.observer = new IntersectionObserver(
      (entries) => {
        if (entries.at(-1)?.isIntersecting && this.index.hasMore && !this.index.isLoading && !this.index.error) {
          void this.index.loadMore();
        }
      },
      { root: list },
    );
    search.addEventListener("input", () => {
      this.query = search.value.trim().toLowerCase();
      this.render();
    });
    archived.addEventListener("change", () => {
      this.index.showArchived = archived.checked;
      void this.index.reload();
    });
    document.addEventListener("click", (event) => {
      if (this.menu && !this.menu.parentElement?.contains(event.target as Node)) this.closeMenu();
    });
    document.addEventListener("keydown", (event) => {
      if (event.key === "Escape") this.closeMenu();
    });
    // "5 min ago" grows old.
    setInterval(() => this.render(), 60_000);
  }

  render(): void {
    // Not while a title is edited (it would lose its input): editing ends with a render.
    if (this.editing) return;
    const all = this.index.visible();
    const shown = this.query ? all.filter((t) => (t.title || "untitled").toLowerCase().includes(this.query)) : all;
    const items: HTMLElement[] = shown.map((t) => this.item(t));
    if (!shown.length && !this.index.isLoading) {
      items.push(h("li", { class: "empty muted small" }, this.query ? "No loaded thread has that in its title." : "No threads yet."));
    }
    this.moreButton.hidden = !this.index.hasMore;
    this.moreButton.disabled = this.index.isLoading;
    this.moreNote.textContent = this.index.error
      ? this.index.error
      : this.index.isLoading
        ? "Loading…"
        : this.query && this.index.hasMore
          ? `Searched the ${all.length} loaded threads; older ones are not loaded yet.`
          : "";
    this.moreNote.classList.toggle("error", Boolean(this.index.error));
    items.push(this.more);
    // An open menu stays open on its thread's new row (live events re-render the list).
    const menuRow = this.menu && items.find((li) => li.dataset.threadId === this.menuFor);
    if (this.menu && menuRow) menuRow.append(this.menu);
    else this.closeMenu();
    this.list.replaceChildren(...items);
    // Observed afresh: its first report says whether it is in view now (a page that did not fill
    // the list loads the next one).
    this.observer.unobserve(this.more);
    this.observer.observe(this.more);
  }

  private item(thread: ThreadSummary): HTMLElement {
    const li = h("li", {
      class: `${thread.id === this.host.current() ? "active" : ""}${thread.archived ? " archived" : ""}`,
      "data-thread-id": thread.id,
      "data-status": thread.status,
    });
    li.append(
      h(
        "button",
        { type: "button", class: "thread", title: tooltip(thread), onclick: () => this.host.open(thread.id) },
        h("span", { class: `thread-title${thread.title ? "" : " untitled"}` }, thread.title || "Untitled"),
        h(
          "span",
          { class: "thread-meta" },
          h("span", { class: `thread-status ${thread.status}` }, statusText(thread)),
          thread.archived ? h("span", { class: "thread-archived" }, "archived") : "",
          h("span", { class: "thread-when" }, ago(thread.updatedAt)),
        ),
      ),
      h(
        "button",
        {
          type: "button",
          class: "thread-more",
          "aria-label": `Actions for ${thread.title || "Untitled"}`,
          "aria-haspopup": "menu",
          onclick: (event: Event) => {
            event.stopPropagation();
            this.toggleMenu(li, thread);
          },
        },
        "⋯",
      ),
    );
    return li;
  }

  private toggleMenu(li: HTMLElement, thread: ThreadSummary): void {
    const open = this.menu?.parentElement === li;
    this.closeMenu();
    if (open) return;
    const item = (label: string, run: (row: HTMLElement, current: ThreadSummary) => void, danger = false) =>
      h(
        "button",
        {
          type: "button",
          role: "menuitem",
          class: danger ? "danger-text" : "",
          onclick: (event: Event) => {
            event.stopPropagation();
            // The row may have been drawn again since the menu opened: its current one.
            const row = this.menu?.parentElement;
            this.closeMenu();
            run(row ?? li, this.index.get(thread.id) ?? thread);
          },
        },
        label,
      );
    this.menu = h(
      "div",
      { class: "thread-menu", role: "menu" },
      item("Rename", (row, current) => this.startRename(row, current)),
      item(thread.archived ? "Unarchive" : "Archive", (_, current) => void this.archive(current)),
      item("Delete…", (_, current) => void this.remove(current), true),
    );
    this.menuFor = thread.id;
    li.append(this.menu);
    this.menu.querySelector("button")?.focus();
  }

  private closeMenu(): void {
    this.menu?.remove();
    this.menu = undefined;
    this.menuFor = undefined;
  }

  private startRename(li: HTMLElement, thread: ThreadSummary): void {
    const input = h("input", {
      type: "text",
      class: "thread-rename",
      value: thread.title,
      maxlength: 200,
      "aria-label": "Thread title",
    });
    this.editing = { id: thread.id, input };
    li.querySelector(".thread")?.replaceWith(input);
    const finish = async (save: boolean) => {
      if (this.editing?.input !== input) return;
      this.editing = undefined;
      const title = input.value.trim();
      if (save && title && title !== thread.title) {
        try {
          await this.index.rename(thread.id, title);
        } catch (error) {
          this.host.fail((error as Error).message);
        }
      }
      this.render();
    };
    input.addEventListener("keydown", (event) => {
      if (event.key === "Enter") {
        event.preventDefault();
        void finish(true);
      } else if (event.key === "Escape") {
        event.preventDefault();
        void finish(false);
      }
    });
    input.addEventListener("blur", () => void finish(true));
    input.focus();
    input.select();
  }

  private async archive(thread: ThreadSummary): Promise<void> {
    try {
      await this.index.setArchived(thread.id, !thread.archived);
    } catch (error) {
      this.host.fail((error as Error).message);
    }
  }

  private async remove(thread: ThreadSummary): Promise<void> {
    const name = thread.title || "this untitled thread";
    if (!(await this.host.confirm(`Delete “${name}”? Its history and its workspace's files are deleted on the server.`, "Delete"))) return;
    try {
      await this.index.remove(thread.id);
      if (thread.id === this.host.current()) this.host.deletedCurrent();
    } catch (error) {
      this.host.fail((error as Error).message);
    }
  }
}
