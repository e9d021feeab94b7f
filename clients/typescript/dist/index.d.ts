export { AntigravityAgent, AntigravityHttpError } from "./agent.js";
export type { AntigravityAgentConfig, HttpAgentConfig, ReconnectOptions } from "./agent.js";
export { AntigravityThreads } from "./threads.js";
export type { AntigravityThreadsConfig, ByteRange, DirectoryListing, DownloadOptions, FileEntry, FileKind, ListThreadsOptions, ThreadChange, ThreadPage, ThreadStatus, ThreadSummary, ThreadUpdate, ThreadWaitingFor, UploadBody, UploadOptions, UploadResult, WatchThreadsOptions, } from "./threads.js";
export { InvalidEventError } from "./sse.js";
export { AntigravityForkError, CANNOT_FORK, REGENERATE_PROP, REWIND_EVENT, branchesAt, editedHistory, forkErrorOf, regenerateHistory, regenerateProps, rewindReportOf } from "./forks.js";
export type { Branch, ForkOptions, ForkResult, MessageBranches, NotRewoundFile, RewindReport, RewoundFile, ThreadBranches } from "./forks.js";
