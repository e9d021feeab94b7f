// Loaded with `node --import`: every import of `@ag-ui/client` gets the 1.x line (installed as
// the `ag-ui-client-1` alias) instead of the 0.0.59 the package is developed against, so the
// same tests prove the agent with both.
import { register } from "node:module";

register("./ag-ui-client-1-hooks.mjs", import.meta.url);
