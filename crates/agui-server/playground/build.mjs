// Builds the playground into an output folder (default: dist/): type-checks the sources, then
// bundles src/main.ts with its dependencies into one ES module and minifies src/style.css with
// esbuild; copies src/index.html. Deterministic (no source maps, no timestamps), so
// `cargo xtask playground --check` can compare a fresh build with the committed dist/.
//
//   node build.mjs [OUTDIR]
import { execFileSync } from "node:child_process";
import fs from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import * as esbuild from "esbuild";

const here = path.dirname(fileURLToPath(import.meta.url));
const outdir = path.resolve(process.argv[2] ?? path.join(here, "dist"));

try {
  execFileSync(process.execPath, [path.join(here, "node_modules/typescript/bin/tsc"), "--noEmit", "-p", here], { stdio: "inherit" });
} catch {
  console.error("build.mjs: the playground's TypeScript does not type-check (errors above)");
  process.exit(1);
}

const common = {
  bundle: true,
  minify: true,
  sourcemap: false,
  charset: "utf8",
  legalComments: "eof",
  logLevel: "warning",
  absWorkingDir: here,
};
await esbuild.build({
  ...common,
  entryPoints: { playground: "src/main.ts" },
  outdir,
  format: "esm",
  platform: "browser",
  target: ["es2022", "chrome110", "firefox115", "safari16"],
  define: { "process.env.NODE_ENV": '"production"' },
});
await esbuild.build({ ...common, entryPoints: { playground: "src/style.css" }, outdir });
fs.copyFileSync(path.join(here, "src/index.html"), path.join(outdir, "index.html"));
for (const name of fs.readdirSync(outdir).sort()) {
  console.log(`playground build: ${name}  ${fs.statSync(path.join(outdir, name)).size} bytes`);
}
