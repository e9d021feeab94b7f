// The scripted model's replies and the two agents the scripted browser tests talk to. Each test
// keys the script with a tag in its prompt (`pg-…`), so tests stay independent.
import { after, before } from "node:test";
import zlib from "node:zlib";
import { modelFlags } from "../../e2e/lib/mode.mjs";
import { startModel, startServer, stopAll } from "../../e2e/lib/procs.mjs";

/** A 64×48 PNG (a colour gradient), which the agent writes on `pg-image` as `img/dot.png`. */
export const PNG = gradientPng(64, 48);

/** The text the upload test gives the agent (`pg-cat-upload` reads it back). */
export const UPLOADED = "uploaded through the Files panel\n";

/**
 * `/` asks questions and runs commands; `/guarded` asks before every tool call; `/coder`
 * delegates to subagents, writes files and runs commands.
 */
export const TOML = `
[[agents]]
path = "/"
name = "main"
builtin_tools = ["list_dir", "ask_question", "run_command"]
behavior = "interactive"

[[agents]]
path = "/guarded"
name = "guarded"
builtin_tools = ["list_dir"]
tool_approval = true

[[agents]]
path = "/coder"
name = "coder"
builtin_tools = ["invoke_subagent", "write_to_file", "run_command"]
`;

export const SCRIPT = {
  replies: [
    // Tool results first: a tool result request still carries the prompt's tag.
    {
      name: "question answered",
      repeat: "forever",
      match: { function_response: "ask_question" },
      reply: { text: "Noted: {{tool_output}}" },
    },
    {
      name: "question",
      repeat: "forever",
      match: { user_text_contains: "pg-ask", last_part: "text" },
      reply: {
        thought: "I should ask which colour they like.",
        text: "Let me ask you first.",
        calls: [{ name: "ask_question", args: { questions: [{ question: "Which color?", options: ["Red", "Green", "Blue"], is_multi_select: false }] } }],
      },
    },
    {
      name: "listing",
      repeat: "forever",
      match: { function_response: "list_dir" },
      reply: { text: "Listed: {{tool_output}}" },
    },
    {
      name: "list for approval",
      repeat: "forever",
      match: { user_text_contains: "pg-approve", last_part: "text" },
      reply: { text: "I'll list that folder.", calls: [{ name: "list_dir", args: { DirectoryPath: "{{workspace}}" } }] },
    },
    {
      name: "command output",
      repeat: "forever",
      match: { function_response: "run_command" },
      reply: { text: "The command finished: {{tool_output}}" },
    },
    {
      name: "long command",
      repeat: "forever",
      match: { user_text_contains: "pg-long", last_part: "text" },
      reply: {
        text: "Running a long command.",
        calls: [{ name: "run_command", args: { CommandLine: "sleep 30 && echo done", Cwd: "{{workspace}}", WaitMsBeforeAsync: 60000 } }],
      },
    },
    // Subagents: the root delegates, the subagent answers, the root reports. A subagent that
    // finishes before the root's next request has its idle message in the invocation's result
    // (the harness appends it to the output), and the root then answers only once.
    {
      name: "root after invoke, the subagent done",
      repeat: "forever",
      match: { function_response: "invoke_subagent", contains: "has gone idle" },
      reply: { text: "The subagent says hi." },
    },
    {
      name: "root after invoke",
      repeat: "forever",
      match: { function_response: "invoke_subagent" },
      reply: { text: "A subagent is on it." },
    },
    {
      name: "root after subagent",
      repeat: "forever",
      match: { last_part: "text", system_message: true, user_text_contains: "has gone idle" },
      reply: { text: "The subagent says hi." },
    },
    {
      name: "subagent",
      repeat: "forever",
      match: { last_part: "text", system_message: true, user_text_contains: "PG-SUBTASK" },
      reply: { thought: "sub thinking", text: "subagent result text" },
    },
    {
      name: "delegate",
      repeat: "forever",
      match: { user_text_contains: "pg-delegate", last_part: "text", system_message: false },
      reply: { calls: [{ name: "invoke_subagent", args: { Subagents: [{ TypeName: "research", Role: "Helper", Prompt: "PG-SUBTASK say hi" }] } }] },
    },
    // Coding progress: a file written, then a command run in the workspace.
    {
      name: "after the file",
      repeat: "forever",
      match: { function_response: "write_to_file" },
      reply: { calls: [{ name: "run_command", args: { CommandLine: "cat notes.md", Cwd: "{{workspace}}", WaitMsBeforeAsync: 5000 } }] },
    },
    {
      name: "write a file",
      repeat: "forever",
      match: { user_text_contains: "pg-code", last_part: "text" },
      reply: {
        text: "Writing the notes.",
        calls: [{ name: "write_to_file", args: { TargetFile: "{{workspace}}/notes.md", CodeContent: "# Notes\n- playground\n" }, fill_required: true }],
      },
    },
    // Files: an image written by a command; an uploaded file read back by one.
    {
      name: "write an image",
      repeat: "forever",
      match: { user_text_contains: "pg-image", last_part: "text" },
      reply: {
        text: "Drawing a picture.",
        calls: [
          {
            name: "run_command",
            args: { CommandLine: `mkdir -p img && echo ${PNG.toString("base64")} | base64 -d > img/dot.png && ls img`, Cwd: "{{workspace}}", WaitMsBeforeAsync: 5000 },
          },
        ],
      },
    },
    {
      name: "read the upload",
      repeat: "forever",
      match: { user_text_contains: "pg-cat-upload", last_part: "text" },
      reply: { calls: [{ name: "run_command", args: { CommandLine: "cat upload-me.txt", Cwd: "{{workspace}}", WaitMsBeforeAsync: 5000 } }] },
    },
    {
      name: "text",
      repeat: "forever",
      match: { user_text_contains: "pg-text" },
      reply: { thought: "A short answer will do.", text: "Here is a **scripted** answer for {{user_text}}.", chunking: { words: 2 }, delay_ms: 20 },
    },
    {
      name: "bad request",
      repeat: "forever",
      match: { user_text_contains: "pg-error" },
      reply: { error: { code: 400, message: "Request contains an invalid argument." } },
    },
  ],
  default: { text: "No scripted answer." },
};

/** The workspace of a thread under a server's data folder (see the e2e suite's helper). */
export { workspaceOf } from "../../e2e/lib/workspace.mjs";

/**
 * The scripted model and a server with the agents of TOML for the calling suite; returns its URL
 * getter, whose `dir()` gives the server's data directory.
 */
export function useScriptedServer() {
  let model;
  let server;
  before(async () => {
    model = await startModel(SCRIPT);
    const { args, env } = modelFlags(model);
    server = await startServer({ label: "scripted server", config: TOML, args, env });
  });
  after(async () => {
    await stopAll(server, model);
  });
  const url = () => server.url;
  url.dir = () => server.dir;
  return url;
}

/** A `width`×`height` RGB PNG of a gradient (deterministic bytes). */
function gradientPng(width, height) {
  // Each row with PNG's "Sub" filter (1): a byte minus the one of the pixel on its left, which
  // keeps the image small enough for a command line.
  const raw = Buffer.alloc((width * 3 + 1) * height);
  for (let y = 0; y < height; y++) {
    const row = y * (width * 3 + 1);
    raw[row] = 1;
    let left = [0, 0, 0];
    for (let x = 0; x < width; x++) {
      const pixel = [x * 4, 90, y * 5];
      for (let c = 0; c < 3; c++) raw[row + 1 + x * 3 + c] = (pixel[c] - left[c]) & 0xff;
      left = pixel;
    }
  }
  const chunk = (type, data) => {
    const body = Buffer.concat([Buffer.from(type, "ascii"), data]);
    const length = Buffer.alloc(4);
    length.writeUInt32BE(data.length);
    const crc = Buffer.alloc(4);
    crc.writeUInt32BE(crc32(body));
    return Buffer.concat([length, body, crc]);
  };
  const header = Buffer.alloc(13);
  header.writeUInt32BE(width, 0);
  header.writeUInt32BE(height, 4);
  header.set([8, 2, 0, 0, 0], 8);
  return Buffer.concat([
    Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]),
    chunk("IHDR", header),
    chunk("IDAT", zlib.deflateSync(raw, { level: 9 })),
    chunk("IEND", Buffer.alloc(0)),
  ]);
}

function crc32(bytes) {
  let crc = 0xffffffff;
  for (const byte of bytes) {
    crc ^= byte;
    for (let k = 0; k < 8; k++) crc = crc & 1 ? (crc >>> 1) ^ 0xedb88320 : crc >>> 1;
  }
  return (crc ^ 0xffffffff) >>> 0;
}
