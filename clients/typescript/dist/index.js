// The agui-antigravity client: an AG-UI agent for the server's routes (`AntigravityAgent`).
// CopilotKit's runtime runner is in the `@agui-antigravity/client/copilotkit` entry point.
export { AntigravityAgent, AntigravityHttpError } from "./agent.js";
