export { AntigravityAgent, AntigravityHttpError } from "./agent.js";
export type { AntigravityAgentConfig, HttpAgentConfig, ReconnectOptions } from "./agent.js";
