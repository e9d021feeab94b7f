export { AntigravityAgent, AntigravityHttpError } from "./agent.js";
export type { AntigravityAgentConfig, HttpAgentConfig, ReconnectOptions } from "./agent.js";
export { AntigravityThreads } from "./threads.js";
export type { AntigravityThreadsConfig, ByteRange, DirectoryListing, DownloadOptions, FileEntry, FileKind, ListThreadsOptions, ThreadChange, ThreadPage, ThreadStatus, ThreadSummary, ThreadUpdate, ThreadWaitingFor, UploadBody, UploadOptions, UploadResult, WatchThreadsOptions, } from "./threads.js";
export { InvalidEventError } from "./sse.js";
