// Two agents on one server, mounted by a TOML config at different paths with different
// settings: each path runs its own agent (its own model, tools and capabilities), and the same
// thread id on both stays two separate conversations.
import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { after, before, describe, test } from "node:test";
import { E2EAgent, outcome, run, text } from "./lib/client.mjs";
import { checkCapabilities } from "./lib/capabilities.mjs";
import { GEMINI, modelFlags } from "./lib/mode.mjs";
import fs from "node:fs";
import { startModel, startServer, stopAll, tempDir } from "./lib/procs.mjs";

// Scripted: each agent has its own model name, and the model answers by name. With Gemini both
// use the test model and tell themselves apart by their system instructions.
const AGENTS = {
  alpha: { path: "/alpha", model: "model-alpha", tools: ["list_dir"], frontendTools: true },
  beta: { path: "/team/beta", model: "model-beta", tools: [], frontendTools: false },
};

function tomlConfig() {
  return Object.entries(AGENTS)
    .map(([name, a]) => {
      const lines = [
        "[[agents]]",
        `path = "${a.path}"`,
        `name = "${name}"`,
        `builtin_tools = ${JSON.stringify(a.tools.length ? a.tools : ["none"])}`,
        `frontend_tools = ${a.frontendTools}`,
      ];
      if (GEMINI) lines.push(`system_instructions = "Your name is ${name}. When asked for your name, answer with exactly that one word."`);
      else lines.push(`model = "${a.model}"`);
      return lines.join("\n");
    })
    .join("\n\n");
}

const SCRIPT = {
  replies: Object.entries(AGENTS).map(([name, a]) => ({ match: { model: a.model }, repeat: "forever", reply: { text: `I am ${name}.` } })),
};

let model;
let server;
const url = (name) => `${server.url}${AGENTS[name].path}`;

describe("two agents on one server", () => {
  before(async () => {
    if (!GEMINI) model = await startModel(SCRIPT);
    const { args, env } = modelFlags(model);
    server = await startServer({ label: "two-agent server", config: tomlConfig(), args, env });
  });

  after(async () => {
    const [stopped] = await stopAll(server, model);
    if (stopped) assert.ok(stopped.harnesses.length > 0, "the leak check saw the server's harness processes");
  });

  test("each path runs its own agent; one thread id on both stays two conversations", async () => {
    const threadId = `e2e-shared-${randomUUID()}`;
    const said = { alpha: [], beta: [] };
    for (const round of [1, 2]) {
      for (const name of ["alpha", "beta"]) {
        const a = new E2EAgent({ url: url(name), threadId });
        const prompt = `Round ${round}: what is your name? (${randomUUID()})`;
        said[name].push(prompt);
        a.say(prompt);
        const rec = await run(a, {}, { log: server.log });
        assert.equal(outcome(rec), "success");
        assert.match(text(rec), new RegExp(name, "i"), `${AGENTS[name].path} answered as ${name}`);
      }
    }
    if (!GEMINI) {
      // Each agent's model saw only its own side of the shared thread id.
      for (const [name, a] of Object.entries(AGENTS)) {
        const bodies = (await model.requests()).filter((r) => r.model === a.model).map((r) => JSON.stringify(r.body));
        const other = name === "alpha" ? "beta" : "alpha";
        assert.ok(bodies.length >= 2, `${name} was asked`);
        assert.ok(bodies.at(-1).includes(said[name][0].split(" (")[1].slice(0, -1)), `${name} remembers its first round`);
        for (const prompt of said[other]) assert.ok(!bodies.some((b) => b.includes(prompt.split(" (")[1].slice(0, -1))), `${name} never saw ${other}'s messages`);
      }
    }
  });

  test("after a restart, one agent never sees another's conversation on the same thread id", async () => {
    // Both agents inherit one --save-dir; each must keep its conversations in its own subfolder,
    // or the second agent resumes the first one's conversation from disk.
    const dir = tempDir("e2e-restart");
    const threadId = `e2e-restart-${randomUUID()}`;
    const { args, env } = modelFlags(model);
    const say = async (srv, name, prompt) => {
      const a = new E2EAgent({ url: `${srv.url}${AGENTS[name].path}`, threadId });
      a.say(prompt);
      const rec = await run(a, {}, { log: srv.log });
      assert.equal(outcome(rec), "success");
    };
    const secret = `alpha-secret-${randomUUID()}`;
    const beta = `beta-question-${randomUUID()}`;
    const restarted = async (label) => startServer({ label, config: tomlConfig(), args, env, dir });
    try {
      let srv = await restarted("two-agent server (first life)");
      try {
        await say(srv, "alpha", `Remember ${secret}.`);
      } finally {
        await srv.stop();
      }
      srv = await restarted("two-agent server (second life)");
      try {
        await say(srv, "beta", `What is your name? ${beta}`);
        await say(srv, "alpha", "What did I ask you to remember?");
      } finally {
        await srv.stop();
      }
      if (!GEMINI) {
        const bodies = (name) =>
          model.requests().then((all) => all.filter((r) => r.model === AGENTS[name].model).map((r) => JSON.stringify(r.body)));
        const betaSaw = (await bodies("beta")).filter((b) => b.includes(beta));
        assert.ok(betaSaw.length > 0, "beta was asked");
        assert.ok(!betaSaw.some((b) => b.includes(secret)), "beta never saw alpha's conversation");
        assert.ok((await bodies("alpha")).at(-1).includes(secret), "alpha resumed its own conversation after the restart");
      }
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });

  test("capabilities per agent, and nothing mounted at /", async () => {
    for (const [name, a] of Object.entries(AGENTS)) {
      const caps = await checkCapabilities(`${url(name)}/capabilities`);
      assert.equal(caps.identity?.name, name);
      assert.deepEqual(caps.custom?.builtinTools, a.tools);
      assert.equal(caps.tools?.clientProvided, a.frontendTools);
      if (!GEMINI) assert.equal(caps.custom?.model, a.model);
    }
    assert.equal((await fetch(`${server.url}/capabilities`)).status, 404);
    const root = await fetch(`${server.url}/`, { method: "POST", headers: { "Content-Type": "application/json" }, body: "{}" });
    assert.equal(root.status, 404);
  });
});
