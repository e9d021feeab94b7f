import type { Branch, ThreadBranches } from "./forks.js";
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
export type ThreadChange = {
    type: "created" | "updated" | "status";
    thread: ThreadSummary;
} | {
    type: "deleted";
    thread: {
        id: string;
    };
};
/** How `watchThreads` follows the server's changes. */
export interface WatchThreadsOptions {
    /** Ends the watch: the iteration then stops without an error. */
    signal?: AbortSignal;
    /**
     * Called each time the stream opens, `reconnected` from the second time on. Changes made while
     * it was down are not replayed: a caller keeping a list fetches it again here.
     */
    onOpen?: (info: {
        reconnected: boolean;
    }) => void;
    /** Called when the stream breaks, with the reason and the attempt that comes next (1, 2, …). */
    onBreak?: (error: unknown, attempt: number) => void;
    /** The wait before reconnecting: `delayMs` (500) doubled after each failure, up to `maxDelayMs` (10 000). */
    retry?: {
        delayMs?: number;
        maxDelayMs?: number;
    };
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
/**
 * The caller's threads on an agui-antigravity agent, and their workspaces' files. Built on a
 * configuration (`new AntigravityThreads({ url, authToken })`) or an `AntigravityAgent`
 * (`agent.threads`, which follows the agent's `url`, `headers`, `authToken` and `fetch`).
 *
 * The server answers each caller about its own threads only: a thread of another caller is a
 * 404, exactly as an unknown one. Every failure is an {@link AntigravityHttpError} with the
 * HTTP status and the server's message.
 */
export declare class AntigravityThreads {
    private readonly source;
    /** `source` is read at each request, so an agent's later changes (token, headers) apply. */
    constructor(source: AntigravityThreadsConfig);
    /**
     * One page of the caller's threads (`GET <path>/threads`), newest activity first. A bad
     * `limit` or `cursor` is a 400.
     */
    listThreads(options?: ListThreadsOptions): Promise<ThreadPage>;
    /** Every thread `listThreads` would list with `options`, page after page. */
    iterateThreads(options?: Omit<ListThreadsOptions, "cursor">): AsyncGenerator<ThreadSummary, void, undefined>;
    /** One of the caller's threads (`GET <path>/threads/<id>`); a 404 for an unknown one, or another caller's. */
    getThread(threadId: string, options?: {
        signal?: AbortSignal;
    }): Promise<ThreadSummary>;
    /**
     * Changes a thread's title, archived flag or current branch (`PATCH <path>/threads/<id>`);
     * returns it as it is now. A title that is empty once trimmed, longer than 200 characters or holds control
     * characters is a 422.
     */
    updateThread(threadId: string, update: ThreadUpdate, options?: {
        signal?: AbortSignal;
    }): Promise<ThreadSummary>;
    /** Renames a thread (see `updateThread`). */
    renameThread(threadId: string, title: string, options?: {
        signal?: AbortSignal;
    }): Promise<ThreadSummary>;
    /** Archives a thread, or brings it back with `archived` false (see `updateThread`). */
    archiveThread(threadId: string, archived?: boolean, options?: {
        signal?: AbortSignal;
    }): Promise<ThreadSummary>;
    /**
     * A thread's branches (`GET <path>/threads/<id>`): the current one's id and the others,
     * oldest first, each with the message where the thread left it (`leftAt`).
     */
    listBranches(threadId: string, options?: {
        signal?: AbortSignal;
    }): Promise<ThreadBranches>;
    /**
     * Makes branch `branchId` the thread's current one (`PATCH <path>/threads/<id>` with
     * `{"branch"}`); the one it leaves is listed among `branches`. Returns the thread as it is
     * now. A 422 for a branch the thread does not have, a 409 while the thread is busy (a run, a
     * turn, something waiting for the client). Only the server changes: a client holding the
     * thread's messages connects again to read the branch's (`AntigravityAgent.switchBranch` does).
     */
    switchBranch(threadId: string, branchId: string, options?: {
        signal?: AbortSignal;
    }): Promise<ThreadSummary>;
    /**
     * Deletes a thread, its history and its workspace (`DELETE <path>/threads/<id>`): true when it
     * was deleted, false when the server has no such thread for the caller (404).
     */
    deleteThread(threadId: string, options?: {
        signal?: AbortSignal;
    }): Promise<boolean>;
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
    watchThreads(options?: WatchThreadsOptions): AsyncGenerator<ThreadChange, void, undefined>;
    /**
     * A directory of a thread's workspace (`GET <path>/threads/<id>/files/<path>`; `""` is the
     * workspace's root), its entries sorted by name. A path naming a file is refused with a
     * `TypeError`; a path with an empty, `.` or `..` component too (before any request).
     */
    listFiles(threadId: string, path?: string, options?: {
        signal?: AbortSignal;
    }): Promise<DirectoryListing>;
    /**
     * A file of a thread's workspace (`GET …/files/<path>`), as the server's response: read its
     * `body` as a stream (or `text()`, `arrayBuffer()`), its `Content-Type`, `Content-Length`,
     * `ETag` and `Last-Modified`. With `range`, the answer is 206 with `Content-Range` (a range
     * past the end is a 416); with `ifNoneMatch` equal to the file's `ETag`, 304 with no body.
     * Links and files with several hard links are refused (403).
     */
    downloadFile(threadId: string, path: string, options?: DownloadOptions): Promise<Response>;
    /**
     * A directory of a thread's workspace and everything under it as a zip (`GET …/files/<path>?archive=zip`;
     * `""` for the whole workspace), streamed as the server makes it. Regular files and
     * directories only: links and special files are left out.
     */
    downloadArchive(threadId: string, path?: string, options?: {
        signal?: AbortSignal;
    }): Promise<Response>;
    /**
     * Writes a file into a thread's workspace (`PUT …/files/<path>`), made or replaced at once
     * when the whole body has arrived, its missing parent directories made. A thread that does
     * not exist yet is made for the caller (with an empty title), so a workspace can be seeded
     * before the first message. 409 when a component on the way is a file or the path is a
     * directory; 413 when the upload would take the caller's disk past the server's cap (nothing
     * is left behind).
     */
    uploadFile(threadId: string, path: string, body: UploadBody, options?: UploadOptions): Promise<UploadResult>;
    /**
     * Deletes a file or an empty directory of a thread's workspace (`DELETE …/files/<path>`): true
     * when it was deleted, false when nothing was there (404). A directory that is not empty is a 409.
     */
    deleteFile(threadId: string, path: string, options?: {
        signal?: AbortSignal;
    }): Promise<boolean>;
    /**
     * The URL of a workspace path (with `?archive=zip` when `archive` is set). It needs this
     * client's headers (the token): a page reaches it through a server that adds them.
     */
    fileUrl(threadId: string, path?: string, options?: {
        archive?: boolean;
    }): string;
    private threadSegments;
    private fileSegments;
    /** `method` on the route of `segments`; an answer that is not 2xx or 304 is thrown as an {@link AntigravityHttpError}. */
    private request;
}
