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

/**
 * The form of `event` an older schema accepts, when one differs, or undefined. Only what an
 * older client cannot express is changed: a run stopped by the user (`RUN_FINISHED` with outcome
 * `cancelled`, AG-UI 1.0) reaches a 0.0.x client as a plain `RUN_FINISHED`.
 */
function older(event: Record<string, unknown>): Record<string, unknown> | undefined {
  const outcome = event.outcome as { type?: unknown } | undefined;
  if (event.type === EventType.RUN_FINISHED && outcome?.type === "cancelled") {
    const { outcome: _dropped, ...rest } = event;
    return rest;
  }
  return undefined;
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
  const parsed = transportSchema.safeParse(record);
  if (parsed.success) return parsed.data as BaseEvent;
  const downlevelled = older(record);
  if (downlevelled) {
    const again = transportSchema.safeParse(downlevelled);
    if (again.success) return again.data as BaseEvent;
  }
  throw new InvalidEventError(`${String(record.type)} does not fit @ag-ui/client's schema: ${parsed.error.message}`, { cause: parsed.error });
}
