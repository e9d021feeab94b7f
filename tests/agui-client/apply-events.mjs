#!/usr/bin/env node
// Applies recorded runs with the official @ag-ui/client and prints the messages it holds.
//
//   node apply-events.mjs <cases.json>
//
// <cases.json> is [{ name, initial: [Message], runs: [[Event, ...], ...] }]. For each case an
// HttpAgent starting with `initial` runs once per entry of `runs` against a local server that
// answers with those events as SSE; the output is [{ name, messages, failures }] on stdout —
// the messages the client holds after the last run, and any run the client failed.
import fs from "node:fs";
import http from "node:http";
import { HttpAgent } from "@ag-ui/client";

const file = process.argv[2];
if (!file) {
  console.error("usage: node apply-events.mjs <cases.json>");
  process.exit(2);
}
const cases = JSON.parse(fs.readFileSync(file, "utf8"));
console.warn = () => {};

let pending = [];
const server = http.createServer((req, res) => {
  req.resume();
  req.on("end", () => {
    const events = pending.shift() ?? [];
    res.writeHead(200, { "Content-Type": "text/event-stream" });
    for (const event of events) res.write(`data: ${JSON.stringify(event)}\n\n`);
    res.end();
  });
});
await new Promise((resolve) => server.listen(0, "127.0.0.1", resolve));
const url = `http://127.0.0.1:${server.address().port}/`;

const results = [];
for (const testCase of cases) {
  const agent = new HttpAgent({ url, threadId: "thread-1", initialMessages: testCase.initial ?? [] });
  const failures = [];
  for (const events of testCase.runs) {
    pending = [events];
    // Run ids must match the events' own RUN_STARTED for the client's checks.
    const started = events.find((e) => e.type === "RUN_STARTED");
    try {
      await agent.runAgent(
        { runId: started?.runId },
        { onRunFailed: ({ error }) => failures.push(String(error?.message ?? error)) },
      );
    } catch (error) {
      failures.push(String(error?.message ?? error));
    }
  }
  results.push({ name: testCase.name, messages: agent.messages, failures });
}
server.close();
process.stdout.write(JSON.stringify(results));
