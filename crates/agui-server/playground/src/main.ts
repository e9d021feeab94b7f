// The playground: a chat with the agent mounted at this page's path, through the official
// AG-UI client. Everything shown comes from the client's message list and state, plus what
// only events carry (subagents, run outcomes, usage, errors, file rewinds); the thread list,
// its branches and the Files panel come from the server's thread routes. A user message can be
// edited and an answer regenerated (forks.ts), and a thread's branches switched (branches.ts).
import type {
  AgentSubscriber,
  Interrupt,
  Message,
  ResumeEntry,
  RunAgentParameters,
  SubagentStartedEvent,
  TokenUsage,
  ToolCall,
} from "@ag-ui/client";
import { PlaygroundAgent, httpStatus, token } from "./agent";
import { ApiError, Routes, onUnauthorized } from "./api";
import { branchMemory, branchNav, renderBranchMenu, switchFailure } from "./branches";
import { type PathLinks, activityParent, activityView, argsView, callGist, namedPaths, resultView } from "./cards";
import { byId, h, parseJson, pretty } from "./dom";
import { FilesPanel } from "./files";
import {
  CANNOT_FORK,
  type ForkActions,
  REWIND_EVENT,
  type RewindReport,
  answerTools,
  answers,
  editedHistory,
  forkProps,
  parseRewind,
  regeneratedHistory,
  rewindView,
  setForkControls,
  userTools,
} from "./forks";
import { DEFAULT_REASONS, type Reasons, interruptForm } from "./interrupts";
import { markdown } from "./markdown";
import { FRONTEND_TOOLS, executeFrontendTool, messageText, usageText } from "./page-tools";
import { ThreadListView } from "./thread-list";
import { ThreadIndex, newThreadId } from "./threads";
import { WorkspacePaths } from "./workspace";

// -------------------------------------------------------------------------------- set-up

const agentPath = document.querySelector<HTMLMetaElement>('meta[name="agui-agent-path"]')?.content || "/";
const agentUrl = new URL(agentPath, location.origin).href;
const routes = new Routes(agentUrl);
const threads = new ThreadIndex(routes);

const els = {
  log: byId("log"),
  interrupts: byId("interrupts"),
  prompt: byId<HTMLTextAreaElement>("prompt"),
  composer: byId<HTMLFormElement>("composer"),
  send: byId<HTMLButtonElement>("send"),
  stop: byId<HTMLButtonElement>("stop"),
  status: byId("run-status"),
  notice: byId("notice"),
  threadList: byId("thread-list"),
  threadTitle: byId("thread-title"),
  branchMenu: byId<HTMLSelectElement>("branch-menu"),
  stateView: byId("state-view"),
  runInfo: byId("run-info"),
  tokenDialog: byId<HTMLDialogElement>("token-dialog"),
  tokenInput: byId<HTMLInputElement>("token-input"),
  tokenReason: byId("token-reason"),
  confirmDialog: byId<HTMLDialogElement>("confirm-dialog"),
  confirmText: byId("confirm-text"),
  confirmOk: byId<HTMLButtonElement>("confirm-ok"),
};

let reasons: Reasons = DEFAULT_REASONS;

/** What only events say about a run: shown under the messages it produced. */
interface RunNote {
  key: string;
  afterMessageId?: string;
  outcome?: string;
  usage?: TokenUsage[];
  error?: { code?: string; message: string };
  note?: string;
  /** An edit's or regenerate's `antigravity:rewind` report. */
  rewind?: RewindReport;
}

/** What an edit or a regenerate puts back when the server refuses it: the chat as it was. */
interface ForkUndo {
  messages: Message[];
  notes: RunNote[];
  /** The user message edited or answered again. */
  at: string;
}

/** A subagent announced by SUBAGENT_STARTED, and how it ended. */
interface Subagent {
  name: string;
  description?: string;
  parentToolCallId?: string;
  status: "running" | "finished" | "error";
  error?: string;
}

/** Everything about the open thread. */
class Conversation {
  readonly agent: PlaygroundAgent;
  running = false;
  /** Frontend tool calls the client owes a result for (RUN_FINISHED pendingToolCallIds). */
  pendingTools = new Set<string>();
  answers = new Map<string, ResumeEntry>();
  notes: RunNote[] = [];
  subagents = new Map<string, Subagent>();
  /** Rendered elements by key (message id, `card:<toolCallId>`, `sub:<runId>`, `note:<key>`). */
  elements = new Map<string, HTMLElement>();
  rendered = new Map<string, string>();
  /** Its workspace's path, learned from its tool calls and activities. */
  paths = new WorkspacePaths();
  /** What `paths` has learned from already (`<id>:<length>` of each call's arguments or content). */
  learnedFrom = new Set<string>();

  constructor(readonly threadId: string) {
    this.agent = new PlaygroundAgent({ url: agentUrl, threadId });
  }
}

let convo: Conversation;

// ------------------------------------------------------------------------------- rendering

let renderQueued = false;
function scheduleRender(): void {
  if (renderQueued) return;
  renderQueued = true;
  requestAnimationFrame(() => {
    renderQueued = false;
    render();
  });
}

/** Keeps each container's children in the order they are placed during one render. */
class Placer {
  private last = new Map<HTMLElement, Element | null>();
  readonly placed = new Set<HTMLElement>();

  place(container: HTMLElement, el: HTMLElement): void {
    const prev = this.last.has(container) ? this.last.get(container)! : null;
    const wanted = prev ? prev.nextElementSibling : container.firstElementChild;
    if (el.parentElement !== container || wanted !== el) {
      container.insertBefore(el, wanted);
    }
    this.last.set(container, el);
    this.placed.add(el);
  }
}

function element(key: string, make: () => HTMLElement): HTMLElement {
  let el = convo.elements.get(key);
  if (!el) {
    el = make();
    convo.elements.set(key, el);
  }
  return el;
}

/** Re-renders `key`'s body only when `source` changed since last time. */
function changed(key: string, source: string): boolean {
  if (convo.rendered.get(key) === source) return false;
  convo.rendered.set(key, source);
  return true;
}

/** Learns the workspace's path from the tool calls and activities not seen yet. */
function learnPaths(messages: Message[]): void {
  const learn = (key: string, value: unknown) => {
    if (convo.learnedFrom.has(key)) return;
    convo.learnedFrom.add(key);
    for (const { path, command } of namedPaths(value)) convo.paths.learn(path, command);
  };
  for (const m of messages) {
    if (m.role === "assistant") {
      for (const call of m.toolCalls ?? []) learn(`${call.id}:${call.function.arguments.length}`, parseJson(call.function.arguments));
    } else if (m.role === "activity") {
      const content = m.content ?? {};
      learn(`${m.id}:${JSON.stringify(content).length}`, content);
    }
  }
}

/** Paths shown relative to the open thread's workspace; those in it open in the Files panel. */
const links: PathLinks = {
  get paths() {
    return convo.paths;
  },
  open: (rel) => void files.reveal(rel),
};

/** Whether the thread can be edited, regenerated or switched now: no run, no question waiting. */
function forkable(): boolean {
  return !convo.running && !convo.agent.pendingInterrupts.some((i) => !convo.answers.has(i.id));
}

function render(): void {
  const messages = convo.agent.messages;
  learnPaths(messages);
  const summary = threads.get(convo.threadId);
  const branches = branchMemory(convo.threadId);
  branches.observe(summary);
  const answered = answers(messages);
  const canFork = forkable();
  const root = convo.paths.root ?? "";
  const placer = new Placer();
  const results = new Map<string, string>();
  for (const m of messages) if (m.role === "tool") results.set(m.toolCallId, messageText(m));
  const cards = new Map<string, HTMLElement>();
  const notesAfter = new Map<string | undefined, RunNote[]>();
  for (const note of convo.notes) {
    const list = notesAfter.get(note.afterMessageId) ?? [];
    list.push(note);
    notesAfter.set(note.afterMessageId, list);
  }
  const waiting = new Set(convo.agent.pendingInterrupts.map((i) => i.toolCallId).filter(Boolean));

  /** Where a message of `subagentRunId` goes: its subagent's box, under the parent call. */
  const containerFor = (subagentRunId: string | undefined): HTMLElement => {
    if (!subagentRunId) return els.log;
    const info = convo.subagents.get(subagentRunId);
    const box = element(`sub:${subagentRunId}`, () =>
      h("div", { class: "subagent", "data-subagent-run-id": subagentRunId }, h("div", { class: "subagent-head" }), h("div", { class: "subagent-body" })),
    );
    const head = box.querySelector<HTMLElement>(".subagent-head")!;
    const status = info?.status ?? "running";
    if (changed(`sub:${subagentRunId}`, `${info?.name}|${status}|${info?.error}`)) {
      head.replaceChildren(
        h("span", { class: "badge" }, "subagent"),
        ` ${info?.name ?? subagentRunId}`,
        h("span", { class: `status ${status}` }, status),
      );
      if (info?.error) head.append(h("div", { class: "error small" }, info.error));
      box.dataset.status = status;
    }
    const parent = (info?.parentToolCallId && cards.get(info.parentToolCallId)?.querySelector<HTMLElement>(".nested")) || els.log;
    if (!placer.placed.has(box)) placer.place(parent, box);
    return box.querySelector<HTMLElement>(".subagent-body")!;
  };

  const placeNotes = (afterId: string | undefined) => {
    for (const note of notesAfter.get(afterId) ?? []) placer.place(els.log, noteElement(note));
  };
  placeNotes(undefined);

  for (const m of messages) {
    const sub = (m as { subagentRunId?: string }).subagentRunId;
    switch (m.role) {
      case "user": {
        const id = m.id;
        const el = element(id, () => {
          const msg = h("div", { class: "msg user", "data-message-id": id }, h("div", { class: "bubble" }));
          if (!sub) msg.append(userTools(msg, id, () => messageText(convo.agent.messages.find((x) => x.id === id) ?? m), forkActions));
          return msg;
        });
        const text = messageText(m);
        if (changed(id, text)) el.querySelector(".bubble")!.textContent = text;
        const tools = el.querySelector<HTMLElement>(":scope > .msg-tools");
        const versions = branches.versionsAt(summary, id);
        if (tools && (changed(`nav:${id}`, JSON.stringify([versions, summary?.branch, canFork])) || !tools.querySelector(".branch-nav"))) {
          tools.querySelector(".branch-nav")?.remove();
          tools.append(branchNav(versions, summary?.branch, !canFork, (branch) => void switchBranch(branch)));
        }
        placer.place(containerFor(sub), el);
        break;
      }
      case "reasoning": {
        const el = element(m.id, () =>
          h("details", { class: "reasoning" }, h("summary", {}, "Reasoning"), h("div", { class: "md" })),
        );
        const text = messageText(m);
        if (changed(m.id, text)) el.querySelector(".md")!.innerHTML = markdown(text);
        placer.place(containerFor(sub), el);
        break;
      }
      case "assistant": {
        const el = element(m.id, () => h("div", { class: "msg assistant" }, h("div", { class: "md" }), h("div", { class: "calls" })));
        const text = messageText(m);
        const md = el.querySelector<HTMLElement>(".md")!;
        if (changed(m.id, text)) {
          md.innerHTML = markdown(text);
          md.hidden = !text;
        }
        const callsBox = el.querySelector<HTMLElement>(".calls")!;
        for (const call of m.toolCalls ?? []) {
          const card = toolCard(call, results.get(call.id), waiting.has(call.id), root);
          cards.set(call.id, card);
          placer.place(callsBox, card);
        }
        // The last answer of a turn can be regenerated.
        const answersUser = answered.get(m.id);
        const regen = el.querySelector<HTMLElement>(":scope > .msg-tools");
        if (answersUser) {
          el.dataset.answers = answersUser;
          if (!regen) el.append(answerTools(() => el.dataset.answers ?? answersUser, forkActions));
        } else {
          regen?.remove();
        }
        placer.place(containerFor(sub), el);
        break;
      }
      case "activity": {
        const content = (m.content ?? {}) as Record<string, unknown>;
        const el = element(m.id, () => h("div", { class: "activity-slot" }));
        if (changed(m.id, `${m.activityType}|${JSON.stringify(content)}|${root}`)) {
          el.replaceChildren(activityView(m.activityType, content, links));
        }
        const parent = activityParent(content, m.metadata);
        const nested = parent ? cards.get(parent)?.querySelector<HTMLElement>(".nested") : undefined;
        placer.place(nested ?? containerFor(sub), el);
        break;
      }
      case "tool": {
        if (!cards.has(m.toolCallId)) {
          // A result whose call is not in the list (e.g. history without it): shown on its own.
          const el = element(m.id, () => h("div", { class: "tool orphan" }));
          if (changed(m.id, messageText(m))) el.replaceChildren(h("div", { class: "muted small" }, `result of ${m.toolCallId}`), resultView(messageText(m)));
          placer.place(containerFor(sub), el);
        }
        break;
      }
      default:
        break;
    }
    placeNotes(m.id);
  }
  // Notes placed after messages that no longer exist (a snapshot replaced them) go last.
  const ids = new Set(messages.map((m) => m.id));
  for (const [afterId, list] of notesAfter) {
    if (afterId !== undefined && !ids.has(afterId)) for (const note of list) placer.place(els.log, noteElement(note));
  }
  for (const [key, el] of convo.elements) {
    if (!placer.placed.has(el)) {
      el.remove();
      convo.elements.delete(key);
      convo.rendered.delete(key);
    }
  }
  setForkControls(els.log, canFork);
  scrollToEnd();
}

function toolCard(call: ToolCall, result: string | undefined, waitingForApproval: boolean, root: string): HTMLElement {
  const key = `card:${call.id}`;
  const card = element(key, () =>
    h(
      "div",
      { class: "tool", "data-tool-call-id": call.id },
      h("details", { class: "tool-box", open: true }, h("summary", {}), h("div", { class: "tool-body" })),
      h("div", { class: "nested" }),
    ),
  );
  const frontend = FRONTEND_TOOLS.some((t) => t.name === call.function.name);
  const status =
    result !== undefined
      ? "done"
      : waitingForApproval
        ? "awaiting approval"
        : convo.pendingTools.has(call.id)
          ? "running in the page"
          : convo.running
            ? "running"
            : "no result";
  if (changed(key, `${call.function.name}|${call.function.arguments}|${status}|${result}|${root}`)) {
    card.dataset.toolName = call.function.name;
    card.dataset.status = status;
    const args = parseJson(call.function.arguments);
    card.querySelector("summary")!.replaceChildren(
      h("span", { class: "tool-icon", "aria-hidden": "true" }, frontend ? "◧" : "⚙"),
      h("span", { class: "tool-name" }, call.function.name),
      h("code", { class: "tool-gist" }, callGist(args, convo.paths)),
      h("span", { class: `status ${status.replace(/\s+/g, "-")}` }, status),
    );
    const body = card.querySelector<HTMLElement>(".tool-body")!;
    body.replaceChildren(argsView(call.function.arguments, links), result !== undefined ? resultView(result) : h("div", { class: "muted small pending" }, "…"));
  }
  return card;
}

function noteElement(note: RunNote): HTMLElement {
  const key = `note:${note.key}`;
  const el = element(key, () => h("div", { class: "run-note" }));
  if (changed(key, JSON.stringify(note))) {
    el.className = `run-note${note.error ? " error" : ""}${note.outcome ? ` outcome-${note.outcome}` : ""}`;
    const parts: (HTMLElement | string)[] = [];
    if (note.error) {
      parts.push(
        h("div", { class: "run-error" }, h("strong", {}, "Run failed"), note.error.code ? h("code", { class: "error-code" }, note.error.code) : null, h("span", { class: "error-message" }, note.error.message)),
      );
    }
    if (note.outcome === "cancelled") parts.push(h("span", { class: "badge" }, "stopped"));
    if (note.outcome === "interrupt") parts.push(h("span", { class: "badge warn" }, "paused for your answer"));
    if (note.note) parts.push(h("span", { class: "muted" }, note.note));
    if (note.rewind) {
      el.classList.add("rewind");
      parts.push(rewindView(note.rewind, links));
    }
    const usage = usageText(note.usage);
    if (usage) parts.push(h("span", { class: "usage", title: "Token usage of this run" }, usage));
    el.replaceChildren(...parts);
  }
  return el;
}

function scrollToEnd(): void {
  const log = els.log;
  if (log.scrollHeight - log.scrollTop - log.clientHeight < 160 || convo.running) log.scrollTop = log.scrollHeight;
}

function renderState(): void {
  els.stateView.textContent = pretty(convo.agent.state ?? {});
}

function renderRunInfo(runId: string | undefined, note: RunNote): void {
  const rows: [string, string][] = [
    ["run", runId ?? "—"],
    ["outcome", note.error ? `error ${note.error.code ?? ""}` : (note.outcome ?? "—")],
    ["tokens", usageText(note.usage) || "—"],
  ];
  els.runInfo.replaceChildren(...rows.flatMap(([k, v]) => [h("dt", {}, k), h("dd", {}, v)]));
}

function renderInterrupts(): void {
  const pending = convo.agent.pendingInterrupts.filter((i) => !convo.answers.has(i.id));
  els.interrupts.replaceChildren(
    ...pending.map((interrupt: Interrupt) => interruptForm(interrupt, reasons, (entry) => answerInterrupt(entry))),
  );
  updateControls();
}

function renderThreads(): void {
  threadList.render();
  const summary = threads.get(convo.threadId);
  els.threadTitle.textContent = summary?.title || "New chat";
  renderBranchMenu(els.branchMenu, summary, !forkable(), (id) => {
    const message = convo.agent.messages.find((m) => m.id === id);
    const text = message ? messageText(message).trim() : "";
    return text ? (text.length > 40 ? `${text.slice(0, 40)}…` : text) : undefined;
  });
}

function updateControls(): void {
  const interrupted = convo.agent.pendingInterrupts.some((i) => !convo.answers.has(i.id));
  const state = convo.running ? "running" : interrupted ? "interrupted" : "idle";
  document.body.dataset.state = state;
  els.stop.hidden = !convo.running;
  els.send.hidden = convo.running;
  els.send.disabled = interrupted;
  els.prompt.disabled = interrupted;
  els.prompt.placeholder = interrupted
    ? "Answer the agent's request above first (or skip it)."
    : "Message the agent… (Enter to send, Shift+Enter for a new line)";
  els.status.textContent = state === "running" ? "Working…" : state === "interrupted" ? "Waiting for you" : "";
  els.status.dataset.state = state;
  setForkControls(els.log, state === "idle");
  els.branchMenu.disabled = state !== "idle";
}

function showNotice(text: string, kind: "info" | "error" = "info"): void {
  els.notice.hidden = !text;
  els.notice.className = kind;
  els.notice.textContent = text;
}

// ---------------------------------------------------------------------------------- runs

type Mode = "run" | "connect";

/** Runs (or connects to) the open thread; `fork`: an edit's or regenerate's way back. */
async function startRun(params: RunAgentParameters, mode: Mode = "run", fork?: ForkUndo): Promise<void> {
  const c = convo;
  const note: RunNote = { key: `${Date.now()}-${c.notes.length}` };
  let runId: string | undefined;
  let pending: string[] = [];
  c.running = true;
  c.pendingTools.clear();
  showNotice("");
  updateControls();
  scheduleRender();
  let failure: unknown;
  const subscriber: AgentSubscriber = {
    onMessagesChanged: () => {
      if (c === convo) scheduleRender();
    },
    onStateChanged: () => {
      if (c === convo) renderState();
    },
    onRunStartedEvent: ({ event }) => {
      runId = event.runId;
    },
    onCustomEvent: ({ event }) => {
      if (event.name !== REWIND_EVENT) return;
      // Shown where the thread forked, above the new answer.
      const at = fork?.at ?? [...c.agent.messages].reverse().find((m) => m.role === "user")?.id;
      c.notes.push({ key: `${note.key}-rewind`, afterMessageId: at, rewind: parseRewind(event.value) });
      if (c === convo) scheduleRender();
    },
    onRunFinishedEvent: (p) => {
      note.outcome = p.outcome;
      note.usage = (p.event as { usage?: TokenUsage[] }).usage;
      if (p.outcome === "success") pending = p.pendingToolCallIds ?? [];
    },
    onRunErrorEvent: ({ event }) => {
      note.error = { code: event.code, message: event.message };
      note.usage = (event as { usage?: TokenUsage[] }).usage;
    },
    onSubagentStartedEvent: ({ event }) => {
      const e = event as SubagentStartedEvent;
      c.subagents.set(e.subagentRunId, { name: e.name, description: e.description, parentToolCallId: e.parentToolCallId, status: "running" });
    },
    onSubagentFinishedEvent: ({ event }) => {
      const s = c.subagents.get(event.subagentRunId);
      if (s) s.status = "finished";
    },
    onSubagentErrorEvent: ({ event }) => {
      const s = c.subagents.get(event.subagentRunId);
      if (s) {
        s.status = "error";
        s.error = event.message;
      }
    },
  };
  let retry = false;
  try {
    const input = { tools: FRONTEND_TOOLS, context: [], ...params };
    if (mode === "connect") await c.agent.connectAgent(input, subscriber);
    else await c.agent.runAgent(input, subscriber);
  } catch (error) {
    failure = error;
  } finally {
    c.running = false;
  }
  if (failure !== undefined) {
    const error = failure;
    const status = httpStatus(error);
    if (status === 401) {
      retry = await askToken("The server refused the request: it needs its access token.");
    } else if (mode === "connect") {
      showNotice(connectFailure(error, status));
    } else if ((error as Error)?.name === "AbortError" || /abort/i.test(String((error as Error)?.message))) {
      note.note ??= "Stopped listening.";
    } else if (!note.error) {
      note.error = { code: status ? `HTTP ${status}` : undefined, message: describeHttpError(error) };
    }
  }
  if (fork && !retry && (runId === undefined || note.error?.code === CANNOT_FORK)) {
    // Refused: nothing changed on the server, so the chat is put back as it was.
    c.agent.setMessages(fork.messages);
    c.notes = fork.notes;
  }
  if (c !== convo) return;
  // A connect that only replays a finished thread has nothing worth a note.
  const worthANote = mode === "run" || note.error || note.outcome === "interrupt" || note.usage?.length;
  if (worthANote && (note.error || note.outcome || note.note || note.usage?.length)) {
    note.afterMessageId = c.agent.messages.at(-1)?.id;
    c.notes.push(note);
  }
  renderRunInfo(runId, note);
  renderState();
  c.answers.clear();
  renderInterrupts();
  render();
  // A first message the server never took leaves no thread to list.
  if (runId === undefined && mode === "run" && !retry) threads.forgetProvisional(c.threadId);
  if (runId !== undefined) {
    // The server has the thread now: what the turn changed in its files, and its summary (in
    // case a live event was missed).
    if (mode === "run") void threads.refresh(c.threadId);
    void files.known(mode === "run");
  }
  // How many runs this page has finished: lets a test (or a curious user) tell runs apart.
  document.body.dataset.runs = String(Number(document.body.dataset.runs ?? 0) + 1);
  if (retry) return startRun(params, mode, fork);
  if (pending.length) await answerFrontendTools(pending);
}

function describeHttpError(error: unknown): string {
  const payload = (error as { payload?: unknown })?.payload;
  if (payload && typeof payload === "object") {
    const p = payload as { error?: string; detail?: string };
    if (p.error || p.detail) return [p.error, p.detail].filter(Boolean).join(": ");
  }
  return (error as Error)?.message ?? String(error);
}

function connectFailure(error: unknown, status: number | undefined): string {
  const payload = (error as { payload?: unknown })?.payload;
  if (status === 404 && payload && typeof payload === "object") {
    return "The server does not know this thread any more; a new message starts it afresh.";
  }
  if (status === 404 || status === 405) {
    return "This server cannot send a thread's history yet (no connect route); new messages still continue the conversation on the server.";
  }
  return `Could not load this thread's history: ${describeHttpError(error)}`;
}

/** Runs the frontend tools the last run left pending, then sends their results in a new run. */
async function answerFrontendTools(ids: string[]): Promise<void> {
  const calls = new Map<string, ToolCall>();
  for (const m of convo.agent.messages) if (m.role === "assistant") for (const call of m.toolCalls ?? []) calls.set(call.id, call);
  for (const id of ids) {
    const call = calls.get(id);
    convo.pendingTools.add(id);
    const content = call ? executeFrontendTool(call) : `Error: the page does not know tool call ${id}.`;
    convo.agent.addMessage({ id: `tool-${crypto.randomUUID()}`, role: "tool", toolCallId: id, content });
  }
  render();
  await startRun({});
}

function answerInterrupt(entry: ResumeEntry): void {
  convo.answers.set(entry.interruptId, entry);
  const open = convo.agent.pendingInterrupts.filter((i) => !convo.answers.has(i.id));
  if (open.length) {
    renderInterrupts();
    return;
  }
  const resume = convo.agent.pendingInterrupts.map((i) => convo.answers.get(i.id)!);
  els.interrupts.replaceChildren();
  void startRun({ resume });
}

async function sendMessage(text: string): Promise<void> {
  const c = convo;
  threads.provisional(c.threadId, text);
  c.agent.addMessage({ id: `user-${crypto.randomUUID()}`, role: "user", content: text });
  await startRun({});
}

/** Runs `history` (an edit's, or with `regenerate` a regenerate's) in place of the chat's messages. */
async function runFork(history: Message[] | undefined, at: string, regenerate: boolean, rewind: boolean): Promise<void> {
  const c = convo;
  if (!history || !forkable()) return;
  const undo: ForkUndo = { messages: structuredClone(c.agent.messages), notes: [...c.notes], at };
  // The dropped messages' notes go with them.
  const kept = new Set(history.map((m) => m.id));
  c.notes = c.notes.filter((n) => n.afterMessageId === undefined || kept.has(n.afterMessageId));
  c.agent.setMessages(history);
  await startRun({ forwardedProps: forkProps(regenerate, rewind) }, "run", undo);
}

const forkActions: ForkActions = {
  edit: (id, text, rewind) => void runFork(editedHistory(convo.agent.messages, id, text), id, false, rewind),
  regenerate: (id, rewind) => void runFork(regeneratedHistory(convo.agent.messages, id), id, true, rewind),
};

/** Makes `branch` the open thread's current branch, then shows its messages (connect). */
async function switchBranch(branch: string): Promise<void> {
  const threadId = convo.threadId;
  if (!forkable()) return;
  try {
    await threads.switchBranch(threadId, branch);
  } catch (error) {
    const status = error instanceof ApiError ? error.status : undefined;
    showNotice(switchFailure(status, (error as Error).message), "error");
    if (status === 422) void threads.refresh(threadId);
    renderThreads();
    return;
  }
  if (convo.threadId === threadId) openThread(threadId, true);
}

async function stop(): Promise<void> {
  els.stop.disabled = true;
  try {
    const status = await convo.agent.stop();
    if (status === 401) {
      await askToken("Stopping needs the server's access token.");
    } else if (status === 404 || status === 405) {
      convo.agent.abortRun();
      showNotice("This server cannot stop a turn yet (no stop route): the page stopped listening, but the agent's turn goes on on the server.");
    } else if (status >= 400) {
      showNotice(`Stop was refused (HTTP ${status}).`, "error");
    }
  } catch (error) {
    showNotice(`Could not reach the server to stop: ${(error as Error).message}`, "error");
  } finally {
    els.stop.disabled = false;
  }
}

// ------------------------------------------------------------------------------- threads

/** Opens `threadId`; `reconnect`: the server has it, load its history (connect). */
function openThread(threadId: string, reconnect: boolean): void {
  if (convo?.running) convo.agent.abortRun();
  convo = new Conversation(threadId);
  els.log.replaceChildren();
  els.interrupts.replaceChildren();
  els.runInfo.replaceChildren();
  byId("chat").style.background = "";
  showNotice("");
  history.replaceState(null, "", `#${encodeURIComponent(threadId)}`);
  renderThreads();
  renderState();
  updateControls();
  files.setThread(threadId, reconnect);
  if (reconnect) void startRun({}, "connect");
}

function newThread(): void {
  openThread(newThreadId(), false);
}

/** Asks the user to confirm `message`; resolves true when they chose `action`. */
function confirmAction(message: string, action: string): Promise<boolean> {
  return new Promise<boolean>((resolve) => {
    els.confirmText.textContent = message;
    els.confirmOk.textContent = action;
    els.confirmDialog.addEventListener("close", () => resolve(els.confirmDialog.returnValue === "ok"), { once: true });
    els.confirmDialog.returnValue = "";
    els.confirmDialog.showModal();
  });
}

const threadList = new ThreadListView(threads, els.threadList, byId<HTMLInputElement>("thread-search"), byId<HTMLInputElement>("show-archived"), {
  current: () => convo.threadId,
  open: (id) => openThread(id, true),
  confirm: confirmAction,
  fail: (message) => showNotice(message, "error"),
  deletedCurrent: () => newThread(),
});
threads.onChange = () => {
  if (!convo) return;
  renderThreads();
  // Branches are shown at their messages.
  scheduleRender();
};
let filesRefresh: ReturnType<typeof setTimeout> | undefined;
threads.onEvent = (type, thread) => {
  if (thread.id !== convo?.threadId) return;
  if (type === "created") void files.known(false);
  // Another client (or tab) changed the open thread's files: list them again, once.
  if (type === "updated" && !convo.running) {
    clearTimeout(filesRefresh);
    filesRefresh = setTimeout(() => void files.refresh(), 300);
  }
};

// ------------------------------------------------------------------------------- panels

const files = new FilesPanel(routes, {
  uploaded: (threadId) => void threads.refresh(threadId),
  show: () => showTab("files"),
});

/** Shows the side panel's `files` or `state` tab. */
function showTab(name: "files" | "state"): void {
  for (const tab of ["files", "state"] as const) {
    byId(`tab-${tab}`).setAttribute("aria-selected", String(tab === name));
    byId(`${tab}-panel`).hidden = tab !== name;
  }
  document.body.classList.add("show-side");
}

// ---------------------------------------------------------------------------------- auth

let tokenPromise: Promise<boolean> | undefined;

/** Asks for the access token; resolves true when one was saved (callers then retry). */
function askToken(reason: string): Promise<boolean> {
  tokenPromise ??= new Promise<boolean>((resolve) => {
    els.tokenReason.textContent = reason;
    els.tokenInput.value = "";
    els.tokenDialog.addEventListener(
      "close",
      () => {
        tokenPromise = undefined;
        const value = els.tokenInput.value.trim();
        if (els.tokenDialog.returnValue === "save" && value) {
          token.set(value);
          showNotice("");
          resolve(true);
        } else {
          showNotice("The server needs an access token: use “Access token…” in the side bar to enter it.", "error");
          resolve(false);
        }
      },
      { once: true },
    );
    els.tokenDialog.showModal();
    els.tokenInput.focus();
  });
  return tokenPromise;
}

/** Loads the agent's capabilities: its name, whether it is the demo, its interrupt reasons. */
async function loadCapabilities(): Promise<void> {
  const url = `${agentUrl.replace(/\/+$/, "")}/capabilities`;
  const sent = token.get();
  const res = await fetch(url, { headers: token.headers() });
  if (res.status === 401) {
    // A token saved while this request was out is tried before asking.
    if (token.get() !== sent || (await askToken("This server needs its access token (auth_token)."))) await loadCapabilities();
    return;
  }
  if (!res.ok) return;
  const caps = (await res.json()) as {
    identity?: { name?: string };
    custom?: { demo?: boolean; model?: string; interruptReasons?: { question?: string; approval?: string } };
  };
  const name = caps.identity?.name ?? agentPath;
  const model = caps.custom?.demo ? "offline demo model" : caps.custom?.model;
  byId("agent-name").textContent = model ? `${name} · ${model}` : name;
  const r = caps.custom?.interruptReasons;
  if (r) {
    reasons = {
      question: [...new Set([...(r.question ? [r.question] : []), ...DEFAULT_REASONS.question])],
      approval: [...new Set([...(r.approval ? [r.approval] : []), ...DEFAULT_REASONS.approval])],
    };
  }
}

// --------------------------------------------------------------------------------- wiring

els.composer.addEventListener("submit", (event) => {
  event.preventDefault();
  const text = els.prompt.value.trim();
  if (!text || convo.running || els.prompt.disabled) return;
  els.prompt.value = "";
  autosize();
  void sendMessage(text);
});
els.prompt.addEventListener("keydown", (event) => {
  if (event.key === "Enter" && !event.shiftKey && !event.isComposing) {
    event.preventDefault();
    els.composer.requestSubmit();
  }
});
function autosize(): void {
  els.prompt.style.height = "auto";
  els.prompt.style.height = `${Math.min(els.prompt.scrollHeight, 200)}px`;
}
els.prompt.addEventListener("input", autosize);
els.stop.addEventListener("click", () => void stop());
byId("new-thread").addEventListener("click", newThread);
byId("set-token").addEventListener("click", () => {
  void askToken("Enter the server's access token (leave empty and cancel to keep the current one).").then((saved) => {
    if (!saved) return;
    void loadCapabilities();
    void threads.reload();
    threads.listen();
    void files.refresh();
  });
});
els.branchMenu.addEventListener("change", () => {
  const chosen = els.branchMenu.value;
  if (chosen && chosen !== threads.get(convo.threadId)?.branch) void switchBranch(chosen);
});
byId("toggle-side").addEventListener("click", () => document.body.classList.toggle("show-side"));
byId("tab-files").addEventListener("click", () => showTab("files"));
byId("tab-state").addEventListener("click", () => showTab("state"));
onUnauthorized(askToken);

// A link names a thread (`#<id>`): open it; else a new chat, the server's threads beside it.
const fromHash = decodeURIComponent(location.hash.slice(1));
if (fromHash) openThread(fromHash, true);
else newThread();
void loadCapabilities();
void threads.loadMore();
threads.listen();
els.prompt.focus();
