// The agent's tests (and its edit, regenerate and branch tests) again, with every import of
// @ag-ui/client resolved to the 1.x line: the package supports both it and the 0.0.59
// CopilotKit pins.
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { once } from "node:events";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { test } from "node:test";

const here = path.dirname(fileURLToPath(import.meta.url));

test("the agent's tests pass with @ag-ui/client 1.0", async () => {
  const child = spawn(
    process.execPath,
    ["--import", path.join(here, "lib/ag-ui-client-1.mjs"), "--test", "--test-reporter=spec", path.join(here, "agent.test.mjs"), path.join(here, "forks.test.mjs")],
    // Without the parent's test-runner context, which would make the child skip its files.
    { stdio: ["ignore", "pipe", "pipe"], env: { ...process.env, NODE_TEST_CONTEXT: undefined } },
  );
  let output = "";
  child.stdout.on("data", (chunk) => (output += chunk));
  child.stderr.on("data", (chunk) => (output += chunk));
  const [code] = await once(child, "exit");
  assert.match(output, /AntigravityAgent with @ag-ui\/client 1\.0\.0/, "the tests ran with the 1.x client");
  assert.match(output, /✔ edit, regenerate and branches/, "the edit and branch tests ran and passed");
  assert.equal(code, 0, `the agent's tests failed with @ag-ui/client 1.0:\n${output.slice(-6000)}`);
});
