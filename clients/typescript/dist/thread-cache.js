/** Listing retries while the event stream is open, and watch restarts after a refusal. */
const RETRY_MS = { first: 1_000, max: 30_000 };
/** The caller's threads of one agent, kept current from the server. */
export class ThreadListCache {
    client;
    label;
    threads = new Map();
    closed = new AbortController();
    listeners = new Set();
    /** Callers of `ready()` waiting for the next listing's outcome. */
    waiters = [];
    started = false;
    loaded = false;
    /** The changes seen since the listing under way started (undefined when none is). */
    pending;
    listingFailures = 0;
    /** The next listing after a failed one. */
    relistTimer;
    /** `label` names the agent in warnings. */
    constructor(client, label) {
        this.client = client;
        this.label = label;
    }
    /** Starts following the server (once); the list fills shortly after. */
    start() {
        if (this.started || this.closed.signal.aborted)
            return;
        this.started = true;
        void this.follow();
    }
    /**
     * Resolves once the list has been read from the server (at once if it has); rejects with the
     * error of the next listing or watch request when that fails first, or after `timeoutMs`.
     */
    ready(timeoutMs) {
        this.start();
        if (this.loaded)
            return Promise.resolve();
        return new Promise((resolve, reject) => {
            const waiter = {
                resolve: () => (clearTimeout(timer), resolve()),
                reject: (error) => (clearTimeout(timer), reject(error)),
            };
            const timer = setTimeout(() => {
                this.waiters = this.waiters.filter((w) => w !== waiter);
                reject(new Error(`agent ${this.label}: the server did not list its threads within ${timeoutMs} ms`));
            }, timeoutMs);
            this.waiters.push(waiter);
        });
    }
    /** Whether the list has been read from the server at least once. */
    get isLoaded() {
        return this.loaded;
    }
    /** The threads as last known, newest activity first (then by id, as the server sorts). */
    list() {
        return [...this.threads.values()].sort((a, b) => (a.updatedAt === b.updatedAt ? (a.id < b.id ? -1 : a.id > b.id ? 1 : 0) : a.updatedAt < b.updatedAt ? 1 : -1));
    }
    /** One thread as last known. */
    get(threadId) {
        return this.threads.get(threadId);
    }
    /** Takes a change the caller made itself (the server's answer to it), before its event arrives. */
    apply(change) {
        this.pending?.push(change);
        this.take(change);
    }
    /** Calls `listener` on every change; returns its removal. */
    subscribe(listener) {
        this.listeners.add(listener);
        return () => this.listeners.delete(listener);
    }
    /** Stops following the server. */
    close() {
        this.closed.abort();
        clearTimeout(this.relistTimer);
        for (const waiter of this.waiters.splice(0))
            waiter.reject(new Error(`agent ${this.label}: the thread list was closed`));
    }
    /** The watch, restarted after a wait when the server refuses it (a token it does not take yet). */
    async follow() {
        let refusals = 0;
        while (!this.closed.signal.aborted) {
            try {
                for await (const change of this.client.watchThreads({
                    signal: this.closed.signal,
                    onOpen: () => this.relist(),
                    onBreak: (error, attempt) => {
                        if (attempt === 1)
                            console.warn(`AntigravityRunner: agent ${this.label}: the thread events stream broke; reconnecting:`, error);
                    },
                })) {
                    refusals = 0;
                    this.pending?.push(change);
                    this.take(change);
                }
            }
            catch (error) {
                this.failed(error);
                console.warn(`AntigravityRunner: agent ${this.label}: the server refused the thread events stream; trying again:`, error);
                refusals += 1;
                await new Promise((resolve) => {
                    const done = () => (clearTimeout(timer), resolve());
                    const timer = setTimeout(done, Math.min(RETRY_MS.first * 2 ** refusals, RETRY_MS.max));
                    this.closed.signal.addEventListener("abort", done, { once: true });
                });
            }
        }
    }
    /** Lists every thread again; changes that arrive meanwhile are laid over the listing. */
    relist() {
        const pending = [];
        this.pending = pending;
        clearTimeout(this.relistTimer);
        void (async () => {
            const listed = [];
            for await (const thread of this.client.iterateThreads({ archived: "all", limit: 200, signal: this.closed.signal }))
                listed.push(thread);
            return listed;
        })().then((listed) => {
            if (this.pending !== pending)
                return; // a newer listing took over
            this.pending = undefined;
            this.replace(listed);
            for (const change of pending)
                this.take(change);
            this.loaded = true;
            this.listingFailures = 0;
            for (const waiter of this.waiters.splice(0))
                waiter.resolve();
        }, (error) => {
            if (this.pending !== pending || this.closed.signal.aborted)
                return;
            this.pending = undefined;
            this.failed(error);
            console.warn(`AntigravityRunner: agent ${this.label}: listing the threads failed; trying again:`, error);
            this.listingFailures += 1;
            this.relistTimer = setTimeout(() => this.relist(), Math.min(RETRY_MS.first * 2 ** this.listingFailures, RETRY_MS.max));
        });
    }
    failed(error) {
        for (const waiter of this.waiters.splice(0))
            waiter.reject(error);
    }
    /** The list replaced by a listing; listeners hear what differs, as changes. */
    replace(listed) {
        const before = new Map(this.threads);
        this.threads.clear();
        for (const thread of listed)
            this.threads.set(thread.id, thread);
        for (const [id] of before)
            if (!this.threads.has(id))
                this.emit({ type: "deleted", thread: { id } });
        for (const thread of listed) {
            const old = before.get(thread.id);
            if (!old)
                this.emit({ type: "created", thread });
            else if (JSON.stringify(old) !== JSON.stringify(thread))
                this.emit({ type: "updated", thread });
        }
    }
    take(change) {
        if (change.type === "deleted")
            this.threads.delete(change.thread.id);
        else
            this.threads.set(change.thread.id, change.thread);
        this.emit(change);
    }
    emit(change) {
        for (const listener of this.listeners) {
            try {
                listener(change);
            }
            catch (error) {
                console.warn(`AntigravityRunner: a thread list listener failed:`, error);
            }
        }
    }
}
