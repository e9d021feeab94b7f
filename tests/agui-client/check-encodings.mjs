#!/usr/bin/env node
// Checks agui-types' output with the official AG-UI 1.0 TypeScript packages.
//
//   node check-encodings.mjs <dir>
//
// <dir> is written by crates/agui-types/tests/official_client.rs:
//   events.json        every event, as our serializer writes it (a JSON array)
//   events.sse         the same events, SSE-encoded by us (one stream)
//   events.bin         the same events, protobuf-encoded by us (length-prefixed frames)
//   runs.json          [{ name, sse, bin }] whole runs (file names in <dir>) for the full pipeline
//   inputs.json        RunAgentInput documents as we serialize them
//   capabilities.json  AgentCapabilities documents as we serialize them
// Writes <dir>/official-frames.json (base64 of @ag-ui/proto encode() of each event) and prints
// a JSON report { checked, errors } on stdout; exit code 1 when errors is not empty.
import fs from "node:fs";
import path from "node:path";
import { isDeepStrictEqual } from "node:util";
import { Subject, Observable } from "rxjs";
import { map } from "rxjs/operators";
import {
  CompatibilityBoundary,
  enforceEvents,
  transformChunks,
  transformHttpEventStream,
  verifyEvents,
} from "@ag-ui/client";
import {
  AgentCapabilitiesSchema,
  EventSchema,
  RunAgentInputSchema,
} from "@ag-ui/core/schemas";
import * as proto from "@ag-ui/proto";

const dir = process.argv[2];
if (!dir) {
  console.error("usage: node check-encodings.mjs <dir>");
  process.exit(2);
}
const read = (name) => fs.readFileSync(path.join(dir, name));
const readJson = (name) => JSON.parse(read(name).toString("utf8"));

const errors = [];
const checked = {};
const fail = (where, message) => errors.push({ where, message });
const issues = (zodError) =>
  (zodError?.issues ?? []).map((i) => `${(i.path ?? []).join(".") || "(root)"}: ${i.message}`).join("; ");

// The client reports tolerated deviations (stripped fields, dropped events, compat shims)
// only through console.warn; any of them means our output is not clean 1.0.
const warnings = [];
console.warn = (...args) => warnings.push(args.map(String).join(" "));
const takeWarnings = (where) => {
  for (const w of warnings.splice(0)) fail(where, `client warning: ${w}`);
};

// JSON round trip drops undefined-valued keys the way a wire hop does.
const norm = (value) => JSON.parse(JSON.stringify(value));

// ------------------------------------------------------------------ schema of each event
const events = readJson("events.json");
checked.events = events.length;
const SHAPES = new Map(
  EventSchema.options.map((option) => {
    const literal = option.shape.type;
    const value = Array.isArray(literal?.def?.values) ? literal.def.values[0] : literal?.value;
    return [String(value), option];
  }),
);
events.forEach((event, i) => {
  const where = `events[${i}] ${event.type}`;
  const parsed = EventSchema.safeParse(event);
  if (!parsed.success) fail(where, `schema: ${issues(parsed.error)}`);
  const shape = SHAPES.get(event.type)?.shape;
  if (!shape) fail(where, "unknown event type");
  else for (const key of Object.keys(event)) if (!(key in shape)) fail(where, `unknown field '${key}'`);
});

// ------------------------------------------------- transport parsing, as HttpAgent does it
/** Events the client's HTTP transport decodes from `bytes` served with `contentType`. */
function decodeWithClient(bytes, contentType) {
  return new Promise((resolve) => {
    // Asynchronous like a real response body: the transport subscribes to its source before
    // the caller subscribes to its (hot) output.
    const http = new Observable((subscriber) => {
      setTimeout(() => {
        subscriber.next({ type: "headers", status: 200, headers: new Headers({ "content-type": contentType }) });
        // Odd-sized pieces make the parsers reassemble frames across reads.
        for (let at = 0; at < bytes.length; at += 97) {
          subscriber.next({ type: "data", data: new Uint8Array(bytes.subarray(at, at + 97)) });
        }
        subscriber.complete();
      }, 0);
    });
    const out = [];
    transformHttpEventStream(http).subscribe({
      next: (event) => out.push(norm(event)),
      error: (error) => resolve({ events: out, error: String(error?.message ?? error) }),
      complete: () => resolve({ events: out }),
    });
  });
}

// The official protobuf decoder materialises an empty `resume` list in RUN_STARTED.input,
// which our serializer omits; both mean "no resume entries".
const withoutEmptyResume = (event) => {
  const copy = norm(event);
  if (copy.type === "RUN_STARTED" && Array.isArray(copy.input?.resume) && copy.input.resume.length === 0) {
    delete copy.input.resume;
  }
  return copy;
};

async function checkTransport(file, contentType, label, expected) {
  const { events: decoded, error } = await decodeWithClient(read(file), contentType);
  if (error) fail(label, `client transport failed: ${error}`);
  if (decoded.length !== expected.length) {
    fail(label, `client decoded ${decoded.length} events, expected ${expected.length}`);
  }
  decoded.forEach((event, i) => {
    if (!isDeepStrictEqual(withoutEmptyResume(event), withoutEmptyResume(expected[i]))) {
      fail(`${label}[${i}] ${expected[i]?.type}`, `decoded ${JSON.stringify(event)}\n   expected ${JSON.stringify(expected[i])}`);
    }
  });
  takeWarnings(label);
  return decoded;
}

await checkTransport("events.sse", "text/event-stream", "sse", events);
await checkTransport("events.bin", proto.AGUI_MEDIA_TYPE, "protobuf", events);

// ------------------------------------------- our protobuf frames vs the official encoder
const ours = [];
const bin = read("events.bin");
for (let at = 0; at + 4 <= bin.length; ) {
  const len = bin.readUInt32BE(at);
  ours.push(bin.subarray(at + 4, at + 4 + len));
  at += 4 + len;
}
const official = [];
events.forEach((event, i) => {
  const where = `frame[${i}] ${event.type}`;
  let encoded;
  try {
    encoded = proto.encode(event);
  } catch (error) {
    fail(where, `official encode failed: ${error.message}`);
    return;
  }
  official.push(Buffer.from(encoded).toString("base64"));
  try {
    const mine = norm(proto.decode(new Uint8Array(ours[i])));
    const theirs = norm(proto.decode(encoded));
    if (!isDeepStrictEqual(mine, theirs)) {
      fail(where, `our frame decodes to ${JSON.stringify(mine)}\n   official frame decodes to ${JSON.stringify(theirs)}`);
    }
  } catch (error) {
    fail(where, `official decode of our frame failed: ${error.message}`);
  }
});
takeWarnings("official encoder");
fs.writeFileSync(path.join(dir, "official-frames.json"), JSON.stringify(official));
checked.frames = ours.length;

// ---------------------------------------------- whole runs through the client pipeline
/** The client's inbound stages after transport: compatibility, schema, chunks, ordering. */
function runPipeline(decoded) {
  const boundary = new CompatibilityBoundary();
  const subject = new Subject();
  let failure;
  let delivered = 0;
  subject
    .pipe(
      map((event) => boundary["transformEvent"](event)),
      enforceEvents(),
      transformChunks(),
      verifyEvents(),
    )
    .subscribe({ next: () => delivered++, error: (error) => (failure = error) });
  for (let i = 0; i < decoded.length && !failure; i++) {
    try {
      subject.next(decoded[i]);
    } catch (error) {
      failure = error;
    }
    if (failure) failure = `at event ${i} (${decoded[i].type}): ${failure.message ?? failure}`;
  }
  if (!failure) subject.complete();
  return { failure, delivered };
}

const runs = [
  { name: "all sample events", sse: "events.sse", bin: "events.bin", events: events.length },
  ...readJson("runs.json"),
];
for (const run of runs) {
  for (const [file, contentType] of [[run.sse, "text/event-stream"], [run.bin, proto.AGUI_MEDIA_TYPE]]) {
    const label = `run '${run.name}' (${file})`;
    const { events: decoded, error } = await decodeWithClient(read(file), contentType);
    if (error) fail(label, `client transport failed: ${error}`);
    if (decoded.length !== run.events) fail(label, `client decoded ${decoded.length} events, expected ${run.events}`);
    const { failure, delivered } = runPipeline(decoded);
    if (failure) fail(label, `client pipeline rejected the run ${failure}`);
    // Chunk expansion only adds events; fewer means some were dropped.
    else if (delivered < decoded.length) fail(label, `pipeline delivered ${delivered} of ${decoded.length} events`);
    takeWarnings(label);
  }
}
checked.runs = runs.length;

// ------------------------------------------------------------ inputs and capabilities
for (const [file, schema, what] of [
  ["inputs.json", RunAgentInputSchema, "RunAgentInput"],
  ["capabilities.json", AgentCapabilitiesSchema, "AgentCapabilities"],
]) {
  const documents = readJson(file);
  checked[what] = documents.length;
  documents.forEach((document, i) => {
    const parsed = schema.safeParse(document);
    if (!parsed.success) fail(`${what}[${i}]`, `schema: ${issues(parsed.error)}`);
    // zod's looseObject keeps unknown keys; compare to find any the schema does not describe.
    else if (what === "AgentCapabilities") {
      for (const [category, value] of Object.entries(document)) {
        const known = schema.shape[category];
        if (!known) fail(`${what}[${i}]`, `unknown category '${category}'`);
        const inner = known?.unwrap?.()?.shape;
        if (inner && value && typeof value === "object") {
          for (const key of Object.keys(value)) if (!(key in inner)) fail(`${what}[${i}]`, `unknown field '${category}.${key}'`);
        }
      }
    }
  });
}

process.stdout.write(`${JSON.stringify({ checked, errors }, null, 2)}\n`);
process.exitCode = errors.length ? 1 : 0;
