// What another client than the page does on a thread, straight against the server: a run, and
// the thread's summary.
import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";

/** A run of `text` on thread `threadId` by another client than the page; resolves with its events (SSE text). */
export async function runElsewhere(base, threadId, text) {
  const res = await fetch(`${base}/`, {
    method: "POST",
    headers: { "Content-Type": "application/json", Accept: "text/event-stream" },
    body: JSON.stringify({
      threadId,
      runId: `run-${randomUUID()}`,
      messages: [{ id: `m-${randomUUID()}`, role: "user", content: text }],
      tools: [],
      context: [],
      state: {},
      forwardedProps: {},
    }),
  });
  assert.equal(res.status, 200, `the other client's run was accepted: ${res.status}`);
  return res.text();
}

/** The server's summary of `threadId` (null for a 404). */
export async function summaryOf(base, threadId) {
  const res = await fetch(`${base}/threads/${encodeURIComponent(threadId)}`);
  if (res.status === 404) return null;
  assert.equal(res.status, 200);
  return res.json();
}
