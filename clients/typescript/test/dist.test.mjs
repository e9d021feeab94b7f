// The committed dist/ (what installs from the repository path or `npm pack` get) is what
// build.mjs makes of the current sources.
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { test } from "node:test";

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");

const files = (dir) => Object.fromEntries(fs.readdirSync(dir).sort().map((name) => [name, fs.readFileSync(path.join(dir, name), "utf8")]));

test("dist/ is the build of the current sources", () => {
  const out = fs.mkdtempSync(path.join(os.tmpdir(), "client-dist-"));
  try {
    execFileSync(process.execPath, [path.join(root, "build.mjs"), out], { cwd: root, stdio: "pipe" });
    const fresh = files(out);
    const committed = files(path.join(root, "dist"));
    const stale = Object.keys({ ...fresh, ...committed }).filter((name) => fresh[name] !== committed[name]);
    assert.deepEqual(stale, [], "dist/ is stale: run `node clients/typescript/build.mjs` and commit dist/");
  } finally {
    fs.rmSync(out, { recursive: true, force: true });
  }
});
