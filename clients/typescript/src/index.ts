// The agui-antigravity client: an AG-UI agent for the server's routes (`AntigravityAgent`), and
// the caller's threads and their files (`AntigravityThreads`, also `agent.threads`).
// CopilotKit's runtime runner is in the `@agui-antigravity/client/copilotkit` entry point.
export { AntigravityAgent, AntigravityHttpError } from "./agent.js";
export type { AntigravityAgentConfig, HttpAgentConfig, ReconnectOptions } from "./agent.js";
export { AntigravityThreads } from "./threads.js";
export type {
  AntigravityThreadsConfig,
  ByteRange,
  DirectoryListing,
  DownloadOptions,
  FileEntry,
  FileKind,
  ListThreadsOptions,
  ThreadChange,
  ThreadPage,
  ThreadStatus,
  ThreadSummary,
  ThreadUpdate,
  ThreadWaitingFor,
  UploadBody,
  UploadOptions,
  UploadResult,
  WatchThreadsOptions,
} from "./threads.js";
export { InvalidEventError } from "./sse.js";
