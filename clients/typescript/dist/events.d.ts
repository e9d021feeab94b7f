import type { BaseEvent } from "@ag-ui/client";
/**
 * One decoded SSE frame as an event of the installed client: checked for an object with a type
 * (as every client version does), then, on a 0.0.x client, validated by its schema — in the
 * older form where the server's own is newer than that schema. Throws {@link InvalidEventError}.
 */
export declare function toClientEvent(json: unknown): BaseEvent;
