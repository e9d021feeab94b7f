// The page's AG-UI client: the official HttpAgent, plus the bearer token on every request and
// `connect` (`POST <agent path>/connect`, the convention of AG-UI's connect) and `stop`
// (`POST <agent path>/stop`), which HttpAgent 1.0 does not implement itself.
import {
  HttpAgent,
  type BaseEvent,
  type RunAgentInput,
  runHttpRequest,
  transformHttpEventStream,
} from "@ag-ui/client";
import type { Observable } from "rxjs";

/** An HTTP failure with its status, as HttpAgent reports it (`error.status`). */
export interface HttpError extends Error {
  status?: number;
  payload?: unknown;
}

/** The status of an HttpAgent/fetch failure, if it was an HTTP answer. */
export function httpStatus(error: unknown): number | undefined {
  const status = (error as HttpError | undefined)?.status;
  return typeof status === "number" ? status : undefined;
}

/** The page's access token (the server's `auth_token`), kept per origin in localStorage. */
export const token = {
  key: "agui-playground:token",
  get(): string | null {
    return localStorage.getItem(this.key);
  },
  set(value: string | null): void {
    if (value) localStorage.setItem(this.key, value);
    else localStorage.removeItem(this.key);
  },
  /** `Authorization` header for the stored token (none without one). */
  headers(): Record<string, string> {
    const value = this.get();
    return value ? { Authorization: `Bearer ${value}` } : {};
  },
};

/** `url` joined with a sub-route of the agent path (`/` + `connect` = `/connect`). */
export function subRoute(agentUrl: string, route: string): string {
  return `${agentUrl.replace(/\/+$/, "")}/${route}`;
}

/** HttpAgent with the token, connect and stop. */
export class PlaygroundAgent extends HttpAgent {
  protected requestInit(input: RunAgentInput): RequestInit {
    const init = super.requestInit(input);
    // Read on every request: the token may have been entered after the agent was made.
    init.headers = { ...(init.headers as Record<string, string>), ...token.headers() };
    return init;
  }

  /** `POST <path>/connect` with the run input: the thread's history, then live events. */
  protected connect(input: RunAgentInput): Observable<BaseEvent> {
    const url = subRoute(this.url, "connect");
    return transformHttpEventStream(
      runHttpRequest(() => this.fetch(url, this.requestInit(input))),
      this.debugLogger,
    );
  }

  /**
   * `POST <path>/stop` for this thread. Resolves with the HTTP status (404/405 when the server
   * has no stop route); rejects only when the request could not be sent.
   */
  async stop(): Promise<number> {
    const res = await fetch(subRoute(this.url, "stop"), {
      method: "POST",
      headers: { "Content-Type": "application/json", ...token.headers() },
      body: JSON.stringify({ threadId: this.threadId }),
    });
    return res.status;
  }
}
