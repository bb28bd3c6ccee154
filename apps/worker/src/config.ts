import { hostname } from 'node:os';
import { commonConfig, commonEnvShape, intVar, parseEnv, stringVar, type CommonConfig } from '@cq/service-kit';
import { z } from 'zod';

/** A worker host's configuration, parsed once from the environment at start-up. */
export interface WorkerConfig extends CommonConfig {
  /** Sessions this host runs at once. @defaultValue 4 */
  slots: number;
  /**
   * Lease on a running session, ms; renewed while the host lives. A session is killed
   * `leaseMarginMs(leaseMs)` before its lease could run out. At least 1000. @defaultValue 15000
   */
  leaseMs: number;
  /** Shell command run for each session; undefined: the built-in demo session. */
  sessionCommand: string | undefined;
  /** Time between SIGTERM and SIGKILL when a session must stop, ms. @defaultValue 5000 */
  sessionGraceMs: number;
  /** Name of this host. @defaultValue `<hostname>:<pid>` */
  workerId: string;
}

const workerEnvShape = {
  ...commonEnvShape,
  SLOTS: intVar(4, 1, 1000),
  LEASE_MS: intVar(15_000, 1000, 3_600_000),
  SESSION_COMMAND: z
    .string()
    .optional()
    .transform((raw) => (raw === undefined || raw.trim() === '' ? undefined : raw)),
  SESSION_GRACE_MS: intVar(5000, 0, 3_600_000),
  WORKER_ID: stringVar(
    `${hostname()}:${process.pid}`,
    /^[A-Za-z0-9._:@-]{1,128}$/,
    '1 to 128 characters of A-Z a-z 0-9 . _ : @ -',
  ),
};

/** Parses a worker host's environment; throws a one-line ConfigError naming the first bad variable. */
export function loadWorkerConfig(env: Readonly<Record<string, string | undefined>>): WorkerConfig {
  const parsed = parseEnv(workerEnvShape, env);
  return {
    ...commonConfig(parsed),
    slots: parsed.SLOTS,
    leaseMs: parsed.LEASE_MS,
    sessionCommand: parsed.SESSION_COMMAND,
    sessionGraceMs: parsed.SESSION_GRACE_MS,
    workerId: parsed.WORKER_ID,
  };
}
