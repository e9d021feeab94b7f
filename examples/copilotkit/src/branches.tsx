// Edit, regenerate and branches (issue 42) on CopilotKit's own buttons. CopilotKit's chat draws
// an edit button on user messages (`onEditMessage`), a regenerate button on assistant messages
// (`onRegenerate`) and a branch navigation on user messages (`branchIndex`/`numberOfBranches`/
// `onSwitchToBranch`), but leaves what they do to the app:
// - an edit opens an editor in place of the message; sending it resends the message under its
//   id with the messages after it dropped (`editedHistory`), which the server takes for an edit
//   and forks the thread there;
// - a regenerate sends the history up to the answer's user message (`regenerateHistory`),
//   its run marked as a regenerate (`regenerateProps`: `forwardedProps.regenerate`), so a
//   server that has not read the thread back yet (restarted, another replica) forks too
//   instead of taking it for a retry and restating the old answer; an edit is not marked;
// - the navigation shows a message's alternatives: the thread's branches (the app server's
//   `/api/branches/<thread>`, from the thread's `branch` + `branches`) grouped by the message
//   where the thread left them (`branchesAt`), and switches with a PATCH, then reads the chosen
//   branch's messages again (a connect).
// A checkbox asks to rewind the files on an edit or a regenerate (`forwardedProps.rewindFiles`);
// the rewind's report and a refusal to fork (`CANNOT_FORK`) show above the chat.
import { createContext, useCallback, useContext, useEffect, useMemo, useRef, useState } from "react";
import type { AbstractAgent, Message } from "@ag-ui/client";
import { CopilotChatUserMessage, useCopilotKit } from "@copilotkit/react-core/v2";
import type { CopilotChatUserMessageProps } from "@copilotkit/react-core/v2";
import { CANNOT_FORK, branchesAt, editedHistory, forkErrorOf, regenerateHistory, regenerateProps, rewindReportOf } from "@agui-antigravity/client";
import type { MessageBranches, RewindReport, ThreadBranches } from "@agui-antigravity/client";

/** What the page remembers of a thread's branches (localStorage): where it left branches by a switch, and the order shown per message. */
interface Remembered {
  leftAt: Record<string, string>;
  order: Record<string, string[]>;
}

/** What shows above the chat after an edit or a regenerate. */
type Notice = { kind: "rewind"; report: RewindReport } | { kind: "error"; text: string };

interface Forks {
  /** The message being edited, if any. */
  editing: string | undefined;
  setEditing: (messageId: string | undefined) => void;
  /** A message's alternatives, when it has some. */
  branchesOf: (messageId: string) => MessageBranches | undefined;
  switchTo: (props: { message: { id: string }; branchIndex: number }) => void;
  edit: (messageId: string, content: string) => void;
  regenerate: (message: { id: string }) => void;
  rewindFiles: boolean;
  setRewindFiles: (rewind: boolean) => void;
  notice: Notice | undefined;
  dismiss: () => void;
  busy: boolean;
}

const ForksContext = createContext<Forks | undefined>(undefined);

const storageKey = (threadId: string) => `agui-branches:${threadId}`;

function remembered(threadId: string): Remembered {
  try {
    const parsed = JSON.parse(localStorage.getItem(storageKey(threadId)) ?? "null") as Remembered | null;
    if (parsed && typeof parsed.leftAt === "object" && typeof parsed.order === "object") return parsed;
  } catch {
    // a broken entry: start again
  }
  return { leftAt: {}, order: {} };
}

/** The text of a user message's content (a string, or text parts). */
function textOf(content: Message["content"]): string {
  if (typeof content === "string") return content;
  if (!Array.isArray(content)) return "";
  return content.map((part) => ((part as { type?: string; text?: string }).type === "text" ? ((part as { text?: string }).text ?? "") : "")).join("");
}

/**
 * The thread's branches and the actions of the chat's edit, regenerate and branch buttons, for
 * `agent` on `threadId`; `runs` (runs and connects ended) makes it read the branches again.
 */
export function useForks(agent: AbstractAgent, threadId: string, runs: number): Forks {
  const { copilotkit } = useCopilotKit();
  const [branches, setBranches] = useState<ThreadBranches | undefined>(undefined);
  const [memory, setMemory] = useState<Remembered>(() => remembered(threadId));
  const [editing, setEditing] = useState<string | undefined>(undefined);
  const [rewindFiles, setRewindFiles] = useState(false);
  const [notice, setNotice] = useState<Notice | undefined>(undefined);
  const [busy, setBusy] = useState(false);
  const refused = useRef(false);

  const remember = useCallback(
    (change: (memory: Remembered) => Remembered) =>
      setMemory((old) => {
        const next = change(old);
        localStorage.setItem(storageKey(threadId), JSON.stringify(next));
        return next;
      }),
    [threadId],
  );

  const load = useCallback(async () => {
    const response = await fetch(`/api/branches/${encodeURIComponent(threadId)}`);
    if (!response.ok) return;
    const list = (await response.json()) as ThreadBranches;
    setBranches(list);
    // The order each message's alternatives were shown in stays as it was; new ones go after.
    remember((old) => {
      const order = { ...old.order };
      for (const at of new Set(list.branches.map((b) => b.leftAt || old.leftAt[b.id]).filter(Boolean))) {
        order[at] = branchesAt(list, at, { leftAt: old.leftAt, order: old.order[at] })?.ids ?? order[at];
      }
      return { ...old, order };
    });
  }, [threadId, remember]);

  useEffect(() => {
    void load();
  }, [load, runs]);

  // The rewind's report and a refusal to fork, as the run streams them.
  useEffect(() => {
    const subscription = agent.subscribe({
      onCustomEvent: ({ event }) => {
        const report = rewindReportOf(event);
        if (report) setNotice({ kind: "rewind", report });
      },
      onRunErrorEvent: ({ event }) => {
        const error = forkErrorOf(event);
        if (!error) return;
        refused.current = true;
        setNotice({ kind: "error", text: error.message });
      },
    });
    return () => subscription.unsubscribe();
  }, [agent]);

  /**
   * Runs on `history` (`regenerate`: marked as a regenerate's run); a refused fork puts the
   * messages back as they were (the server changed nothing).
   */
  const fork = useCallback(
    async (history: Message[], regenerate: boolean) => {
      const before = agent.messages;
      refused.current = false;
      setNotice(undefined);
      agent.setMessages(history);
      try {
        await copilotkit.runAgent({ agent, forwardedProps: regenerate ? regenerateProps({ rewindFiles }) : { rewindFiles } });
      } catch (error) {
        if (!refused.current) setNotice({ kind: "error", text: error instanceof Error ? error.message : String(error) });
      }
      if (refused.current) agent.setMessages(before);
    },
    [agent, copilotkit, rewindFiles],
  );

  const edit = useCallback(
    (messageId: string, content: string) => {
      setEditing(undefined);
      void fork(editedHistory(agent.messages, messageId, content), false);
    },
    [agent, fork],
  );

  const regenerate = useCallback((message: { id: string }) => void fork(regenerateHistory(agent.messages, message.id), true), [agent, fork]);

  const branchesOf = useCallback(
    (messageId: string) => (branches ? branchesAt(branches, messageId, { leftAt: memory.leftAt, order: memory.order[messageId] }) : undefined),
    [branches, memory],
  );

  const switchTo = useCallback(
    ({ message, branchIndex }: { message: { id: string }; branchIndex: number }) => {
      const group = branchesOf(message.id);
      const target = group?.ids[branchIndex];
      if (!branches || !group || target === undefined || target === branches.current) return;
      void (async () => {
        setBusy(true);
        setNotice(undefined);
        try {
          const response = await fetch(`/api/branches/${encodeURIComponent(threadId)}`, {
            method: "POST",
            headers: { "content-type": "application/json" },
            body: JSON.stringify({ branch: target }),
          });
          if (!response.ok) {
            const body = (await response.json().catch(() => ({}))) as { error?: string };
            setNotice({ kind: "error", text: body.error ?? `switching branch failed (${response.status})` });
            return;
          }
          // The server lists the branch it left without the message it was left at: the page remembers it.
          remember((old) => ({ ...old, leftAt: { ...old.leftAt, [branches.current]: message.id }, order: { ...old.order, [message.id]: group.ids } }));
          agent.setMessages([]);
          await copilotkit.connectAgent({ agent });
          await load();
        } finally {
          setBusy(false);
        }
      })();
    },
    [agent, branches, branchesOf, copilotkit, load, remember, threadId],
  );

  return {
    editing,
    setEditing,
    branchesOf,
    switchTo,
    edit,
    regenerate,
    rewindFiles,
    setRewindFiles,
    notice,
    dismiss: () => setNotice(undefined),
    busy,
  };
}

/**
 * CopilotKit's error handler (`CopilotKitProvider`'s `onError`): as CopilotKit's own (the
 * console), except a refused fork, which the page shows above the chat with the server's reason.
 */
export function onCopilotKitError(event: { error: Error; code: string; context: Record<string, unknown> }): void {
  if (event.context?.runtimeErrorCode === CANNOT_FORK) return;
  console.error(`[CopilotKit] Error (${event.code}):`, event.error, event.context ?? {});
}

/** Provides `forks` to the chat's message slots. */
export function ForksProvider({ forks, children }: { forks: Forks; children: React.ReactNode }) {
  return <ForksContext.Provider value={forks}>{children}</ForksContext.Provider>;
}

/** The editor that takes a user message's place while it is edited. */
function MessageEditor({ message, onSend, onCancel }: { message: Message; onSend: (text: string) => void; onCancel: () => void }) {
  const [text, setText] = useState(() => textOf(message.content));
  return (
    <form
      className="message-editor"
      data-testid="message-editor"
      onSubmit={(event) => {
        event.preventDefault();
        if (text.trim()) onSend(text);
      }}
    >
      <textarea data-testid="message-editor-text" value={text} autoFocus rows={Math.min(8, text.split("\n").length + 1)} onChange={(event) => setText(event.target.value)} />
      <div className="message-editor-actions">
        <button type="button" onClick={onCancel}>
          Cancel
        </button>
        <button type="submit" data-testid="message-editor-send" disabled={!text.trim()}>
          Send
        </button>
      </div>
    </form>
  );
}

/** CopilotKit's user message with its edit button and branch navigation wired to the thread's branches. */
export function UserMessage(props: CopilotChatUserMessageProps) {
  const forks = useContext(ForksContext);
  const { message } = props;
  if (forks?.editing === message.id) {
    return <MessageEditor message={message as Message} onSend={(text) => forks.edit(message.id, text)} onCancel={() => forks.setEditing(undefined)} />;
  }
  const branches = forks?.branchesOf(message.id);
  return (
    <CopilotChatUserMessage
      {...props}
      onEditMessage={forks && !forks.busy ? () => forks.setEditing(message.id) : undefined}
      branchIndex={branches?.index}
      numberOfBranches={branches?.count}
      onSwitchToBranch={branches && forks && !forks.busy ? forks.switchTo : undefined}
    />
  );
}

/** The rewind checkbox, and what the last edit or regenerate reported. */
export function ForkBar() {
  const forks = useContext(ForksContext);
  if (!forks) return null;
  const { notice } = forks;
  const name = (path: string) => path.split("/").at(-1) ?? path;
  return (
    <div className="fork-bar">
      <label className="rewind-choice" title="An edit or a regenerate undoes what the file tools changed after that point">
        <input type="checkbox" data-testid="rewind-files" checked={forks.rewindFiles} onChange={(event) => forks.setRewindFiles(event.target.checked)} />
        Rewind files on edit and regenerate
      </label>
      {notice?.kind === "error" ? (
        <div className="fork-notice error" data-testid="fork-notice" role="alert">
          {notice.text}
          <button type="button" onClick={forks.dismiss} aria-label="dismiss">
            ×
          </button>
        </div>
      ) : null}
      {notice?.kind === "rewind" ? (
        <div className="fork-notice" data-testid="fork-notice">
          {notice.report.unknown ? (
            <>Nothing was rewound: {notice.report.unknown}</>
          ) : (
            <>
              Files rewound:{" "}
              {notice.report.restored.length === 0 ? "none" : notice.report.restored.map((file) => `${name(file.path)} ${file.action}`).join(", ")}
              {notice.report.notRestored.length > 0 ? `; not restored: ${notice.report.notRestored.map((file) => `${name(file.path)} (${file.why})`).join(", ")}` : ""}.
              {notice.report.commandsAfter > 0
                ? ` ${notice.report.commandsAfter} command${notice.report.commandsAfter === 1 ? "" : "s"} ran after this point; their changes were not undone.`
                : ""}
            </>
          )}
          <button type="button" onClick={forks.dismiss} aria-label="dismiss">
            ×
          </button>
        </div>
      ) : null}
    </div>
  );
}

/** The chat's message slots: user messages with edit and branches, assistant messages with regenerate. */
export function useMessageView(forks: Forks) {
  const latest = useRef(forks);
  latest.current = forks;
  // Stable, so CopilotKit's memoized messages are not redrawn on every change.
  return useMemo(
    () => ({
      // CopilotKit's slot type asks for the component's statics too (`Container`, …): a slot
      // renders it as a component all the same.
      userMessage: UserMessage as unknown as typeof CopilotChatUserMessage,
      assistantMessage: { onRegenerate: (message: { id: string }) => latest.current.regenerate(message) },
    }),
    [],
  );
}
