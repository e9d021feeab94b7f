// The thread list, kept in localStorage per agent path: ids and titles only. The history of a
// thread comes back from the server (connect), never from here.

/** One remembered thread. */
export interface ThreadEntry {
  id: string;
  title: string;
  updated: number;
}

const MAX_THREADS = 50;

/** The remembered threads of one agent, most recent first. */
export class ThreadStore {
  private readonly key: string;

  constructor(agentPath: string) {
    this.key = `agui-playground:threads:${agentPath}`;
  }

  list(): ThreadEntry[] {
    try {
      const parsed: unknown = JSON.parse(localStorage.getItem(this.key) ?? "[]");
      if (!Array.isArray(parsed)) return [];
      return parsed.filter(
        (t): t is ThreadEntry => typeof t?.id === "string" && typeof t?.title === "string",
      );
    } catch {
      return [];
    }
  }

  /** Adds or moves `id` to the top, keeping its title unless `title` is given. */
  touch(id: string, title?: string): void {
    const all = this.list();
    const existing = all.find((t) => t.id === id);
    const entry = { id, title: title ?? existing?.title ?? "New chat", updated: Date.now() };
    const rest = all.filter((t) => t.id !== id);
    this.save([entry, ...rest].slice(0, MAX_THREADS));
  }

  remove(id: string): void {
    this.save(this.list().filter((t) => t.id !== id));
  }

  /** The thread used last, if any. */
  last(): ThreadEntry | undefined {
    return this.list()[0];
  }

  private save(entries: ThreadEntry[]): void {
    localStorage.setItem(this.key, JSON.stringify(entries));
  }
}

/** A fresh thread id (the server accepts letters, digits and `-_.:@`). */
export function newThreadId(): string {
  return `pg-${crypto.randomUUID()}`;
}
