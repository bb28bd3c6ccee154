export { WorkerHost, type WorkerHostOptions } from './worker-host.js';
export {
  SessionRunner,
  hostedLeaseMs,
  leaseMarginMs,
  type RunOutcome,
  type SessionRunnerOptions,
} from './session-runner.js';
export {
  RuntimeLauncher,
  type LaunchSpec,
  type SessionExit,
  type SessionHandle,
  type SessionLauncher,
} from './session-process.js';
export { SessionLifecycle, type Phase, type SessionEnd } from './session-lifecycle.js';
export {
  PROCESS_GROUPS,
  probeContainment,
  type Containment,
  type ContainmentPlan,
  type PlannedContainment,
} from './containment.js';
export { prepareCgroups, type CgroupLayout } from './cgroups.js';
export { loadWorkerConfig, type WorkerConfig } from './config.js';
