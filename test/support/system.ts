import { spawn, spawnSync } from 'node:child_process';
import { chmodSync, copyFileSync, existsSync, mkdirSync, mkdtempSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { CoordinatorClient, type EndedSession } from '@cq/client';
import { cleanUp, randomPrefix } from '@cq/test-harness';
import { ROOT, TEST_RUN, startApi, startWorker, track, until, type Started, type StartOptions } from './processes.js';
import { connect, currentTarget, targetEnv, type RedisTarget } from './target.js';

export const API_KEY = 'system-test-key-0123456789';

/** An API process and worker hosts on one Redis and key prefix, with the observer file their sessions write. */
export interface System {
  api: Started & { baseUrl: string };
  client: CoordinatorClient;
  workers: Started[];
  keyPrefix: string;
  /** The Redis the processes use. */
  target: RedisTarget;
  /** A client of the test's own on the system's Redis (close it with `disconnect()`). */
  connect(): ReturnType<typeof connect>;
  /** What sessions write their observer lines to (a FIFO: a session can write nowhere else of the host's). */
  observerFile: string;
  /** What arrived through {@link observerFile}, in order: the test reads this. */
  observerLog: string;
  workerEnv: Record<string, string>;
  /** Starts another API process on the same Redis, prefix and settings; `env` is added to them. */
  addApi(env?: Record<string, string>): Promise<Started & { baseUrl: string; client: CoordinatorClient }>;
  /** Starts another worker host; `env` is added to the system's worker environment. */
  addWorker(id: string, env?: Record<string, string>, options?: StartOptions): Promise<Started>;
  /** Waits until the user's newest history entry is `sessionId`, and returns it. */
  ended(userId: string, sessionId: string, timeoutMs?: number): Promise<EndedSession>;
  /** Observer lines: user, fence, time, pid. */
  observed(): Array<{ userId: string; fence: number; at: number; pid: number }>;
  /** The observer lines of one session (its user and fence) as their fields, the rest of each line after them. */
  observedOf(userId: string, fence: number): string[][];
}

/**
 * A directory for what a test's sessions must reach on the host: outside /tmp (a session has a /tmp of
 * its own), readable by every user (sessions may run as SESSION_USER).
 */
export function sessionVisibleDir(name: string): string {
  mkdirSync('/var/tmp/cq-tests', { recursive: true, mode: 0o755 });
  const dir = mkdtempSync(join('/var/tmp/cq-tests', `${name}-`));
  chmodSync(dir, 0o755);
  cleanUp(() => spawnSync('rm', ['-rf', dir]));
  return dir;
}

/**
 * A copy of the session program `name` of test/support where every session can run it: a session sees
 * neither the host's /tmp (a clone may sit there) nor, as SESSION_USER, a directory only root enters.
 */
export function sessionProgram(name: string): string {
  const path = join(sessionVisibleDir('program'), name);
  copyFileSync(`${ROOT}test/support/${name}`, path);
  chmodSync(path, 0o755);
  return path;
}

/**
 * The observer: sessions write lines to a FIFO (the host's filesystem is read-only to them, and a FIFO
 * needs no write to it); a `cat` of the test's own, that holds it open for reading and writing (so it
 * never sees an end), appends them to a log. A line is written at once (under PIPE_BUF: never mixed
 * with another), stamped by the session itself.
 */
export function startObserver(): { fifo: string; log: string } {
  const dir = sessionVisibleDir('observer');
  const fifo = join(dir, 'heartbeats');
  const log = join(dir, 'heartbeats.log');
  const made = spawnSync('mkfifo', ['-m', '666', fifo]);
  if (made.status !== 0) throw new Error(`mkfifo ${fifo}: ${made.stderr.toString()}`);
  // Tracked with the test's processes (killed at the file's end, or when the test process exits), and
  // dying with the test process should that be killed (a parent-death signal).
  track(
    spawn('setpriv', ['--pdeathsig', 'KILL', '--', '/bin/sh', '-c', 'exec cat <> "$0" >> "$1"', fifo, log], {
      stdio: 'ignore',
    }),
  );
  return { fifo, log };
}

/**
 * Starts the built API and `workers` worker hosts whose sessions run test/support/session.mjs, on the
 * project's Redis target (standalone or cluster) unless `redisUrl` names a server of the test's own.
 */
export async function startSystem(
  options: {
    apiEnv?: Record<string, string>;
    workerEnv?: Record<string, string>;
    workers?: number;
    redisUrl?: string;
    target?: RedisTarget;
  } = {},
): Promise<System> {
  const target: RedisTarget =
    options.target ??
    (options.redisUrl === undefined ? currentTarget() : { kind: 'standalone', url: options.redisUrl });
  const keyPrefix = randomPrefix();
  const { fifo: observerFile, log: observerLog } = startObserver();
  const common = { ...targetEnv(target), KEY_PREFIX: keyPrefix };
  const apiEnv = {
    ...common,
    API_KEYS: API_KEY,
    TOKEN_LIMIT: '100000',
    SPAWN_INTERVAL_MS: '1',
    SPAWN_BURST: '1000',
    SWEEP_INTERVAL_MS: '250',
    // Idle sessions on in every system (the fault tests run with it): a 10-minute timeout none reaches.
    IDLE_TIMEOUT_MS: '600000',
    ...options.apiEnv,
  };
  const api = await startApi(apiEnv);
  const workerEnv = {
    ...common,
    // exec: the session program itself leads its process group, so its own exit code is reported.
    SESSION_COMMAND: `exec env ${TEST_RUN}=${process.pid} ${process.execPath} ${sessionProgram('session.mjs')} ${observerFile}`,
    LEASE_MS: '3000',
    SESSION_GRACE_MS: '1000',
    ...options.workerEnv,
  };
  const workers: Started[] = [];
  const client = new CoordinatorClient({ baseUrl: api.baseUrl, apiKey: API_KEY });
  const addWorker = async (
    id: string,
    env: Record<string, string> = {},
    startOptions: StartOptions = {},
  ): Promise<Started> => {
    const worker = await startWorker({ ...workerEnv, ...env, WORKER_ID: id }, startOptions);
    workers.push(worker);
    // Its slots count once its first heartbeat is in: until then a spawn could meet no_capacity.
    await until(
      async () => (await client.hosts()).hosts.some((h) => h.workerId === id),
      10_000,
      `worker host ${id} listed by the API`,
    );
    return worker;
  };
  for (let i = 0; i < (options.workers ?? 1); i++) await addWorker(`host-${i + 1}`);
  return {
    api,
    client,
    workers,
    keyPrefix,
    target,
    connect: () => connect(target),
    observerFile,
    observerLog,
    workerEnv,
    addWorker,
    async addApi(env = {}) {
      const another = await startApi({ ...apiEnv, ...env });
      return Object.assign(another, {
        client: new CoordinatorClient({ baseUrl: another.baseUrl, apiKey: API_KEY }),
      });
    },
    async ended(userId, sessionId, timeoutMs = 15_000) {
      let entry: EndedSession | undefined;
      await until(
        async () => {
          entry = (await client.history(userId)).find((h) => h.sessionId === sessionId);
          return entry !== undefined;
        },
        timeoutMs,
        `session ${sessionId} of ${userId} ended`,
      );
      return entry!;
    },
    observedOf(userId, fence) {
      if (!existsSync(observerLog)) return [];
      return readFileSync(observerLog, 'utf8')
        .split('\n')
        .map((line) => line.split(' '))
        .filter((f) => f[0] === userId && Number(f[1]) === fence);
    },
    observed() {
      if (!existsSync(observerLog)) return [];
      return readFileSync(observerLog, 'utf8')
        .split('\n')
        .filter((l) => l.trim() !== '')
        .map((l) => {
          const [userId, fence, at, pid] = l.split(' ');
          return { userId: userId!, fence: Number(fence), at: Number(at), pid: Number(pid) };
        });
    },
  };
}
