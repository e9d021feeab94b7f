// The simulated users: each its own identity (even users hold a token of `auth_tokens`, odd
// ones are named by the authenticating proxy's header with `proxy_token`), acting at random on
// their threads, reproducibly from the seed. Every request names its thread in `X-Thread-Id`,
// so nginx routes it; some connects go straight to a replica the proxy would not choose, which
// must hand the thread over (or ask its holder for it) and still restate the whole history.
import { randomUUID } from "node:crypto";
import { decodeSse } from "../../e2e/lib/client.mjs";
import { AFTER_A_FAULT, BIG, TOOLS, count, faulted, generator, sleep, violate, world } from "./world.mjs";

/** The header in which the soak's "authenticating proxy" names a user. */
export const USER_HEADER = "X-Forwarded-User";

/** Each user's identity: the headers its requests carry, and the servers' flags that admit them. */
export function identities(users) {
  const proxyToken = `soak-proxy-${randomUUID()}`;
  const list = Array.from({ length: users }, (_, n) =>
    n % 2 === 0
      ? { name: `u${n}`, token: `soak-${n}-${randomUUID()}`, headers: {} }
      : { name: `u${n}`, token: proxyToken, headers: { [USER_HEADER.toLowerCase()]: `person-${n}` } },
  );
  for (const i of list) i.headers.authorization = `Bearer ${i.token}`;
  const holders = list.filter((_, n) => n % 2 === 0);
  const args = ["--auth-tokens", holders.map((i) => `${i.name}=${i.token}`).join(",")];
  if (users > 1) args.push("--user-header", USER_HEADER, "--proxy-token", proxyToken);
  return { list, args, metricsToken: list[0].token };
}

export class Users {
  constructor({ fleet, ids, seed }) {
    this.fleet = fleet;
    this.ids = ids;
    this.seed = seed;
  }

  /** One thread of user `n`: its id, its owner's headers and the messages a client that never left holds. */
  newThread(n) {
    const thread = { id: `soak-u${n}-${randomUUID().slice(0, 8)}`, user: n, headers: this.ids[n].headers, messages: [], answered: new Set() };
    world.threads.set(thread.id, thread);
    return thread;
  }

  /**
   * POSTs a run (or a connect) and reads its stream to the end (or aborts it at `abortAt`
   * events); `via`: a replica to ask directly instead of the proxy.
   */
  async post(thread, { route = "", body, abortAt, resume, via } = {}) {
    const losses = world.losses;
    const input = body ?? { threadId: thread.id, runId: `run-${randomUUID()}`, messages: thread.messages, tools: TOOLS, context: [], state: {}, forwardedProps: {}, ...(resume ? { resume } : {}) };
    const controller = new AbortController();
    const base = via ? via.server.url : this.fleet.url;
    let res;
    try {
      res = await fetch(`${base}${route}`, {
        method: "POST",
        headers: { "content-type": "application/json", accept: "text/event-stream", "x-thread-id": thread.id, ...thread.headers },
        body: typeof input === "string" ? input : JSON.stringify(input),
        signal: controller.signal,
      });
    } catch (err) {
      return { cut: true, losses, error: String(err) };
    }
    const upstream = res.headers.get("x-upstream") ?? (via ? `127.0.0.1:${via.port}` : undefined);
    thread.lastUpstream = upstream;
    if (res.status !== 200) return { status: res.status, text: await res.text(), losses, upstream };
    const decoder = new TextDecoder();
    let text = "";
    try {
      for await (const chunk of res.body) {
        text += decoder.decode(chunk, { stream: true });
        if (abortAt !== undefined && events(text).length >= abortAt) {
          controller.abort();
          return { aborted: true, events: events(text), losses, upstream };
        }
      }
    } catch (err) {
      return { cut: true, events: events(text), losses, error: String(err), upstream };
    }
    const all = events(text);
    // A stream that ends without a terminal event was cut (nginx closes it when its replica dies).
    const cut = !all.some((e) => e.type === "RUN_FINISHED" || e.type === "RUN_ERROR");
    return { status: 200, events: all, losses, upstream, cut };
  }

  async remove(thread) {
    const res = await fetch(`${this.fleet.url}/threads/${encodeURIComponent(thread.id)}`, { method: "DELETE", headers: thread.headers }).catch((err) => ({ status: 0, err }));
    return res.status;
  }

  /**
   * Runs a user message to its end: interrupts are answered now or late (up to three rounds), or
   * left open; a frontend tool call is answered the same way; a refusal because another replica
   * holds the thread (`THREAD_ELSEWHERE`) is retried as its message says. The message counts as
   * answered when the last run of the chain succeeds.
   */
  async turn(thread, words, since, rnd, expected = []) {
    const message = { id: `u-${randomUUID()}`, role: "user", content: words };
    thread.messages.push(message);
    let rec = await this.retried(thread, {});
    for (let round = 0; ; round += 1) {
      const what = `run on ${thread.id} (${words.slice(0, 24)}) via ${rec.upstream ?? "?"}`;
      judgeStatus(rec, what, since);
      const end = rec.events ? terminals(rec, what, since) : undefined;
      judge(end, what, since, expected);
      if (end?.type !== "RUN_FINISHED") return end;
      const interrupts = end.outcome?.type === "interrupt" ? end.outcome.interrupts : [];
      const call = rec.events.find((e) => e.type === "TOOL_CALL_START" && e.toolCallName === "set_color");
      const pending = end.outcome?.pendingToolCallIds?.length || (call && !interrupts.length);
      if (!interrupts.length && !pending) {
        thread.answered.add(message.id);
        return end;
      }
      const when = round < 3 ? rnd.pick(["now", "now", "late", "never"]) : "never";
      count(world.tally.actions, `answer ${when}`);
      if (when === "never") return end;
      if (when === "late") await sleep(rnd.int(500, 4000));
      if (interrupts.length) {
        rec = await this.retried(thread, { resume: interrupts.map((i) => answer(i, rnd)) });
      } else {
        thread.messages.push({ id: `a-${randomUUID()}`, role: "assistant", toolCalls: [{ id: call.toolCallId, type: "function", function: { name: "set_color", arguments: "{\"color\":\"teal\"}" } }] });
        // The result names no prompt's tag: after a restart it reaches the model as text (a late result).
        thread.messages.push({ id: `t-${randomUUID()}`, role: "tool", toolCallId: call.toolCallId, content: "teal" });
        rec = await this.retried(thread, {});
      }
    }
  }

  /** A run, retried while it is refused `THREAD_ELSEWHERE` (its message was not sent), for up to a minute. */
  async retried(thread, options) {
    const until = Date.now() + 60_000;
    for (;;) {
      const rec = await this.post(thread, options);
      const end = rec.events?.find((e) => e.type === "RUN_ERROR");
      if (end?.code !== "THREAD_ELSEWHERE" || Date.now() > until) return rec;
      world.tally.elsewhere += 1;
      await sleep(1_000);
    }
  }

  /**
   * A connect's history against what the client knows: every message it saw answered is
   * there once, in the client's order (`where` names the replica asked).
   */
  checkHistory(thread, rec, since, where) {
    const snapshot = rec.events?.find((e) => e.type === "MESSAGES_SNAPSHOT");
    if (!snapshot) {
      if (rec.status === 200 && !rec.cut && !faulted(since) && rec.events?.every((e) => e.type !== "RUN_ERROR")) violate(`connect on ${thread.id} ${where} restated no history`);
      return;
    }
    const ids = snapshot.messages.filter((m) => m.role === "user").map((m) => m.id);
    const twice = ids.filter((id, i) => ids.indexOf(id) !== i);
    if (twice.length) violate(`connect on ${thread.id} ${where} shows user message ${twice[0]} ${ids.filter((i) => i === twice[0]).length} times`);
    const wanted = thread.messages.filter((m) => m.role === "user" && thread.answered.has(m.id)).map((m) => m.id);
    const shown = wanted.filter((id) => ids.includes(id));
    for (const id of wanted) if (!ids.includes(id)) violate(`connect on ${thread.id} ${where} does not show answered message ${id} ("${thread.messages.find((m) => m.id === id)?.content}")`);
    const order = shown.map((id) => ids.indexOf(id));
    if (order.some((p, i) => i > 0 && p < order[i - 1])) violate(`connect on ${thread.id} ${where} shows the answered messages out of order`);
  }

  /** Each user: its live threads, and every thread it ever had (for the exactly-once check). */
  async user(n, deadline) {
    const rnd = generator(this.seed * 1000 + n + 1);
    const threads = [this.newThread(n)];
    const all = [...threads];
    let k = 0;
    while (Date.now() < deadline) {
      while (this.fleet.restarting) await sleep(200);
      const since = world.faultClock;
      let action = rnd.pick(["say", "say", "say", "park", "ask", "list", "cmd", "bgcmd", "stop", "disconnect", "connect", "malformed", "fail", "limit", "delete", "hang", "big"]);
      // Big replies and stalls are rare; a user keeps at most six threads.
      if ((action === "big" || action === "hang") && rnd.next() < 0.6) action = "say";
      if (threads.length >= 6) action = "delete";
      if (action !== "delete" && rnd.next() < 0.15) threads.push(this.newThread(n)), all.push(threads.at(-1));
      const thread = rnd.pick(threads);
      count(world.tally.actions, action);
      k += 1;
      const tag = `u${n}-${k}`;
      world.journal.set(tag, `${action} on ${thread.id} at ${Math.round((Date.now() - world.started) / 1000)} s`);
      try {
        await this.act(action, thread, tag, since, rnd, { threads, all, n });
      } catch (err) {
        violate(`user ${n} ${action}: ${err?.stack ?? err}`);
      }
      await sleep(rnd.int(50, 600));
    }
    return { threads, all };
  }

  async act(action, thread, tag, since, rnd, { threads, all, n }) {
    switch (action) {
      case "say":
      case "park":
      case "ask":
      case "list":
      case "cmd":
      case "bgcmd":
      case "limit":
        await this.turn(thread, `s-${action} ${tag}`, since, rnd);
        break;
      case "fail":
        await this.turn(thread, `s-fail ${tag}`, since, rnd, ["AGENT_ERROR"]);
        break;
      case "hang":
        await this.turn(thread, `s-hang ${tag}`, since, rnd, ["TURN_STALLED", "AGENT_ERROR"]);
        break;
      case "big": {
        // A thread of its own, deleted after: its 12 MB stay out of the other threads' history.
        const big = this.newThread(n);
        all.push(big);
        const end = await this.turn(big, `s-big ${tag}`, since, rnd);
        if (end?.type === "RUN_FINISHED") {
          const rec = await this.post(big, { route: "/connect" });
          const reply = rec.events?.find((e) => e.type === "MESSAGES_SNAPSHOT")?.messages?.find((m) => m.role === "assistant");
          if (rec.status === 200 && reply?.content?.length !== BIG.length && !faulted(since)) violate(`the 12 MB reply on ${big.id} came back from connect as ${reply?.content?.length} characters`);
        }
        const status = await this.remove(big);
        if (status !== 200 && status !== 404 && !faulted(since)) violate(`deleting ${big.id} answered HTTP ${status}`);
        big.deleted = true;
        break;
      }
      case "stop": {
        const message = { id: `u-${randomUUID()}`, role: "user", content: `s-slow ${tag}` };
        thread.messages.push(message);
        const running = this.post(thread);
        await sleep(rnd.int(300, 1200));
        await fetch(`${this.fleet.url}/stop`, { method: "POST", headers: { "content-type": "application/json", "x-thread-id": thread.id, ...thread.headers }, body: JSON.stringify({ threadId: thread.id }) }).catch(() => {});
        // A stop may come before the message reached the model: it is not counted as answered.
        const rec = await running;
        if (rec.events) judge(terminals(rec, `stopped run on ${thread.id}`, since), `stopped run on ${thread.id}`, since);
        break;
      }
      case "disconnect": {
        const message = { id: `u-${randomUUID()}`, role: "user", content: `s-slow ${tag}` };
        thread.messages.push(message);
        await this.post(thread, { abortAt: rnd.int(2, 8) });
        // The turn goes on detached; a connect shows it through to its end.
        const rec = await this.post(thread, { route: "/connect" });
        const end = rec.events ? terminals(rec, `connect after a disconnect on ${thread.id}`, since) : undefined;
        judge(end, `connect after a disconnect on ${thread.id}`, since);
        // Answered when the reply's last word shows, in the history or streamed live (a connect
        // to a turn a fault ended shows the history and finishes too).
        const shown = rec.events?.some((e) => (e.type === "TEXT_MESSAGE_CONTENT" && e.delta.includes("w29")) || (e.type === "MESSAGES_SNAPSHOT" && e.messages.some((m, i) => m.role === "assistant" && String(m.content).includes("w29") && e.messages.slice(0, i).some((u) => u.id === message.id))));
        if (end?.type === "RUN_FINISHED" && shown) thread.answered.add(message.id);
        break;
      }
      case "connect": {
        // With replicas, half the connects go to a replica the proxy may not have chosen.
        const up = this.fleet.several ? this.fleet.up() : [];
        const via = up.length && rnd.next() < 0.5 ? rnd.pick(up) : undefined;
        if (via) count(world.tally.actions, "connect elsewhere");
        const rec = await this.post(thread, { route: "/connect", via });
        if (rec.status === 404) break; // a thread whose first run was cut: nothing to show yet
        const what = `connect on ${thread.id} via ${rec.upstream ?? "?"}`;
        judgeStatus(rec, what, since);
        const end = rec.events ? terminals(rec, what, since) : undefined;
        if (end?.code === "THREAD_ELSEWHERE") {
          world.tally.elsewhere += 1;
          break;
        }
        judge(end, what, since);
        if (end?.type === "RUN_FINISHED") this.checkHistory(thread, rec, since, `via ${rec.upstream ?? "?"}`);
        break;
      }
      case "delete": {
        if (threads.length < 2) break;
        const gone = threads.splice(Math.floor(rnd.next() * threads.length), 1)[0];
        const status = await this.remove(gone);
        if (status !== 200 && status !== 404 && !faulted(since)) violate(`deleting ${gone.id} answered HTTP ${status}`);
        if (status === 200) {
          const rec = await this.post(gone, { route: "/connect" });
          if (rec.status !== 404 && !faulted(since)) violate(`${gone.id} was deleted but connect answers ${rec.status}`);
        }
        gone.deleted = true;
        break;
      }
      case "malformed": {
        const bad = rnd.pick(["{not json", JSON.stringify({ threadId: "", messages: 3 }), JSON.stringify({ threadId: "x/../y", runId: "r", messages: [] })]);
        const rec = await this.post(thread, { body: bad });
        if (!rec.status || rec.status < 400 || rec.status >= 500) {
          if (!rec.cut) violate(`a malformed request was answered ${rec.status ?? "without a status"} (${bad.slice(0, 40)})`);
        }
        break;
      }
    }
  }

  /**
   * At the end: every live thread answers a last message (one retry: its last turn may have been
   * cut by a fault) and its connect shows every message it answered. `via`: one replica asked
   * directly (the fresh replica that resumes every thread cold).
   */
  async lastWords(threads, { suffix = "last", via } = {}) {
    for (const thread of threads) {
      const since = world.faultClock;
      const attempt = async (words) => {
        const message = { id: `u-${randomUUID()}`, role: "user", content: words };
        thread.messages.push(message);
        const rec = via ? await this.post(thread, { via }) : await this.retried(thread, {});
        const end = rec.events?.find((e) => e.type === "RUN_FINISHED" || e.type === "RUN_ERROR");
        if (end?.type === "RUN_FINISHED") thread.answered.add(message.id);
        return { rec, end };
      };
      let { rec, end } = await attempt(`s-say ${thread.id}-${suffix}`);
      if (end?.type !== "RUN_FINISHED") ({ rec, end } = await attempt(`s-say ${thread.id}-${suffix}-again`));
      if (end?.type !== "RUN_FINISHED") violate(`${thread.id} does not answer a last message${via ? ` on ${via.life}` : ""}: ${JSON.stringify(end ?? rec).slice(0, 300)}`);
      const connect = await this.post(thread, { route: "/connect", via });
      this.checkHistory(thread, connect, since, via ? `on ${via.life}` : "at the end");
    }
  }
}

/** Events of an SSE text, complete ones only (a cut stream may end inside one). */
const events = (text) => decodeSse(text.slice(0, text.lastIndexOf("\n\n") + 2));

/**
 * Checks one finished stream: exactly one terminal event, unless a server was lost meanwhile
 * (a stream cut by a killed, stopped, frozen or removed replica may end without one); a cut
 * with no such loss is a violation.
 */
function terminals(rec, what, since) {
  world.tally.runs += 1;
  if (rec.cut || rec.losses !== world.losses) {
    if (rec.losses !== world.losses || faulted(since)) {
      world.tally.cutByFault += 1;
      return rec.events?.findLast((e) => e.type === "RUN_FINISHED" || e.type === "RUN_ERROR");
    }
    violate(`${what}: the stream was cut with no fault (${rec.error ?? (rec.events ?? []).map((e) => e.type).join(" ")})`);
    return undefined;
  }
  const ends = rec.events.filter((e) => e.type === "RUN_FINISHED" || e.type === "RUN_ERROR");
  if (ends.length !== 1) violate(`${what}: ${ends.length} terminal events (${rec.events.map((e) => e.type).join(" ")})`);
  return ends.at(-1);
}

/**
 * Judges an error ending: the codes a fault leaves behind are always allowed, `expected` ones
 * when the script asked for them, any when a fault ran during the action.
 */
function judge(end, what, since, expected = []) {
  if (end?.type !== "RUN_ERROR" || AFTER_A_FAULT.includes(end.code) || expected.includes(end.code)) return;
  if (end.code === "LEASE_LOST") world.tally.leaseLost += 1;
  if (faulted(since)) {
    world.tally.faultedErrors += 1;
    return;
  }
  violate(`${what}: RUN_ERROR ${end.code} ${end.message}`);
}

/** Judges a refused request the same way: a refusal during a fault is explained by it. */
function judgeStatus(rec, what, since) {
  if (!rec.status || rec.status === 200) return;
  if (faulted(since)) {
    world.tally.faultedErrors += 1;
    return;
  }
  violate(`${what} answered HTTP ${rec.status}: ${rec.text?.slice(0, 200)}`);
}

/** The answer a user gives an interrupt, or undefined to leave it open. */
function answer(interrupt, rnd) {
  if (interrupt.reason.endsWith("ask_question")) return { interruptId: interrupt.id, status: "resolved", payload: { responses: [{ selected_option_ids: ["1"] }] } };
  if (interrupt.reason.endsWith("tool_approval")) return { interruptId: interrupt.id, status: "resolved", payload: { approved: rnd.next() < 0.8 } };
  return { interruptId: interrupt.id, status: "cancelled" };
}
