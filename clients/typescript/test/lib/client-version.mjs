// The version of the @ag-ui/client this process resolves (0.0.59, or 1.x under ag-ui-client-1.mjs).
import fs from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";

let dir = path.dirname(fileURLToPath(import.meta.resolve("@ag-ui/client")));
while (!fs.existsSync(path.join(dir, "package.json"))) dir = path.dirname(dir);
/** `@ag-ui/client`'s version as this process loads it. */
export const AG_UI_CLIENT_VERSION = JSON.parse(fs.readFileSync(path.join(dir, "package.json"), "utf8")).version;
