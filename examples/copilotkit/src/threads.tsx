// The thread drawer: the agent's threads as the agui-antigravity server keeps them, through
// CopilotKit's own `useThreads()` (the runtime's `/threads` endpoints, which AntigravityRunner
// serves from the server), with rename, archive and delete reaching the server. CopilotKit's
// `CopilotThreadsDrawer` needs a CopilotKit license (it shows a locked view without one), so the
// example draws its own list on the same hook. The list stays live through the app server's
// relay of the server's thread events (`/api/threads/events`).
import { useEffect, useRef, useState } from "react";
import { useThreads } from "@copilotkit/react-core/v2";

const AGENT = "antigravity";

/** Calls `refetch` (at most every 300 ms) whenever the server says a thread changed. */
function useLiveThreads(refetch: () => void) {
  const latest = useRef(refetch);
  latest.current = refetch;
  useEffect(() => {
    let timer: ReturnType<typeof setTimeout> | undefined;
    const events = new EventSource("/api/threads/events");
    events.addEventListener("thread", () => {
      clearTimeout(timer);
      timer = setTimeout(() => latest.current(), 300);
    });
    return () => {
      clearTimeout(timer);
      events.close();
    };
  }, []);
}

/** One thread's row: its title (or "New thread"), and rename, archive and delete. */
function ThreadRow({
  thread,
  active,
  onRename,
  onArchive,
  onDelete,
}: {
  thread: { id: string; name: string | null; archived: boolean; updatedAt: string };
  active: boolean;
  onRename: (name: string) => Promise<void>;
  onArchive: (archived: boolean) => Promise<void>;
  onDelete: () => Promise<void>;
}) {
  const [editing, setEditing] = useState(false);
  const [draft, setDraft] = useState(thread.name ?? "");
  const [error, setError] = useState<string | null>(null);
  const attempt = (action: () => Promise<void>) => action().then(() => setError(null), (e: unknown) => setError(e instanceof Error ? e.message : String(e)));
  return (
    <li className={`thread-row${active ? " active" : ""}${thread.archived ? " archived" : ""}`} data-testid="thread-row" data-thread-id={thread.id} data-archived={String(thread.archived)}>
      {editing ? (
        <form
          className="thread-rename"
          onSubmit={(event) => {
            event.preventDefault();
            setEditing(false);
            void attempt(() => onRename(draft));
          }}
        >
          <input data-testid="thread-rename-input" value={draft} autoFocus onChange={(event) => setDraft(event.target.value)} onBlur={() => setEditing(false)} />
        </form>
      ) : (
        <a className="thread-title" href={`#${encodeURIComponent(thread.id)}`} title={thread.id}>
          {thread.name ?? <em>New thread</em>}
        </a>
      )}
      <span className="thread-actions">
        <button type="button" data-testid="thread-rename" title="Rename" onClick={() => (setDraft(thread.name ?? ""), setEditing(true))}>
          ✎
        </button>
        <button type="button" data-testid="thread-archive" title={thread.archived ? "Unarchive" : "Archive"} onClick={() => void attempt(() => onArchive(!thread.archived))}>
          {thread.archived ? "⤒" : "⤓"}
        </button>
        <button type="button" data-testid="thread-delete" title="Delete" onClick={() => confirm("Delete this thread, its history and its files?") && void attempt(onDelete)}>
          ✕
        </button>
      </span>
      {error ? <span className="thread-error">{error}</span> : null}
    </li>
  );
}

/** The drawer: the server's threads of the agent, newest first; the page's thread highlighted. */
export function ThreadsDrawer({ threadId, runs }: { threadId: string; runs: number }) {
  const [showArchived, setShowArchived] = useState(false);
  const { threads, isLoading, error, renameThread, archiveThread, unarchiveThread, deleteThread, refetchThreads } = useThreads({ agentId: AGENT, includeArchived: showArchived });
  useLiveThreads(refetchThreads);
  // A run's first message gives its thread a title: ask again when a run ends.
  useEffect(() => {
    if (runs > 0) refetchThreads();
  }, [runs, refetchThreads]);
  return (
    <nav className="threads-drawer" data-testid="threads-drawer" data-loading={String(isLoading)}>
      <div className="drawer-head">
        <strong>Threads</strong>
        <label className="show-archived">
          <input type="checkbox" data-testid="threads-show-archived" checked={showArchived} onChange={(event) => setShowArchived(event.target.checked)} /> archived
        </label>
      </div>
      {error ? <p className="drawer-error">{error.message}</p> : null}
      {isLoading && threads.length === 0 ? <p className="drawer-note">Loading…</p> : null}
      {!isLoading && threads.length === 0 ? <p className="drawer-note">No threads yet.</p> : null}
      <ul className="thread-list">
        {threads.map((thread) => (
          <ThreadRow
            key={thread.id}
            thread={thread}
            active={thread.id === threadId}
            onRename={(name) => renameThread(thread.id, name)}
            onArchive={(archived) => (archived ? archiveThread(thread.id) : unarchiveThread(thread.id))}
            onDelete={async () => {
              await deleteThread(thread.id);
              if (thread.id === threadId) location.hash = crypto.randomUUID();
            }}
          />
        ))}
      </ul>
    </nav>
  );
}
