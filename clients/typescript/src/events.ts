// Events as the installed @ag-ui/client accepts them. The 0.0.x line (the one CopilotKit pins)
// validates each event in its transport against a schema older than the server's AG-UI 1.1; the
// 1.x line validates later, in its pipeline, and knows everything the server sends.
import * as agui from "@ag-ui/client";
import { EventType } from "@ag-ui/client";
import type { BaseEvent } from "@ag-ui/client";
import { InvalidEventError } from "./sse.js";

interface SafeParser {
  safeParse(value: unknown): { success: true; data: unknown } | { success: false; error: Error };
}

/** The transport-level event schema of a 0.0.x client; undefined for 1.x. */
const transportSchema = (agui as unknown as { EventSchemas?: SafeParser }).EventSchemas;

interface Issue {
  code: string;
  path: (string | number)[];
  keys?: string[];
}

/** `value` without the fields at `path` named in `keys` (a copy; `value` is left alone). */
function without(value: unknown, path: (string | number)[], keys: string[]): unknown {
  if (typeof value !== "object" || value === null) return value;
  const copy = (Array.isArray(value) ? [...value] : { ...value }) as Record<string | number, unknown>;
  if (path.length === 0) {
    for (const key of keys) delete copy[key];
    return copy;
  }
  const [head, ...rest] = path;
  copy[head] = without(copy[head], rest, keys);
  return copy;
}

/**
 * The form of `event` an older schema accepts, given what it objected to, or undefined when
 * nothing can be dropped. Only what an older client cannot express goes: fields it does not know
 * (e.g. `pendingToolCallIds` in a `RUN_FINISHED` outcome, which a 0.0.x schema refuses rather
 * than strips), and the outcome `cancelled` of a run stopped by the user (AG-UI 1.0), which
 * reaches it as a plain `RUN_FINISHED`.
 */
function older(event: Record<string, unknown>, issues: Issue[]): Record<string, unknown> | undefined {
  const outcome = event.outcome as { type?: unknown } | undefined;
  if (event.type === EventType.RUN_FINISHED && outcome?.type === "cancelled") {
    const { outcome: _dropped, ...rest } = event;
    return rest;
  }
  const unknownKeys = issues.filter((issue) => issue.code === "unrecognized_keys" && issue.keys?.length);
  if (unknownKeys.length === 0 || unknownKeys.length !== issues.length) return undefined;
  let reduced: unknown = event;
  for (const issue of unknownKeys) reduced = without(reduced, issue.path, issue.keys ?? []);
  return reduced as Record<string, unknown>;
}

/**
 * One decoded SSE frame as an event of the installed client: checked for an object with a type
 * (as every client version does), then, on a 0.0.x client, validated by its schema — in the
 * older form where the server's own is newer than that schema. Throws {@link InvalidEventError}.
 */
export function toClientEvent(json: unknown): BaseEvent {
  if (typeof json !== "object" || json === null || Array.isArray(json)) {
    throw new InvalidEventError("the frame is not a JSON object.");
  }
  const record = json as Record<string, unknown>;
  if (typeof record.type !== "string" || record.type.length === 0) {
    throw new InvalidEventError("the frame carries no event type.");
  }
  if (!transportSchema) return record as unknown as BaseEvent;
  let candidate: Record<string, unknown> | undefined = record;
  let first: Error | undefined;
  // Each pass drops what the schema objected to; a few suffice (an outcome, then its fields).
  for (let pass = 0; candidate && pass < 4; pass += 1) {
    const parsed = transportSchema.safeParse(candidate);
    if (parsed.success) return parsed.data as BaseEvent;
    first ??= parsed.error;
    candidate = older(candidate, (parsed.error as Error & { issues?: Issue[] }).issues ?? []);
  }
  throw new InvalidEventError(`${String(record.type)} does not fit @ag-ui/client's schema: ${first?.message}`, { cause: first });
}
