// Builds the example without a dev server: type-checks it (`tsc --noEmit`, page and server), then
// bundles the page (React in production mode, minified, with CopilotKit's styles) into
// dist/public/ and the runtime server into dist/server.mjs (its packages stay in node_modules).
//
//   node build.mjs
import { execFileSync } from "node:child_process";
import fs from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import * as esbuild from "esbuild";

const here = path.dirname(fileURLToPath(import.meta.url));
const dist = path.join(here, "dist");

try {
  execFileSync(process.execPath, [path.join(here, "node_modules/typescript/bin/tsc"), "--noEmit", "-p", here], { stdio: "inherit" });
} catch {
  console.error("build.mjs: the example does not type-check (errors above)");
  process.exit(1);
}

fs.rmSync(dist, { recursive: true, force: true });
const common = { bundle: true, minify: true, sourcemap: false, legalComments: "none", logLevel: "warning", absWorkingDir: here };
await esbuild.build({
  ...common,
  entryPoints: { page: "src/page.tsx" },
  outdir: path.join(dist, "public"),
  // What CopilotKit's Markdown renderer imports on demand (syntax highlighting for each
  // language, diagrams, maths) goes into chunks the page loads only when a reply needs them.
  splitting: true,
  chunkNames: "chunks/[name]-[hash]",
  assetNames: "assets/[name]-[hash]",
  format: "esm",
  platform: "browser",
  target: ["es2022", "chrome110", "firefox115", "safari16"],
  jsx: "automatic",
  define: { "process.env.NODE_ENV": '"production"' },
  loader: { ".woff": "file", ".woff2": "file", ".ttf": "file", ".svg": "file", ".png": "file" },
});
fs.copyFileSync(path.join(here, "src/index.html"), path.join(dist, "public/index.html"));
await esbuild.build({
  ...common,
  minify: false,
  entryPoints: { server: "src/server.ts" },
  outdir: dist,
  outExtension: { ".js": ".mjs" },
  format: "esm",
  platform: "node",
  target: "node20",
  packages: "external",
});
const size = (name) => fs.statSync(path.join(dist, "public", name)).size;
const all = fs.readdirSync(path.join(dist, "public"), { recursive: true }).filter((name) => fs.statSync(path.join(dist, "public", name)).isFile());
for (const name of ["index.html", "page.js", "page.css"]) console.log(`example build: public/${name}  ${size(name)} bytes`);
console.log(`example build: ${all.length} files, ${all.reduce((sum, name) => sum + size(name), 0)} bytes in all (chunks and fonts load on demand)`);
