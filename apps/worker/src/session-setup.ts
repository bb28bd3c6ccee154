// How a host sets up where its sessions run, at start: what its configuration asks of the containment,
// the sessions' cgroups and directories, the launcher, and the one line that says all that (published
// with every heartbeat as its isolation).
import type { Isolation } from '@cq/coordinator';
import type { Logger } from 'pino';
import { prepareCgroups, type CgroupLayout } from './cgroups.js';
import type { WorkerConfig } from './config.js';
import type { ContainmentPlan, ContainmentRequest, PlannedContainment } from './containment.js';
import { pruneSessionDirs } from './isolation.js';
import { RuntimeLauncher, type SessionLauncher } from './session-process.js';

/**
 * Sets up where sessions run, changing the machine: removes what hosts of this machine that died left
 * (session directories; cgroups, by prepareCgroups), makes the caps' cgroups (a {@link ConfigError}
 * where they cannot be enforced), and builds the launcher (`given`, or the session runtime's).
 */
export function prepareSessions(
  config: WorkerConfig,
  planned: PlannedContainment,
  logger: Logger,
  given: SessionLauncher | undefined,
): { launcher: SessionLauncher; cgroups: CgroupLayout | undefined } {
  pruneSessionDirs(config.sessionsDir);
  const cgroups = prepareCgroups({
    memoryMb: config.sessionMemoryMb,
    pidsMax: config.sessionPidsMax,
    cpus: config.sessionCpus,
  });
  const launcher =
    given ??
    new RuntimeLauncher({
      command: config.sessionCommand,
      logger,
      containment: planned.plan,
      cgroups,
      outputRate: config.logRateBytes,
    });
  return { launcher, cgroups };
}

/** One line at start says how sessions are contained and kept apart here, and what that cannot catch. */
export function logContainment(
  logger: Logger,
  { plan, fallback, isolationMissing }: PlannedContainment,
  config: WorkerConfig,
  cgroups: CgroupLayout | undefined,
): void {
  const { network, privateFiles } = plan.isolation;
  const cpus = config.sessionCpus;
  const apart = [
    network === 'none'
      ? 'a network of its own with only loopback'
      : network === 'egress'
        ? 'a network of its own reaching only public addresses'
        : "the host's network (it reaches whatever the host reaches: Redis, the API, other sessions' ports)",
    privateFiles
      ? `its own /tmp and /dev/shm (${config.sessionTmpMb} MiB each) and SESSION_DIR, the host's files read-only`
      : "the host's files as its user may use them",
    cpus === undefined ? 'no CPU cap' : `at most ${cpus} CPU`,
  ].join('; ');
  const isolated = network !== 'host' && privateFiles;
  if (!isolated || cpus === undefined)
    logger.warn(
      {
        network,
        filesystem: privateFiles ? 'private' : 'shared',
        cpus: cpus ?? null,
        isolationMissing: isolationMissing ?? null,
      },
      `sessions are not fully isolated: each has ${apart}` +
        (network === 'host' && config.sessionNetwork === 'host' ? ' (SESSION_NETWORK=host)' : '') +
        (isolationMissing === undefined ? '' : ` (${isolationMissing})`),
    );
  else logger.info({ network, filesystem: 'private', cpus }, `session isolation: each has ${apart}`);
  const fields = {
    containment: plan.mode,
    memoryMb: config.sessionMemoryMb ?? null,
    pidsMax: config.sessionPidsMax ?? null,
    cgroups: cgroups === undefined ? null : `v${cgroups.version}`,
    sessionUser: plan.user?.name ?? null,
    parentDeathSignal: plan.pdeathsig,
  };
  if (plan.mode === 'namespace') {
    logger.info(fields, 'session containment: a PID namespace per session; every process of a session ends with it');
    return;
  }
  logger.warn(
    { ...fields, ...(fallback === undefined ? {} : { namespaceUnavailable: fallback }) },
    'session containment: process groups only; a process that leaves its group (setsid, a daemon) is not caught' +
      (fallback === undefined ? '' : ` (no PID namespace: ${fallback})`),
  );
}

/** What the configuration asks of the containment. */
export function containmentRequest(config: WorkerConfig): ContainmentRequest {
  return {
    containment: config.sessionContainment,
    memoryMb: config.sessionMemoryMb,
    pidsMax: config.sessionPidsMax,
    user: config.sessionUser,
    network: config.sessionNetwork,
    tmpMb: config.sessionTmpMb,
    sessionsDir: config.sessionsDir,
  };
}

/** What a host's heartbeat says of its isolation (`GET /v1/hosts`), from its plan and CPU cap. */
export function isolationOf(plan: ContainmentPlan, cpus: number | undefined): Isolation {
  return {
    network: plan.isolation.network,
    filesystem: plan.isolation.privateFiles ? 'private' : 'shared',
    cpus: cpus ?? null,
  };
}
