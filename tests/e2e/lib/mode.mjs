// Which model the suite runs against.
//
// By default every scenario runs against the scripted model (`gemini-script`), so the suite is
// deterministic and offline. `cargo xtask live-gate` sets E2E_MODEL=gemini when GEMINI_API_KEY
// is present: then the server talks to real Gemini (ANTIGRAVITY_TEST_MODEL picks the model),
// prompts are written for a real model, and the scenarios that only a scripted model can
// stage (rate limits, bad requests, scripted questions) are skipped with a reason.
export const GEMINI = process.env.E2E_MODEL === "gemini";
export const MODE = GEMINI ? "gemini" : "scripted";
export const NEEDS_SCRIPT = GEMINI ? "needs the scripted model" : false;

if (GEMINI && !process.env.GEMINI_API_KEY) {
  throw new Error("E2E_MODEL=gemini needs GEMINI_API_KEY");
}

/**
 * Server flags and environment that point an agent at the model: the scripted model's URL with
 * a dummy key, or Gemini (the key travels in the environment, never on a command line).
 */
export function modelFlags(model) {
  if (GEMINI) {
    const name = process.env.ANTIGRAVITY_TEST_MODEL;
    return { args: name ? ["--model", name] : [], env: {} };
  }
  // A developer's real key must not leak into scripted runs.
  return { args: ["--gemini-base-url", model.url, "--api-key", "test"], env: { GEMINI_API_KEY: undefined } };
}
