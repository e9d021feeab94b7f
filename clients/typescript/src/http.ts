// What every request to an agui-antigravity server shares: the URL of a route under the agent's
// path, the headers (the agent's own, the routing key, the token), and the typed error of a
// route that answered with an HTTP error.

/** An HTTP failure of one of the server's routes: its status, and the server's own message. */
export class AntigravityHttpError extends Error {
  /** The HTTP status. */
  readonly status: number;
  /** The response body (parsed JSON when it was JSON). */
  readonly payload: unknown;
  /** What the server said (`error` of its JSON body `{"error": "…"}`), when it said it that way. */
  readonly serverMessage: string | undefined;

  /** `route` names the request in the message (`POST …/connect`). */
  constructor(route: string, status: number, payload: unknown) {
    const serverMessage =
      typeof payload === "object" && payload !== null && typeof (payload as { error?: unknown }).error === "string"
        ? (payload as { error: string }).error
        : undefined;
    const detail = serverMessage ?? (typeof payload === "string" ? payload : JSON.stringify(payload));
    super(`${route}: HTTP ${status}${detail ? ` ${detail}` : ""}`);
    this.name = "AntigravityHttpError";
    this.status = status;
    this.payload = payload;
    this.serverMessage = serverMessage;
  }
}

/** `base` with `extra` laid over it, header names compared case-insensitively. */
export function withHeaders(base: HeadersInit | undefined, extra: Record<string, string>): Record<string, string> {
  const merged: Record<string, string> = {};
  new Headers(base).forEach((value, name) => {
    merged[name] = value;
  });
  for (const [name, value] of Object.entries(extra)) {
    for (const existing of Object.keys(merged)) if (existing.toLowerCase() === name.toLowerCase()) delete merged[existing];
    merged[name] = value;
  }
  return merged;
}

/** The headers of a request about `threadId`: `base`, the routing key and the token. */
export function requestHeaders(base: HeadersInit | undefined, threadId: string | undefined, authToken: string | undefined): Record<string, string> {
  return withHeaders(base, {
    ...(threadId === undefined ? {} : { "X-Thread-Id": threadId }),
    ...(authToken === undefined ? {} : { Authorization: `Bearer ${authToken}` }),
  });
}

/**
 * The URL of `segments` under the agent's path `agentUrl` (resolved against the page in a
 * browser). Each segment is sent as given: callers percent-encode what they take from users.
 */
export function agentRouteUrl(agentUrl: string, segments: string[], query?: Record<string, string | undefined>): string {
  const base = typeof globalThis.location?.href === "string" ? globalThis.location.href : undefined;
  const url = new URL(agentUrl, base);
  url.pathname = [url.pathname.replace(/\/+$/, ""), ...segments].join("/");
  for (const [name, value] of Object.entries(query ?? {})) if (value !== undefined) url.searchParams.set(name, value);
  return url.toString();
}

/** The error of a response that is not OK: its status and body. Consumes the body. */
export async function httpError(route: string, response: Response): Promise<AntigravityHttpError> {
  const text = await response.text().catch(() => "");
  let payload: unknown = text;
  if ((response.headers.get("content-type") ?? "").includes("application/json")) {
    try {
      payload = JSON.parse(text);
    } catch {
      // keep the raw text
    }
  }
  return new AntigravityHttpError(route, response.status, payload);
}

/** Whether `error` is the rejection of an aborted request. */
export const isAbort = (error: unknown) => (error as { name?: unknown } | undefined)?.name === "AbortError";
