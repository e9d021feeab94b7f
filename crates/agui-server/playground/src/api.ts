// The server's thread and file routes (everything under `<agent path>/threads`), with the
// bearer token on every request and one retry after the user enters a token on a 401.
import { subRoute, token } from "./agent";

/** An HTTP failure with the server's message (`{"error": "…", "detail"?: "…"}`) when it sent one. */
export class ApiError extends Error {
  constructor(
    readonly status: number,
    message: string,
  ) {
    super(message);
    this.name = "ApiError";
  }
}

let askToken: ((reason: string) => Promise<boolean>) | undefined;

/** What to do on a 401: ask the user for the token; resolves true when one was saved. */
export function onUnauthorized(ask: (reason: string) => Promise<boolean>): void {
  askToken = ask;
}

/**
 * `fetch` with the token; after a 401 tries again with a token saved in the meantime, or asks
 * for one (one dialog for all requests) and tries again while one is saved.
 */
export async function apiFetch(url: string, init: RequestInit = {}): Promise<Response> {
  for (;;) {
    const sent = token.get();
    const headers = { ...(init.headers as Record<string, string> | undefined), ...token.headers() };
    const res = await fetch(url, { ...init, headers });
    if (res.status !== 401 || !askToken) return res;
    await res.body?.cancel();
    if (token.get() !== sent) continue;
    if (!(await askToken("The server refused the request: it needs its access token."))) return res;
  }
}

/** `res` itself when it succeeded, else an ApiError with the server's message. */
export async function ensureOk(res: Response, what: string): Promise<Response> {
  if (res.ok) return res;
  let message = `${what}: HTTP ${res.status}`;
  try {
    const body = (await res.json()) as { error?: unknown; detail?: unknown };
    const said = [body?.error, body?.detail].filter((part) => typeof part === "string" && part);
    if (said.length) message = `${what}: ${said.join(": ")}`;
  } catch {
    // Not JSON: the status says enough.
  }
  throw new ApiError(res.status, message);
}

/** The JSON answer of a request that must succeed. */
export async function apiJson<T>(url: string, what: string, init: RequestInit = {}): Promise<T> {
  const res = await ensureOk(await apiFetch(url, init), what);
  return (await res.json()) as T;
}

/** The URLs of one agent's thread routes. */
export class Routes {
  constructor(private readonly agentUrl: string) {}

  /** `<path>/threads` with `query`. */
  threads(query: Record<string, string> = {}): string {
    return withQuery(subRoute(this.agentUrl, "threads"), query);
  }

  /** `<path>/threads/events`. */
  events(): string {
    return subRoute(this.agentUrl, "threads/events");
  }

  /** `<path>/threads/<id>`. */
  thread(id: string): string {
    return subRoute(this.agentUrl, `threads/${encodeURIComponent(id)}`);
  }

  /** `<path>/threads/<id>/files/<rel>` (`rel` split on `/`, each part percent-encoded). */
  file(id: string, rel: string, query: Record<string, string> = {}): string {
    const encoded = rel.split("/").filter(Boolean).map(encodeURIComponent).join("/");
    return withQuery(`${this.thread(id)}/files/${encoded}`, query);
  }
}

function withQuery(url: string, query: Record<string, string>): string {
  const search = new URLSearchParams(query).toString();
  return search ? `${url}?${search}` : url;
}

/**
 * Reads a `text/event-stream` body, calling `onEvent(type, data)` per event (comments, such as
 * keep-alives, skipped). Resolves when the stream ends.
 */
export async function readEventStream(res: Response, onEvent: (type: string, data: string) => void): Promise<void> {
  if (!res.body) return;
  const reader = res.body.pipeThrough(new TextDecoderStream()).getReader();
  let buffer = "";
  let type = "";
  let data: string[] = [];
  for (;;) {
    const { value, done } = await reader.read();
    if (done) return;
    buffer += value;
    for (;;) {
      const end = buffer.search(/\r\n|\r|\n/);
      // A CR at the end of the buffer may be the first half of a CRLF: wait for the rest.
      if (end < 0 || (end === buffer.length - 1 && buffer[end] === "\r")) break;
      const line = buffer.slice(0, end);
      buffer = buffer.slice(end + (buffer.startsWith("\r\n", end) ? 2 : 1));
      if (line === "") {
        if (data.length) onEvent(type || "message", data.join("\n"));
        type = "";
        data = [];
      } else if (!line.startsWith(":")) {
        const colon = line.indexOf(":");
        const field = colon < 0 ? line : line.slice(0, colon);
        const text = colon < 0 ? "" : line.slice(colon + 1).replace(/^ /, "");
        if (field === "event") type = text;
        else if (field === "data") data.push(text);
      }
    }
  }
}

/** `bytes` as a short size (`12 KB`, `3.4 MB`). */
export function formatBytes(bytes: number): string {
  if (bytes < 1024) return `${bytes} B`;
  const units = ["KB", "MB", "GB", "TB"];
  let value = bytes / 1024;
  let unit = 0;
  while (value >= 1024 && unit < units.length - 1) {
    value /= 1024;
    unit += 1;
  }
  return `${value < 10 ? value.toFixed(1) : Math.round(value)} ${units[unit]}`;
}
