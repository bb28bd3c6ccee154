export { WorkerHost, type WorkerHostOptions } from './worker-host.js';
export { SessionRunner, type RunOutcome, type SessionRunnerOptions } from './session-runner.js';
export { processLauncher, type LaunchSpec, type SessionHandle, type SessionLauncher } from './session-process.js';
export { loadWorkerConfig, type WorkerConfig } from './config.js';
