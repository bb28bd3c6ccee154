import { hostname, tmpdir } from 'node:os';
import { join } from 'node:path';
import { DEFAULT_LEASE_MS } from '@cq/coordinator';
import {
  choiceVar,
  commonConfig,
  commonEnvShape,
  intVar,
  optionalDecimalVar,
  optionalIntVar,
  parseEnv,
  pathVar,
  proxySecretVar,
  hostPortVar,
  stringVar,
  type CommonConfig,
} from '@cq/service-kit';
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
  /** The pool this host serves: it runs only sessions whose token named it. @defaultValue 'default' */
  pool: string;
  /**
   * How every process of a session is kept inside it: `namespace` (a PID namespace per session, refused
   * at start where the host cannot make one), `group` (its process group only), `auto` (`namespace`
   * where the host can, else `group` with a warning). @defaultValue 'auto'
   */
  sessionContainment: 'auto' | 'namespace' | 'group';
  /** Memory cap of one session, all its processes together, MiB (cgroups); undefined: no cap. */
  sessionMemoryMb: number | undefined;
  /** Most processes and threads one session may have at once (cgroups); undefined: no cap. */
  sessionPidsMax: number | undefined;
  /** Run sessions as this system user (name or uid; the host must run as root); undefined: the host's user. */
  sessionUser: string | undefined;
  /**
   * What a session reaches on the network: `none` (a network namespace with only loopback), `egress`
   * (that plus outbound connections to public addresses), `host` (the host's network), `auto` (`none`
   * where the host can make it, else `host` with a warning). @defaultValue 'auto'
   */
  sessionNetwork: 'auto' | 'none' | 'egress' | 'host';
  /** CPU time one session may use, in CPUs, all its processes together (cgroups); undefined: no cap. */
  sessionCpus: number | undefined;
  /** Size of a session's private /tmp and /dev/shm, MiB. @defaultValue 256 */
  sessionTmpMb: number;
  /** Where the host makes each session's SESSION_DIR. @defaultValue `<os tmpdir>/cq-sessions` */
  sessionsDir: string;
  /** Output one session may send per second on average, bytes (bursts up to 1 MiB). @defaultValue 65536 */
  logRateBytes: number;
  /** Newest output lines kept per session. @defaultValue 10000 */
  logKeepLines: number;
  /** How long a session's output is kept after it ends, ms. @defaultValue 86400000 */
  logRetentionMs: number;
  /** The session proxy's shared secret; undefined: no proxy listener. */
  proxySecret: string | undefined;
  /** Where the proxy listener listens (port 0: any free one). @defaultValue 127.0.0.1:0 */
  proxyListen: { host: string; port: number };
  /** The address API processes use to reach the listener; undefined: the address it listens on. */
  proxyAdvertise: { host: string; port: number } | undefined;
}

const workerEnvShape = {
  ...commonEnvShape,
  SLOTS: intVar(4, 1, 1000),
  LEASE_MS: intVar(DEFAULT_LEASE_MS, 1000, 3_600_000),
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
  POOL: stringVar('default', /^[a-z0-9-]{1,64}$/, '1 to 64 characters of a-z 0-9 -'),
  SESSION_CONTAINMENT: choiceVar('auto', ['auto', 'namespace', 'group']),
  // At least 16 MiB: below that not even a shell starts.
  SESSION_MEMORY_MB: optionalIntVar(16, 1_048_576),
  // At least 4: the session's init, its shell and a command or two.
  SESSION_PIDS_MAX: optionalIntVar(4, 4_194_304),
  SESSION_USER: z
    .string()
    .optional()
    .transform((raw, ctx) => {
      if (raw === undefined || raw.trim() === '') return undefined;
      if (!/^([a-z_][a-z0-9_.-]{0,31}\$?|\d{1,10})$/i.test(raw.trim())) {
        ctx.addIssue({ code: 'custom', message: `must be a user name or a numeric uid (got "${raw}")` });
        return z.NEVER;
      }
      return raw.trim();
    }),
  SESSION_NETWORK: choiceVar('auto', ['auto', 'none', 'egress', 'host']),
  // A hundredth of a CPU at least (a cgroup v1 quota of 1 ms per 100 ms period), 1024 at most.
  SESSION_CPUS: optionalDecimalVar(0.01, 1024, 2),
  SESSION_TMP_MB: intVar(256, 1, 1_048_576),
  SESSIONS_DIR: pathVar(join(tmpdir(), 'cq-sessions')),
  LOG_RATE_BYTES: intVar(65_536, 1, 1_073_741_824),
  LOG_KEEP_LINES: intVar(10_000, 1, 1_000_000),
  // At least a second, at most a year.
  LOG_RETENTION_MS: intVar(86_400_000, 1000, 31_536_000_000),
  PROXY_SECRET: proxySecretVar(),
  PROXY_LISTEN: hostPortVar('127.0.0.1:0', true),
  PROXY_ADVERTISE: hostPortVar(undefined, false),
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
    pool: parsed.POOL,
    sessionContainment: parsed.SESSION_CONTAINMENT,
    sessionMemoryMb: parsed.SESSION_MEMORY_MB,
    sessionPidsMax: parsed.SESSION_PIDS_MAX,
    sessionUser: parsed.SESSION_USER,
    sessionNetwork: parsed.SESSION_NETWORK,
    sessionCpus: parsed.SESSION_CPUS,
    sessionTmpMb: parsed.SESSION_TMP_MB,
    sessionsDir: parsed.SESSIONS_DIR,
    logRateBytes: parsed.LOG_RATE_BYTES,
    logKeepLines: parsed.LOG_KEEP_LINES,
    logRetentionMs: parsed.LOG_RETENTION_MS,
    proxySecret: parsed.PROXY_SECRET,
    proxyListen: parsed.PROXY_LISTEN!,
    proxyAdvertise: parsed.PROXY_ADVERTISE,
  };
}
