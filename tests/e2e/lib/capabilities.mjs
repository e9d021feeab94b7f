// `GET <agent>/capabilities`, validated against the official AgentCapabilitiesSchema.
//
// The schema accepts unknown keys silently, and 1.0 readers then ignore them (e.g. the 0.x
// `multiAgent.subAgents`), so unknown categories and fields are failures here too.
import assert from "node:assert/strict";
import { AgentCapabilitiesSchema } from "@ag-ui/core/schemas";

/** Peels optional/nullable wrappers off a zod schema down to its object shape. */
function objectShape(schema) {
  let s = schema;
  for (let i = 0; i < 5 && s && !s.shape && typeof s.unwrap === "function"; i++) s = s.unwrap();
  return s?.shape;
}

/** Fetches and validates the capabilities document; returns it. */
export async function checkCapabilities(url, headers = {}) {
  const res = await fetch(url, { headers: { Accept: "application/json", ...headers } });
  assert.equal(res.status, 200, `GET ${url}`);
  assert.match(res.headers.get("content-type") ?? "", /^application\/json/);
  const body = await res.json();
  const parsed = AgentCapabilitiesSchema.safeParse(body);
  assert.ok(parsed.success, `AgentCapabilitiesSchema rejects ${url}: ${JSON.stringify(parsed.error?.issues)}`);
  const top = AgentCapabilitiesSchema.shape;
  for (const [category, value] of Object.entries(body)) {
    assert.ok(category in top, `unknown capability category '${category}'`);
    const shape = objectShape(top[category]);
    if (category === "custom" || !shape) continue;
    for (const field of Object.keys(value)) assert.ok(field in shape, `unknown capability field '${category}.${field}'`);
  }
  return body;
}
