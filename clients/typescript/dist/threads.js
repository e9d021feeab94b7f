// `AntigravityThreads`: the caller's threads on an agui-antigravity server and the files of their
// workspaces, through the routes under the agent's path (`threads`, `threads/<id>`,
// `threads/events`, `threads/<id>/files/<path>`). Every request carries the agent's headers and
// token, and `X-Thread-Id` when it is about one thread (the key replicas are routed on).
import { AntigravityHttpError, agentRouteUrl, httpError, requestHeaders, withHeaders } from "./http.js";
import { InvalidEventError, sseFrames } from "./sse.js";
const DEFAULT_RETRY = { delayMs: 500, maxDelayMs: 10_000 };
/** The encoded segments of a workspace path (`""` and `"/"` are its root). */
function fileSegments(path) {
    const trimmed = path.replace(/^\/+|\/+$/g, "");
    if (trimmed === "")
        return [];
    return trimmed.split("/").map((component) => {
        // A URL would resolve these before the server saw them: refused here, as the server would.
        if (component === "" || component === "." || component === "..") {
            throw new TypeError(`the workspace path ${JSON.stringify(path)} has a component that is empty, "." or "..": the server refuses it`);
        }
        return encodeURIComponent(component);
    });
}
/** `ms`, cut short by `signal`. */
function sleep(ms, signal) {
    return new Promise((resolve) => {
        if (signal?.aborted)
            return resolve();
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
const transient = (status) => status >= 500 || status === 408 || status === 429;
/** A change from one `thread` event's data; throws {@link InvalidEventError} on anything else. */
function threadChange(data) {
    let json;
    try {
        json = JSON.parse(data);
    }
    catch {
        throw new InvalidEventError(`a thread event is not JSON: ${data.slice(0, 200)}`);
    }
    const change = json;
    if (!["created", "updated", "status", "deleted"].includes(String(change?.type)) || typeof change.thread?.id !== "string") {
        throw new InvalidEventError(`not a thread change: ${data.slice(0, 200)}`);
    }
    return json;
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
    source;
    /** `source` is read at each request, so an agent's later changes (token, headers) apply. */
    constructor(source) {
        this.source = source;
    }
    // ------------------------------------------------------------------------------- threads
    /**
     * One page of the caller's threads (`GET <path>/threads`), newest activity first. A bad
     * `limit` or `cursor` is a 400.
     */
    async listThreads(options = {}) {
        const query = {
            limit: options.limit === undefined ? undefined : String(options.limit),
            cursor: options.cursor,
            archived: options.archived === undefined ? undefined : String(options.archived),
        };
        const response = await this.request("GET", ["threads"], { query, accept: "application/json", signal: options.signal });
        return (await response.json());
    }
    /** Every thread `listThreads` would list with `options`, page after page. */
    async *iterateThreads(options = {}) {
        let cursor;
        do {
            const page = await this.listThreads({ ...options, cursor });
            yield* page.threads;
            cursor = page.nextCursor ?? undefined;
        } while (cursor !== undefined);
    }
    /** One of the caller's threads (`GET <path>/threads/<id>`); a 404 for an unknown one, or another caller's. */
    async getThread(threadId, options = {}) {
        const response = await this.request("GET", this.threadSegments(threadId), { threadId, accept: "application/json", signal: options.signal });
        return (await response.json());
    }
    /**
     * Changes a thread's title, archived flag or current branch (`PATCH <path>/threads/<id>`);
     * returns it as it is now. A title that is empty once trimmed, longer than 200 characters or holds control
     * characters is a 422.
     */
    async updateThread(threadId, update, options = {}) {
        const response = await this.request("PATCH", this.threadSegments(threadId), {
            threadId,
            accept: "application/json",
            contentType: "application/json",
            body: JSON.stringify(update),
            signal: options.signal,
        });
        return (await response.json());
    }
    /** Renames a thread (see `updateThread`). */
    renameThread(threadId, title, options = {}) {
        return this.updateThread(threadId, { title }, options);
    }
    /** Archives a thread, or brings it back with `archived` false (see `updateThread`). */
    archiveThread(threadId, archived = true, options = {}) {
        return this.updateThread(threadId, { archived }, options);
    }
    /**
     * A thread's branches (`GET <path>/threads/<id>`): the current one's id and the others,
     * oldest first, each with the message where the thread left it (`leftAt`).
     */
    async listBranches(threadId, options = {}) {
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
    switchBranch(threadId, branchId, options = {}) {
        return this.updateThread(threadId, { branch: branchId }, options);
    }
    /**
     * Deletes a thread, its history and its workspace (`DELETE <path>/threads/<id>`): true when it
     * was deleted, false when the server has no such thread for the caller (404).
     */
    async deleteThread(threadId, options = {}) {
        try {
            await this.request("DELETE", this.threadSegments(threadId), { threadId, accept: "application/json", signal: options.signal });
            return true;
        }
        catch (error) {
            if (error instanceof AntigravityHttpError && error.status === 404)
                return false;
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
    async *watchThreads(options = {}) {
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
                if (!response.body)
                    throw new Error("the thread events response has no body");
                options.onOpen?.({ reconnected: opened });
                opened = true;
                failures = 0;
                for await (const frame of sseFrames(response.body)) {
                    if (frame.event === "thread")
                        yield threadChange(frame.data);
                }
                throw new Error("the thread events stream ended");
            }
            catch (error) {
                // The watch's end (its signal), whatever the request made of it.
                if (signal?.aborted)
                    return;
                if (error instanceof InvalidEventError)
                    throw error;
                if (error instanceof AntigravityHttpError && !transient(error.status))
                    throw error;
                failures += 1;
                options.onBreak?.(error, failures);
                await sleep(Math.min(retry.delayMs * 2 ** (failures - 1), retry.maxDelayMs), signal);
            }
            finally {
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
    async listFiles(threadId, path = "", options = {}) {
        const response = await this.request("GET", this.fileSegments(threadId, path), { threadId, accept: "application/json", signal: options.signal });
        // A file is served with its disposition, a listing without one.
        if (response.headers.has("content-disposition")) {
            await response.body?.cancel().catch(() => undefined);
            throw new TypeError(`${JSON.stringify(path)} in thread ${threadId}'s workspace is a file, not a directory`);
        }
        const listing = (await response.json());
        if (!Array.isArray(listing?.entries))
            throw new TypeError(`GET of directory ${JSON.stringify(path)} did not answer a listing`);
        return listing;
    }
    /**
     * A file of a thread's workspace (`GET …/files/<path>`), as the server's response: read its
     * `body` as a stream (or `text()`, `arrayBuffer()`), its `Content-Type`, `Content-Length`,
     * `ETag` and `Last-Modified`. With `range`, the answer is 206 with `Content-Range` (a range
     * past the end is a 416); with `ifNoneMatch` equal to the file's `ETag`, 304 with no body.
     * Links and files with several hard links are refused (403).
     */
    async downloadFile(threadId, path, options = {}) {
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
    async downloadArchive(threadId, path = "", options = {}) {
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
    async uploadFile(threadId, path, body, options = {}) {
        if (fileSegments(path).length === 0)
            throw new TypeError("an upload needs a file path, not the workspace's root");
        const response = await this.request("PUT", this.fileSegments(threadId, path), {
            threadId,
            accept: "application/json",
            contentType: options.contentType ?? "application/octet-stream",
            body,
            signal: options.signal,
        });
        return { entry: (await response.json()), created: response.status === 201 };
    }
    /**
     * Deletes a file or an empty directory of a thread's workspace (`DELETE …/files/<path>`): true
     * when it was deleted, false when nothing was there (404). A directory that is not empty is a 409.
     */
    async deleteFile(threadId, path, options = {}) {
        if (fileSegments(path).length === 0)
            throw new TypeError("the workspace's root cannot be deleted; delete the thread");
        try {
            await this.request("DELETE", this.fileSegments(threadId, path), { threadId, accept: "application/json", signal: options.signal });
            return true;
        }
        catch (error) {
            if (error instanceof AntigravityHttpError && error.status === 404)
                return false;
            throw error;
        }
    }
    /**
     * The URL of a workspace path (with `?archive=zip` when `archive` is set). It needs this
     * client's headers (the token): a page reaches it through a server that adds them.
     */
    fileUrl(threadId, path = "", options = {}) {
        return agentRouteUrl(this.source.url, this.fileSegments(threadId, path), options.archive ? { archive: "zip" } : undefined);
    }
    // ------------------------------------------------------------------------------- helpers
    threadSegments(threadId) {
        return ["threads", encodeURIComponent(threadId)];
    }
    fileSegments(threadId, path) {
        return [...this.threadSegments(threadId), "files", ...fileSegments(path)];
    }
    /** `method` on the route of `segments`; an answer that is not 2xx or 304 is thrown as an {@link AntigravityHttpError}. */
    async request(method, segments, options) {
        const url = agentRouteUrl(this.source.url, segments, options.query);
        const extra = { ...options.headers };
        if (options.accept)
            extra.Accept = options.accept;
        if (options.contentType)
            extra["Content-Type"] = options.contentType;
        const init = {
            method,
            headers: requestHeaders(withHeaders(this.source.headers, extra), options.threadId, this.source.authToken),
            body: options.body,
            signal: options.signal,
        };
        // A streamed request body must say so (the Fetch standard's `duplex`).
        if (typeof ReadableStream !== "undefined" && options.body instanceof ReadableStream)
            init.duplex = "half";
        const fetchFn = this.source.fetch ?? ((input, requestInit) => fetch(input, requestInit));
        const response = await fetchFn(url, init);
        if (!response.ok && response.status !== 304)
            throw await httpError(`${method} ${url}`, response);
        return response;
    }
}
