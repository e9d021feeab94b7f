// `AntigravityThreads`: the caller's threads on an agui-antigravity server and the files of their
// workspaces, through the routes under the agent's path (`threads`, `threads/<id>`,
// `threads/events`, `threads/<id>/files/<path>`). Every request carries the agent's headers and
// token, and `X-Thread-Id` when it is about one thread (the key replicas are routed on).
import { AntigravityHttpError, agentRouteUrl, httpError, requestHeaders, withHeaders } from "./http.js";
import type { Branch, ThreadBranches } from "./forks.js";
import { InvalidEventError, sseFrames } from "./sse.js";

/** What a thread is doing: a turn in flight, a turn parked on the user, nothing, or put to sleep. */
export type ThreadStatus = "running" | "waiting" | "idle" | "hibernated";

/** What a `waiting` thread's turn waits for. */
export type ThreadWaitingFor = "question" | "approval" | "frontend_tool";

/** One of the caller's threads, as the server lists it. */
export interface ThreadSummary {
  /** The thread id. */
  id: string;
  /**
   * The first line of the first user message (80 characters at most) until renamed; `""` for a
   * thread with no user message yet (one an upload made).
   */
  title: string;
  /** When the thread was made (RFC 3339, UTC). */
  createdAt: string;
  /** Its last activity (RFC 3339, UTC); lists are sorted on it, newest first. */
  updatedAt: string;
  status: ThreadStatus;
  /** Present only when `status` is `waiting`. */
  waitingFor?: ThreadWaitingFor;
  archived: boolean;
  /** The messages a connect restates (user, assistant, tool, activity…). */
  messageCount: number;
  /** The disk its workspace took when last measured (after each turn, upload or delete). */
  workspaceBytes: number;
  /** Its current branch's id (an edit or a regenerate starts a new one). */
  branch: string;
  /** Its other branches, oldest first (at most 32): see `listBranches`. */
  branches: Branch[];
}

/** A page of the caller's threads. */
export interface ThreadPage {
  threads: ThreadSummary[];
  /** The cursor of the next page, or null on the last one. */
  nextCursor: string | null;
}

/** Which of the caller's threads `listThreads` returns. */
export interface ListThreadsOptions {
  /** Threads per page: 1 to 200 (the server's default: 50). */
  limit?: number;
  /** The previous page's `nextCursor`. */
  cursor?: string;
  /** Archived threads only (`true`), unarchived only (`false`, the default), or both (`"all"`). */
  archived?: boolean | "all";
  signal?: AbortSignal;
}

/** A change to a thread, as `PATCH <path>/threads/<id>` takes it: at least one field. */
export interface ThreadUpdate {
  /** The new title: trimmed, 1 to 200 characters, no control characters. */
  title?: string;
  archived?: boolean;
  /** Switch to this branch (one of `branches`); a 409 while the thread is busy. */
  branch?: string;
}

/**
 * A change to one of the caller's threads (`GET <path>/threads/events`): `created`; `status`
 * when only its status changed; `updated` for anything else (title, archived, a new message,
 * its workspace's size); `deleted`, which names the thread only.
 */
export type ThreadChange =
  | { type: "created" | "updated" | "status"; thread: ThreadSummary }
  | { type: "deleted"; thread: { id: string } };

/** How `watchThreads` follows the server's changes. */
export interface WatchThreadsOptions {
  /** Ends the watch: the iteration then stops without an error. */
  signal?: AbortSignal;
  /**
   * Called each time the stream opens, `reconnected` from the second time on. Changes made while
   * it was down are not replayed: a caller keeping a list fetches it again here.
   */
  onOpen?: (info: { reconnected: boolean }) => void;
  /** Called when the stream breaks, with the reason and the attempt that comes next (1, 2, …). */
  onBreak?: (error: unknown, attempt: number) => void;
  /** The wait before reconnecting: `delayMs` (500) doubled after each failure, up to `maxDelayMs` (10 000). */
  retry?: { delayMs?: number; maxDelayMs?: number };
}

/** What a directory entry is. Links and special files are listed, never followed or read. */
export type FileKind = "file" | "dir" | "symlink" | "other";

/** One entry of a workspace directory. */
export interface FileEntry {
  name: string;
  kind: FileKind;
  /** Its size in bytes (0 for a directory). */
  size: number;
  /** When it last changed (RFC 3339, UTC). */
  modified: string;
}

/** A workspace directory's entries, sorted by name. */
export interface DirectoryListing {
  /** The directory, relative to the workspace (`""` for its root). */
  path: string;
  entries: FileEntry[];
}

/** Bytes `start` to `end` (both included; to the end of the file without `end`). */
export interface ByteRange {
  start: number;
  end?: number;
}

/** Options of `downloadFile`. */
export interface DownloadOptions {
  /** One range of the file (`{ start, end }`, or a `Range` header value such as `bytes=-100`): answered 206. */
  range?: ByteRange | string;
  /** An `ETag` the caller holds: the answer is 304 with no body while the file has not changed. */
  ifNoneMatch?: string;
  signal?: AbortSignal;
}

/**
 * What `uploadFile` sends. A `ReadableStream` is streamed as it is read (Node.js; browsers
 * stream a request body only over HTTP/2, so give them a `Blob` or `File`, which they read
 * from disk as they send it).
 */
export type UploadBody = Blob | ReadableStream<Uint8Array> | Uint8Array | ArrayBuffer | string;

/** Options of `uploadFile`. */
export interface UploadOptions {
  /** The body's `Content-Type` (the server names files by their path, not by this). */
  contentType?: string;
  signal?: AbortSignal;
}

/** What an upload made: the file's entry, and whether it is new (201) or replaced one (200). */
export interface UploadResult {
  entry: FileEntry;
  created: boolean;
}

/** Where `AntigravityThreads` sends its requests; an `AntigravityAgent` is one. */
export interface AntigravityThreadsConfig {
  /** The agent's path on the server (`http://127.0.0.1:8027/`, `https://host/coder`). */
  url: string;
  /** The server's token, sent as `Authorization: Bearer …`. */
  authToken?: string;
  /** Headers for every request (e.g. the user header an authenticating proxy reads). */
  headers?: Record<string, string>;
  /** The `fetch` to use (default: the global one). */
  fetch?: (url: string, init: RequestInit) => Promise<Response>;
}

const DEFAULT_RETRY = { delayMs: 500, maxDelayMs: 10_000 };

/** The encoded segments of a workspace path (`""` and `"/"` are its root). */
function fileSegments(path: string): string[] {
  const trimmed = path.replace(/^\/+|\/+$/g, "");
  if (trimmed === "") return [];
  return trimmed.split("/").map((component) => {
    // A URL would resolve these before the server saw them: refused here, as the server would.
    if (component === "" || component === "." || component === "..") {
      throw new TypeError(`the workspace path ${JSON.stringify(path)} has a component that is empty, "." or "..": the server refuses it`);
    }
    return encodeURIComponent(component);
  });
}

/** `ms`, cut short by `signal`. */
function sleep(ms: number, signal: AbortSignal | undefined): Promise<void> {
  return new Promise((resolve) => {
    if (signal?.aborted) return resolve();
    const done = () => {
      clearTimeout(timer);
      signal?.removeEventListener("abort", done);
      resolve();
    };
    const timer = setTimeout(done, ms);
    signal?.addEventListener("abort", done, { once: true });
  });
}

/** Whether an HTTP error of the events stream is worth another attempt (the server or a proxy in trouble). */
const transient = (status: number) => status >= 500 || status === 408 || status === 429;

/** A change from one `thread` event's data; throws {@link InvalidEventError} on anything else. */
function threadChange(data: string): ThreadChange {
  let json: unknown;
  try {
    json = JSON.parse(data);
  } catch {
    throw new InvalidEventError(`a thread event is not JSON: ${data.slice(0, 200)}`);
  }
  const change = json as { type?: unknown; thread?: { id?: unknown } };
  if (!["created", "updated", "status", "deleted"].includes(String(change?.type)) || typeof change.thread?.id !== "string") {
    throw new InvalidEventError(`not a thread change: ${data.slice(0, 200)}`);
  }
  return json as ThreadChange;
}

/**
 * The caller's threads on an agui-antigravity agent, and their workspaces' files. Built on a
 * configuration (`new AntigravityThreads({ url, authToken })`) or an `AntigravityAgent`
 * (`agent.threads`, which follows the agent's `url`, `headers`, `authToken` and `fetch`).
 *
 * The server answers each caller about its own threads only: a thread of another caller is a
 * 404, exactly as an unknown one. Every failure is an {@link AntigravityHttpError} with the
 * HTTP status and the server's message.
 */
export class AntigravityThreads {
  private readonly source: AntigravityThreadsConfig;

  /** `source` is read at each request, so an agent's later changes (token, headers) apply. */
  constructor(source: AntigravityThreadsConfig) {
    this.source = source;
  }

  // ------------------------------------------------------------------------------- threads

  /**
   * One page of the caller's threads (`GET <path>/threads`), newest activity first. A bad
   * `limit` or `cursor` is a 400.
   */
  async listThreads(options: ListThreadsOptions = {}): Promise<ThreadPage> {
    const query = {
      limit: options.limit === undefined ? undefined : String(options.limit),
      cursor: options.cursor,
      archived: options.archived === undefined ? undefined : String(options.archived),
    };
    const response = await this.request("GET", ["threads"], { query, accept: "application/json", signal: options.signal });
    return (await response.json()) as ThreadPage;
  }

  /** Every thread `listThreads` would list with `options`, page after page. */
  async *iterateThreads(options: Omit<ListThreadsOptions, "cursor"> = {}): AsyncGenerator<ThreadSummary, void, undefined> {
    let cursor: string | undefined;
    do {
      const page = await this.listThreads({ ...options, cursor });
      yield* page.threads;
      cursor = page.nextCursor ?? undefined;
    } while (cursor !== undefined);
  }

  /** One of the caller's threads (`GET <path>/threads/<id>`); a 404 for an unknown one, or another caller's. */
  async getThread(threadId: string, options: { signal?: AbortSignal } = {}): Promise<ThreadSummary> {
    const response = await this.request("GET", this.threadSegments(threadId), { threadId, accept: "application/json", signal: options.signal });
    return (await response.json()) as ThreadSummary;
  }

  /**
   * Changes a thread's title, archived flag or current branch (`PATCH <path>/threads/<id>`);
   * returns it as it is now. A title that is empty once trimmed, longer than 200 characters or holds control
   * characters is a 422.
   */
  async updateThread(threadId: string, update: ThreadUpdate, options: { signal?: AbortSignal } = {}): Promise<ThreadSummary> {
    const response = await this.request("PATCH", this.threadSegments(threadId), {
      threadId,
      accept: "application/json",
      contentType: "application/json",
      body: JSON.stringify(update),
      signal: options.signal,
    });
    return (await response.json()) as ThreadSummary;
  }

  /** Renames a thread (see `updateThread`). */
  renameThread(threadId: string, title: string, options: { signal?: AbortSignal } = {}): Promise<ThreadSummary> {
    return this.updateThread(threadId, { title }, options);
  }

  /** Archives a thread, or brings it back with `archived` false (see `updateThread`). */
  archiveThread(threadId: string, archived = true, options: { signal?: AbortSignal } = {}): Promise<ThreadSummary> {
    return this.updateThread(threadId, { archived }, options);
  }

  /**
   * A thread's branches (`GET <path>/threads/<id>`): the current one's id and the others,
   * oldest first, each with the message where the thread left it (`leftAt`).
   */
  async listBranches(threadId: string, options: { signal?: AbortSignal } = {}): Promise<ThreadBranches> {
    const thread = await this.getThread(threadId, options);
    return { current: thread.branch, branches: thread.branches ?? [] };
  }

  /**
   * Makes branch `branchId` the thread's current one (`PATCH <path>/threads/<id>` with
   * `{"branch"}`); the one it leaves is listed among `branches`. Returns the thread as it is
   * now. A 422 for a branch the thread does not have, a 409 while the thread is busy (a run, a
   * turn, something waiting for the client). Only the server changes: a client holding the
   * thread's messages connects again to read the branch's (`AntigravityAgent.switchBranch` does).
   */
  switchBranch(threadId: string, branchId: string, options: { signal?: AbortSignal } = {}): Promise<ThreadSummary> {
    return this.updateThread(threadId, { branch: branchId }, options);
  }

  /**
   * Deletes a thread, its history and its workspace (`DELETE <path>/threads/<id>`): true when it
   * was deleted, false when the server has no such thread for the caller (404).
   */
  async deleteThread(threadId: string, options: { signal?: AbortSignal } = {}): Promise<boolean> {
    try {
      await this.request("DELETE", this.threadSegments(threadId), { threadId, accept: "application/json", signal: options.signal });
      return true;
    } catch (error) {
      if (error instanceof AntigravityHttpError && error.status === 404) return false;
      throw error;
    }
  }

  /**
   * The caller's thread changes as they happen (`GET <path>/threads/events`, Server-Sent Events),
   * changes other replicas made included:
   *
   * ```ts
   * for await (const change of threads.watchThreads({ signal })) console.log(change.type, change.thread.id);
   * ```
   *
   * A stream that breaks (network, proxy, replica gone, the server's 5xx) is opened again after
   * a wait that grows with each failure (`retry`), for as long as the watch lasts; `onOpen` says
   * when, since what changed in between is not replayed. The iteration ends without an error
   * when `signal` aborts or the loop is left; it throws an {@link AntigravityHttpError} when the
   * server refuses the request (4xx: the token, the identity), and an `InvalidEventError` when
   * an event is not a thread change.
   */
  async *watchThreads(options: WatchThreadsOptions = {}): AsyncGenerator<ThreadChange, void, undefined> {
    const { signal } = options;
    const retry = { ...DEFAULT_RETRY, ...options.retry };
    let opened = false;
    let failures = 0;
    while (!signal?.aborted) {
      const connection = new AbortController();
      const abort = () => connection.abort();
      signal?.addEventListener("abort", abort, { once: true });
      try {
        const response = await this.request("GET", ["threads", "events"], { accept: "text/event-stream", signal: connection.signal });
        if (!response.body) throw new Error("the thread events response has no body");
        options.onOpen?.({ reconnected: opened });
        opened = true;
        failures = 0;
        for await (const frame of sseFrames(response.body)) {
          if (frame.event === "thread") yield threadChange(frame.data);
        }
        throw new Error("the thread events stream ended");
      } catch (error) {
        // The watch's end (its signal), whatever the request made of it.
        if (signal?.aborted) return;
        if (error instanceof InvalidEventError) throw error;
        if (error instanceof AntigravityHttpError && !transient(error.status)) throw error;
        failures += 1;
        options.onBreak?.(error, failures);
        await sleep(Math.min(retry.delayMs * 2 ** (failures - 1), retry.maxDelayMs), signal);
      } finally {
        signal?.removeEventListener("abort", abort);
        connection.abort();
      }
    }
  }

  // --------------------------------------------------------------------------------- files

  /**
   * A directory of a thread's workspace (`GET <path>/threads/<id>/files/<path>`; `""` is the
   * workspace's root), its entries sorted by name. A path naming a file is refused with a
   * `TypeError`; a path with an empty, `.` or `..` component too (before any request).
   */
  async listFiles(threadId: string, path = "", options: { signal?: AbortSignal } = {}): Promise<DirectoryListing> {
    const response = await this.request("GET", this.fileSegments(threadId, path), { threadId, accept: "application/json", signal: options.signal });
    // A file is served with its disposition, a listing without one.
    if (response.headers.has("content-disposition")) {
      await response.body?.cancel().catch(() => undefined);
      throw new TypeError(`${JSON.stringify(path)} in thread ${threadId}'s workspace is a file, not a directory`);
    }
    const listing = (await response.json()) as DirectoryListing;
    if (!Array.isArray(listing?.entries)) throw new TypeError(`GET of directory ${JSON.stringify(path)} did not answer a listing`);
    return listing;
  }

  /**
   * A file of a thread's workspace (`GET …/files/<path>`), as the server's response: read its
   * `body` as a stream (or `text()`, `arrayBuffer()`), its `Content-Type`, `Content-Length`,
   * `ETag` and `Last-Modified`. With `range`, the answer is 206 with `Content-Range` (a range
   * past the end is a 416); with `ifNoneMatch` equal to the file's `ETag`, 304 with no body.
   * Links and files with several hard links are refused (403).
   */
  async downloadFile(threadId: string, path: string, options: DownloadOptions = {}): Promise<Response> {
    const range = options.range === undefined ? undefined : typeof options.range === "string" ? options.range : `bytes=${options.range.start}-${options.range.end ?? ""}`;
    return this.request("GET", this.fileSegments(threadId, path), {
      threadId,
      headers: { ...(range === undefined ? {} : { Range: range }), ...(options.ifNoneMatch === undefined ? {} : { "If-None-Match": options.ifNoneMatch }) },
      signal: options.signal,
    });
  }

  /**
   * A directory of a thread's workspace and everything under it as a zip (`GET …/files/<path>?archive=zip`;
   * `""` for the whole workspace), streamed as the server makes it. Regular files and
   * directories only: links and special files are left out.
   */
  async downloadArchive(threadId: string, path = "", options: { signal?: AbortSignal } = {}): Promise<Response> {
    return this.request("GET", this.fileSegments(threadId, path), { threadId, query: { archive: "zip" }, accept: "application/zip", signal: options.signal });
  }

  /**
   * Writes a file into a thread's workspace (`PUT …/files/<path>`), made or replaced at once
   * when the whole body has arrived, its missing parent directories made. A thread that does
   * not exist yet is made for the caller (with an empty title), so a workspace can be seeded
   * before the first message. 409 when a component on the way is a file or the path is a
   * directory; 413 when the upload would take the caller's disk past the server's cap (nothing
   * is left behind).
   */
  async uploadFile(threadId: string, path: string, body: UploadBody, options: UploadOptions = {}): Promise<UploadResult> {
    if (fileSegments(path).length === 0) throw new TypeError("an upload needs a file path, not the workspace's root");
    const response = await this.request("PUT", this.fileSegments(threadId, path), {
      threadId,
      accept: "application/json",
      contentType: options.contentType ?? "application/octet-stream",
      body,
      signal: options.signal,
    });
    return { entry: (await response.json()) as FileEntry, created: response.status === 201 };
  }

  /**
   * Deletes a file or an empty directory of a thread's workspace (`DELETE …/files/<path>`): true
   * when it was deleted, false when nothing was there (404). A directory that is not empty is a 409.
   */
  async deleteFile(threadId: string, path: string, options: { signal?: AbortSignal } = {}): Promise<boolean> {
    if (fileSegments(path).length === 0) throw new TypeError("the workspace's root cannot be deleted; delete the thread");
    try {
      await this.request("DELETE", this.fileSegments(threadId, path), { threadId, accept: "application/json", signal: options.signal });
      return true;
    } catch (error) {
      if (error instanceof AntigravityHttpError && error.status === 404) return false;
      throw error;
    }
  }

  /**
   * The URL of a workspace path (with `?archive=zip` when `archive` is set). It needs this
   * client's headers (the token): a page reaches it through a server that adds them.
   */
  fileUrl(threadId: string, path = "", options: { archive?: boolean } = {}): string {
    return agentRouteUrl(this.source.url, this.fileSegments(threadId, path), options.archive ? { archive: "zip" } : undefined);
  }

  // ------------------------------------------------------------------------------- helpers

  private threadSegments(threadId: string): string[] {
    return ["threads", encodeURIComponent(threadId)];
  }

  private fileSegments(threadId: string, path: string): string[] {
    return [...this.threadSegments(threadId), "files", ...fileSegments(path)];
  }

  /** `method` on the route of `segments`; an answer that is not 2xx or 304 is thrown as an {@link AntigravityHttpError}. */
  private async request(
    method: string,
    segments: string[],
    options: {
      threadId?: string;
      query?: Record<string, string | undefined>;
      accept?: string;
      contentType?: string;
      headers?: Record<string, string>;
      body?: UploadBody;
      signal?: AbortSignal;
    },
  ): Promise<Response> {
    const url = agentRouteUrl(this.source.url, segments, options.query);
    const extra: Record<string, string> = { ...options.headers };
    if (options.accept) extra.Accept = options.accept;
    if (options.contentType) extra["Content-Type"] = options.contentType;
    const init: RequestInit & { duplex?: "half" } = {
      method,
      headers: requestHeaders(withHeaders(this.source.headers, extra), options.threadId, this.source.authToken),
      body: options.body as BodyInit | undefined,
      signal: options.signal,
    };
    // A streamed request body must say so (the Fetch standard's `duplex`).
    if (typeof ReadableStream !== "undefined" && options.body instanceof ReadableStream) init.duplex = "half";
    const fetchFn = this.source.fetch ?? ((input: string, requestInit: RequestInit) => fetch(input, requestInit));
    const response = await fetchFn(url, init);
    if (!response.ok && response.status !== 304) throw await httpError(`${method} ${url}`, response);
    return response;
  }
}
