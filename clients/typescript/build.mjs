// Builds the package into an output folder (default: dist/): type-checks the sources against both
// @ag-ui/client lines it supports (0.0.59, the one CopilotKit pins, and 1.x), then compiles them
// with the pinned TypeScript into ES modules and declarations. Deterministic (no source maps), so
// the test suite can compare a fresh build with the committed dist/, which installs from the
// repository path or `npm pack` need.
//
//   node build.mjs [OUTDIR]
import { execFileSync } from "node:child_process";
import fs from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";

const here = path.dirname(fileURLToPath(import.meta.url));
const outdir = path.resolve(process.argv[2] ?? path.join(here, "dist"));
const tsc = path.join(here, "node_modules/typescript/bin/tsc");

function run(args, what) {
  try {
    execFileSync(process.execPath, [tsc, ...args], { cwd: here, stdio: "inherit" });
  } catch {
    console.error(`build.mjs: ${what} failed (errors above)`);
    process.exit(1);
  }
}

run(["-p", "tsconfig.ag-ui-1.json"], "type-checking against @ag-ui/client 1.x");
fs.rmSync(outdir, { recursive: true, force: true });
run(["-p", "tsconfig.json", "--outDir", outdir], "compiling against @ag-ui/client 0.0.59");
for (const name of fs.readdirSync(outdir).sort()) {
  console.log(`client build: ${name}  ${fs.statSync(path.join(outdir, name)).size} bytes`);
}
