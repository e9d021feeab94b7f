// The scripted model's replies and the two agents the scripted browser tests talk to. Each test
// keys the script with a tag in its prompt (`pg-…`), so tests stay independent.
import { after, before } from "node:test";
import { modelFlags } from "../../e2e/lib/mode.mjs";
import { startModel, startServer, stopAll } from "../../e2e/lib/procs.mjs";


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
