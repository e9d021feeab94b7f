#!/usr/bin/env node
// Drives the official @ag-ui/client HttpAgent through a multi-turn conversation against a
// tiny local AG-UI server, and records every RunAgentInput body the client POSTs.
//
//   node drive-http-agent.mjs <out.json>
//
// The conversation: (1) a multimodal user message with frontend tools, context, state and
// forwarded props — the agent reasons, answers and calls a frontend tool; (2) the app answers
// the tool call with a tool message — the agent interrupts for a confirmation; (3) the app
// resumes the interrupt — the agent finishes with a result; (4) a follow-up user message.
// Writes { requests: [{ method, contentType, accept, body }], runs: [{ outcome, ... }] } and
// exits 1 if any run failed in the client.
import fs from "node:fs";
import http from "node:http";
import { HttpAgent, buildResumeArray } from "@ag-ui/client";

const out = process.argv[2];
if (!out) {
  console.error("usage: node drive-http-agent.mjs <out.json>");
  process.exit(2);
}

const warnings = [];
console.warn = (...args) => warnings.push(args.map(String).join(" "));

// ------------------------------------------------------------------ the agent's replies
const replies = [
  (input) => [
    { type: "RUN_STARTED", threadId: input.threadId, runId: input.runId, protocolVersion: "1.0" },
    { type: "REASONING_START", messageId: "rs-1" },
    { type: "REASONING_MESSAGE_START", messageId: "rm-1", role: "reasoning" },
    { type: "REASONING_MESSAGE_CONTENT", messageId: "rm-1", delta: "The user wants the weather." },
    { type: "REASONING_MESSAGE_END", messageId: "rm-1" },
    { type: "REASONING_END", messageId: "rs-1" },
    { type: "TEXT_MESSAGE_START", messageId: "a-1", role: "assistant" },
    { type: "TEXT_MESSAGE_CONTENT", messageId: "a-1", delta: "Let me check the weather." },
    { type: "TEXT_MESSAGE_END", messageId: "a-1" },
    { type: "TOOL_CALL_START", toolCallId: "tc-1", toolCallName: "get_weather", parentMessageId: "a-1" },
    { type: "TOOL_CALL_ARGS", toolCallId: "tc-1", delta: '{"city":' },
    { type: "TOOL_CALL_ARGS", toolCallId: "tc-1", delta: '"Paris"}' },
    { type: "TOOL_CALL_END", toolCallId: "tc-1" },
    { type: "STATE_SNAPSHOT", snapshot: { count: 1 } },
    { type: "RUN_FINISHED", threadId: input.threadId, runId: input.runId, outcome: { type: "success", pendingToolCallIds: ["tc-1"] } },
  ],
  (input) => [
    { type: "RUN_STARTED", threadId: input.threadId, runId: input.runId, protocolVersion: "1.0" },
    { type: "TEXT_MESSAGE_START", messageId: "a-2", role: "assistant" },
    { type: "TEXT_MESSAGE_CONTENT", messageId: "a-2", delta: "It is 21°C in Paris. Shall I book a table?" },
    { type: "TEXT_MESSAGE_END", messageId: "a-2" },
    {
      type: "RUN_FINISHED",
      threadId: input.threadId,
      runId: input.runId,
      outcome: {
        type: "interrupt",
        interrupts: [
          {
            id: "int-1",
            reason: "confirmation",
            message: "Book a table for two?",
            responseSchema: { type: "object", properties: { approved: { type: "boolean" } }, required: ["approved"] },
          },
        ],
      },
    },
  ],
  (input) => [
    { type: "RUN_STARTED", threadId: input.threadId, runId: input.runId, protocolVersion: "1.0" },
    { type: "TEXT_MESSAGE_START", messageId: "a-3", role: "assistant" },
    { type: "TEXT_MESSAGE_CONTENT", messageId: "a-3", delta: "Booked for 8pm." },
    { type: "TEXT_MESSAGE_END", messageId: "a-3" },
    { type: "RUN_FINISHED", threadId: input.threadId, runId: input.runId, result: { booking: "B-1" } },
  ],
  (input) => [
    { type: "RUN_STARTED", threadId: input.threadId, runId: input.runId, protocolVersion: "1.0" },
    { type: "TEXT_MESSAGE_CHUNK", messageId: "a-4", delta: "You're welcome!" },
    { type: "RUN_FINISHED", threadId: input.threadId, runId: input.runId },
  ],
];

// ---------------------------------------------------------------------- the tiny server
const requests = [];
const server = http.createServer(async (req, res) => {
  let raw = "";
  for await (const chunk of req) raw += chunk;
  requests.push({
    method: req.method,
    contentType: req.headers["content-type"],
    accept: req.headers.accept,
    body: raw,
  });
  const reply = replies[requests.length - 1];
  if (!reply) {
    res.writeHead(500).end("unexpected request");
    return;
  }
  res.writeHead(200, { "Content-Type": "text/event-stream", "Cache-Control": "no-cache" });
  for (const event of reply(JSON.parse(raw))) res.write(`data: ${JSON.stringify(event)}\n\n`);
  res.end();
});
await new Promise((resolve) => server.listen(0, "127.0.0.1", resolve));
const url = `http://127.0.0.1:${server.address().port}/agent`;

// ---------------------------------------------------------------------- the conversation
const agent = new HttpAgent({
  url,
  threadId: "thread-conformance",
  initialState: { count: 0 },
  initialMessages: [
    {
      id: "user-1",
      role: "user",
      content: [
        { type: "text", text: "What's the weather where this photo was taken?" },
        { type: "image", source: { type: "data", value: "iVBORw0KGgo=", mimeType: "image/png" } },
        { type: "document", source: { type: "url", value: "https://example.com/itinerary.pdf", mimeType: "application/pdf" } },
        { type: "audio", source: { type: "file", value: "files/voice-note-1", provider: "google" } },
      ],
    },
  ],
});

const tools = [
  {
    name: "get_weather",
    description: "Current weather for a city",
    parameters: { type: "object", properties: { city: { type: "string" } }, required: ["city"] },
  },
  { name: "ping", description: "No arguments" },
];
const context = [{ description: "locale", value: "en-GB" }];

const runs = [];
async function run(parameters) {
  const record = {};
  try {
    await agent.runAgent(parameters, {
      onRunFinishedEvent: (p) => {
        record.outcome = p.outcome;
        record.pendingToolCallIds = p.pendingToolCallIds;
        record.interrupts = p.interrupts;
        record.result = p.result;
      },
      onRunFailed: ({ error }) => {
        record.failure = String(error?.message ?? error);
      },
    });
  } catch (error) {
    record.failure = record.failure ?? String(error?.message ?? error);
  }
  runs.push(record);
  return record;
}

const first = await run({ tools, context, forwardedProps: { tenant: "acme" } });
for (const id of first.pendingToolCallIds ?? []) {
  agent.messages.push({
    id: `tool-${id}`,
    role: "tool",
    toolCallId: id,
    content: [{ type: "text", text: '{"tempC":21}' }],
  });
}
await run({ tools, context });
const resume = buildResumeArray(agent.pendingInterrupts, {
  "int-1": { status: "resolved", payload: { approved: true } },
});
await run({ tools, context, resume });
agent.messages.push({
  id: "user-2",
  role: "user",
  content: [
    { type: "text", text: "Thanks! Is this the place?" },
    { type: "image", source: { type: "url", value: "https://example.com/place.jpg" } },
  ],
});
await run({});

server.close();
const agentWarnings = warnings.filter((w) => w.includes("[ag-ui]"));
fs.writeFileSync(out, JSON.stringify({ requests, runs, warnings: agentWarnings }, null, 2));
const failed = runs.filter((r) => r.failure);
for (const r of failed) console.error(`run failed in the client: ${r.failure}`);
process.exitCode = failed.length || agentWarnings.length ? 1 : 0;
