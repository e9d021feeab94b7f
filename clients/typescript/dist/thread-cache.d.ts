import type { AntigravityThreads, ThreadChange, ThreadSummary } from "./threads.js";
/** What a listener hears: a change of the server's list, as the events stream says it or a new listing shows it. */
export type ThreadListListener = (change: ThreadChange) => void;
/** The caller's threads of one agent, kept current from the server. */
export declare class ThreadListCache {
    private readonly client;
    private readonly label;
    private readonly threads;
    private readonly closed;
    private readonly listeners;
    /** Callers of `ready()` waiting for the next listing's outcome. */
    private waiters;
    private started;
    private loaded;
    /** The changes seen since the listing under way started (undefined when none is). */
    private pending;
    private listingFailures;
    /** The next listing after a failed one. */
    private relistTimer;
    /** `label` names the agent in warnings. */
    constructor(client: AntigravityThreads, label: string);
    /** Starts following the server (once); the list fills shortly after. */
    start(): void;
    /**
     * Resolves once the list has been read from the server (at once if it has); rejects with the
     * error of the next listing or watch request when that fails first, or after `timeoutMs`.
     */
    ready(timeoutMs: number): Promise<void>;
    /** Whether the list has been read from the server at least once. */
    get isLoaded(): boolean;
    /** The threads as last known, newest activity first (then by id, as the server sorts). */
    list(): ThreadSummary[];
    /** One thread as last known. */
    get(threadId: string): ThreadSummary | undefined;
    /** Takes a change the caller made itself (the server's answer to it), before its event arrives. */
    apply(change: ThreadChange): void;
    /** Calls `listener` on every change; returns its removal. */
    subscribe(listener: ThreadListListener): () => void;
    /** Stops following the server. */
    close(): void;
    /** The watch, restarted after a wait when the server refuses it (a token it does not take yet). */
    private follow;
    /** Lists every thread again; changes that arrive meanwhile are laid over the listing. */
    private relist;
    private failed;
    /** The list replaced by a listing; listeners hear what differs, as changes. */
    private replace;
    private take;
    private emit;
}
