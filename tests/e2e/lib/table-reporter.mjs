// A node:test reporter for `cargo xtask live-gate`: one JSON line per scenario (every test, plus
// any suite whose setup or teardown failed), which the gate turns into its pass/fail table.
//
//   node --test --test-reporter=spec --test-reporter-destination=stdout \
//        --test-reporter=./lib/table-reporter.mjs --test-reporter-destination=rows.jsonl …
import path from "node:path";
import { MODE } from "./mode.mjs";

// Files whose scenarios do not depend on the gate's mode: the binary's embedded demo model, and
// the checks of the suite's own violation detection (an in-process fake endpoint).
const FIXED_MODE = { "demo.test.mjs": "demo", "checker.test.mjs": "self-check" };

export default async function* tableReporter(source) {
  for await (const { type, data } of source) {
    if (type !== "test:pass" && type !== "test:fail") continue;
    const suite = data.details?.type === "suite";
    // Suites only matter when they failed on their own (a before/after hook).
    if (suite && (type === "test:pass" || data.details?.error?.failureType !== "hookFailed")) continue;
    const file = data.file ? path.basename(data.file) : "";
    yield `${JSON.stringify({
      scenario: suite ? `${data.name} (setup/teardown)` : data.name,
      file,
      mode: FIXED_MODE[file] ?? MODE,
      result: data.skip !== undefined ? `skipped: ${data.skip === true ? "skipped" : data.skip}` : type === "test:pass" ? "pass" : "fail",
      seconds: Number(((data.details?.duration_ms ?? 0) / 1000).toFixed(1)),
      error: type === "test:fail" ? String(data.details?.error?.cause?.message ?? data.details?.error?.message ?? "").split("\n")[0] : undefined,
    })}\n`;
  }
}
