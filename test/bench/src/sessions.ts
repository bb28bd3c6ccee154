// The session start path on real processes: the built API and worker hosts, real HTTP, sessions that
// write a timestamp when they start; beside the limit, Node's child_process.spawn of the same command.
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import {
  chmodSync,
  closeSync,
  copyFileSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  openSync,
  readFileSync,
  readSync,
  rmSync,
  watch,
  writeFileSync,
  type FSWatcher,
} from 'node:fs';
import { Agent, request } from 'node:http';
import { tmpdir } from 'node:os';
import { basename, dirname, join } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { setTimeout as sleep } from 'node:timers/promises';
import { Coordinator } from '@cq/coordinator';
import { Redis } from 'ioredis';

export const ROOT = fileURLToPath(new URL('../../../', import.meta.url));
export const API_KEY = 'bench-sessions-key-0123456789';
const agent = new Agent({ keepAlive: true, maxSockets: 64 });

/** Epoch milliseconds with sub-millisecond precision (the sessions write `date +%s%N`). */
const nowMs = (): number => performance.timeOrigin + performance.now();

/** A process of the system, with its JSON log lines. */
export interface Proc {
  child: ChildProcess;
  logs: Array<Record<string, unknown>>;
  waitFor(match: (line: Record<string, unknown>) => boolean, timeoutMs?: number): Promise<Record<string, unknown>>;
  stop(): Promise<void>;
}

/** Every process started here: killed when the benchmark exits, however it exits. */
const children = new Set<ChildProcess>();
process.on('exit', () => {
  for (const child of children) if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
});

export function startProc(script: string, env: Record<string, string>): Proc {
  const child = spawn(process.execPath, [`${ROOT}${script}`], {
    // The bench's Redis keeps nothing on disk (a throwaway): accepted, as the processes refuse it otherwise.
    env: { PATH: process.env['PATH'] ?? '', LOG_LEVEL: 'warn', REDIS_ACCEPT_RISKS: 'no-persistence', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  children.add(child);
  child.once('exit', () => children.delete(child));
  // Its stderr is passed on, and its last lines kept: they say why a process that refused to start did.
  let stderr = '';
  child.stderr!.on('data', (chunk: Buffer) => {
    process.stderr.write(chunk);
    stderr = (stderr + chunk.toString('utf8')).slice(-2000);
  });
  let ended: string | undefined;
  const logs: Array<Record<string, unknown>> = [];
  const waiters = new Set<() => void>();
  createInterface({ input: child.stdout! }).on('line', (text) => {
    try {
      logs.push(JSON.parse(text) as Record<string, unknown>);
    } catch {
      logs.push({ msg: text });
    }
    for (const wake of waiters) wake();
  });
  child.once('close', (code, signal) => {
    ended = `${script} exited (${code ?? signal}): ${stderr.trim().split('\n').at(-1) ?? ''}`;
    for (const wake of waiters) wake();
  });
  return {
    child,
    logs,
    waitFor: (match, timeoutMs = 15_000) =>
      new Promise((resolve, reject) => {
        const check = (): void => {
          const found = logs.find(match);
          if (found === undefined && ended === undefined) return;
          waiters.delete(check);
          clearTimeout(timer);
          if (found !== undefined) resolve(found);
          else reject(new Error(ended));
        };
        const timer = setTimeout(() => {
          waiters.delete(check);
          reject(new Error(`${script}: no matching log line within ${timeoutMs} ms`));
        }, timeoutMs);
        waiters.add(check);
        check();
      }),
    stop: async () => {
      if (child.exitCode !== null || child.signalCode !== null) return;
      const exited = new Promise((resolve) => child.once('exit', resolve));
      child.kill('SIGTERM');
      await exited;
    },
  };
}

/** Outside /tmp (each session has a /tmp of its own), readable by every user (sessions may run as SESSION_USER). */
export const VISIBLE = '/var/tmp/cq-bench';

/**
 * A copy of the program at `path` where every session can run it (outside /tmp, readable by every
 * user): a checkout under /tmp, as CI's clone may be, is out of a session's sight.
 */
export function visibleCopy(path: string): string {
  mkdirSync(VISIBLE, { recursive: true, mode: 0o755 });
  const copy = join(VISIBLE, basename(path));
  copyFileSync(path, copy);
  chmodSync(copy, 0o755);
  return copy;
}

/**
 * Where sessions say they started. A session sees the host's files read-only and has a /tmp of its own
 * (bubblewrap, SESSION_NETWORK none or egress alike): it writes "<user> <epoch ns>" to a FIFO outside
 * /tmp (opening a FIFO writes nothing to the filesystem), and a `cat` of the bench's own, holding the
 * FIFO open for reading and writing (so it never sees an end), appends each line to {@link log}. A line
 * is one write under PIPE_BUF (never mixed with another), stamped by the session itself.
 */
export class Observer {
  readonly fifo: string;
  readonly log: string;
  readonly #cat: ChildProcess;
  readonly #seen = new Map<string, number>();
  #offset = 0;
  #partial = '';

  constructor(name = 'started') {
    mkdirSync(VISIBLE, { recursive: true, mode: 0o755 });
    const dir = mkdtempSync(join(VISIBLE, `${name}-`));
    chmodSync(dir, 0o755);
    this.fifo = join(dir, `${name}.fifo`);
    this.log = join(dir, `${name}.log`);
    const made = spawnSync('mkfifo', ['-m', '666', this.fifo]);
    if (made.status !== 0) throw new Error(`mkfifo ${this.fifo}: ${made.stderr.toString()}`);
    writeFileSync(this.log, '');
    this.#cat = spawn('/bin/sh', ['-c', 'exec cat <> "$0" >> "$1"', this.fifo, this.log], { stdio: 'ignore' });
    children.add(this.#cat);
    this.#cat.once('exit', () => children.delete(this.#cat));
  }

  /** Start times (epoch ms) of the sessions seen so far, by user: reads what the log gained since last time. */
  started(): Map<string, number> {
    const fd = openSync(this.log, 'r');
    try {
      const buffer = Buffer.alloc(64 * 1024);
      for (let n; (n = readSync(fd, buffer, 0, buffer.length, this.#offset)) > 0;) {
        this.#offset += n;
        const lines = (this.#partial + buffer.toString('utf8', 0, n)).split('\n');
        this.#partial = lines.pop()!;
        for (const line of lines) {
          const [user, ns] = line.split(' ');
          if (user !== undefined && ns !== undefined && !this.#seen.has(user))
            this.#seen.set(user, Number(BigInt(ns) / 1000n) / 1000);
        }
      }
    } finally {
      closeSync(fd);
    }
    return this.#seen;
  }

  /** Waits (on inotify, not polling: the machine's two cores are the system's) until every user's session started. */
  async waitStarted(users: readonly string[], timeoutMs = 30_000): Promise<Map<string, number>> {
    let watcher: FSWatcher | undefined;
    let timer: NodeJS.Timeout | undefined;
    try {
      return await new Promise<Map<string, number>>((resolve, reject) => {
        const check = (): void => {
          const seen = this.started();
          if (users.every((u) => seen.has(u))) resolve(seen);
        };
        watcher = watch(this.log, check);
        timer = setTimeout(
          () =>
            reject(
              new Error(
                `sessions not started within ${timeoutMs} ms: ${users.filter((u) => !this.#seen.has(u)).length} missing`,
              ),
            ),
          timeoutMs,
        );
        check();
      });
    } finally {
      watcher?.close();
      clearTimeout(timer);
    }
  }

  stop(): void {
    this.#cat.kill('SIGKILL');
    rmSync(dirname(this.fifo), { recursive: true, force: true });
  }
}

/** An API and its worker hosts on one key prefix, whose sessions write "<user> <epoch ns>" to an {@link Observer} when they start. */
export class Stack {
  readonly observer = new Observer();
  readonly hosts: Proc[] = [];
  api!: Proc;
  baseUrl = '';

  constructor(
    readonly redisUrl: string,
    readonly keyPrefix: string,
    /** What the session does after writing its timestamp. */
    readonly then: string,
  ) {}

  /** What the sessions' lines arrive in. */
  get file(): string {
    return this.observer.log;
  }

  get command(): string {
    return `echo "$USER_ID $(date +%s%N)" >> ${this.observer.fifo}; ${this.then}`;
  }

  async startApi(env: Record<string, string> = {}): Promise<void> {
    this.api = startProc('apps/api/dist/main.js', {
      REDIS_URL: this.redisUrl,
      KEY_PREFIX: this.keyPrefix,
      API_KEYS: API_KEY,
      HOST: '127.0.0.1',
      PORT: '0',
      LOG_LEVEL: 'info',
      TOKEN_LIMIT: '1000000',
      SPAWN_INTERVAL_MS: '1',
      SPAWN_BURST: '1000',
      ...env,
    });
    const line = await this.api.waitFor((l) => String(l['msg']).startsWith('Server listening at http://127.0.0.1'));
    this.baseUrl = /(http:\/\/127\.0\.0\.1:\d+)/.exec(String(line['msg']))![1]!;
  }

  /**
   * Starts a worker host with its defaults and `env` on top; answers it, its runtime's pid and how it
   * contains its sessions (from its start line). Rejects, saying why, when the host refuses to start.
   */
  async addHost(
    id: string,
    slots: number,
    env: Record<string, string> = {},
  ): Promise<{ host: Proc; runtimePid: number; containment: string }> {
    const host = startProc('apps/worker/dist/main.js', {
      REDIS_URL: this.redisUrl,
      KEY_PREFIX: this.keyPrefix,
      WORKER_ID: id,
      SLOTS: String(slots),
      SESSION_COMMAND: this.command,
      LOG_LEVEL: 'info',
      ...env,
    });
    this.hosts.push(host);
    const runtime = await host.waitFor((l) => l['msg'] === 'session runtime started');
    const contained = await host.waitFor((l) => typeof l['containment'] === 'string');
    await host.waitFor((l) => l['msg'] === 'worker host started');
    // Its slots count once its first heartbeat is in.
    while (!((await this.get('/v1/hosts'))['hosts'] as Array<{ workerId: string }>).some((h) => h.workerId === id))
      await sleep(20);
    return { host, runtimePid: runtime['runtimePid'] as number, containment: String(contained['containment']) };
  }

  /** Waits until `free` slots are free again (a host gives an ended session's slot back with its next heartbeat). */
  async slotsFree(free: number): Promise<void> {
    while (((await this.get('/v1/hosts'))['freeSlots'] as number) < free) await sleep(20);
  }

  async get(path: string): Promise<Record<string, unknown>> {
    return this.request('GET', path, undefined, true);
  }

  /** POSTs JSON on a kept-alive connection (node:http: the client's own cost stays small). */
  async post(path: string, body: unknown, auth = true): Promise<Record<string, unknown>> {
    return this.request('POST', path, body, auth);
  }

  async request(method: string, path: string, body: unknown, auth: boolean): Promise<Record<string, unknown>> {
    const payload = body === undefined ? '' : JSON.stringify(body);
    const { status, json } = await new Promise<{ status: number; json: Record<string, unknown> }>((resolve, reject) => {
      const req = request(
        `${this.baseUrl}${path}`,
        {
          method,
          agent,
          headers: {
            ...(payload === '' ? {} : { 'content-type': 'application/json' }),
            'content-length': Buffer.byteLength(payload),
            ...(auth ? { authorization: `Bearer ${API_KEY}` } : {}),
          },
        },
        (res) => {
          let text = '';
          res.setEncoding('utf8');
          res.on('data', (chunk: string) => (text += chunk));
          res.on('end', () =>
            resolve({ status: res.statusCode ?? 0, json: JSON.parse(text) as Record<string, unknown> }),
          );
        },
      );
      req.on('error', reject);
      req.end(payload);
    });
    if (status >= 300) throw new Error(`${path}: ${status} ${JSON.stringify(json)}`);
    return json;
  }

  async tokens(users: string[]): Promise<string[]> {
    return Promise.all(users.map(async (userId) => String((await this.post('/v1/tokens', { userId }))['token'])));
  }

  /** Start times (epoch ms) of the sessions seen so far, by user. */
  started(): Map<string, number> {
    return this.observer.started();
  }

  /** Waits until every user's session started. */
  async waitStarted(users: readonly string[], timeoutMs = 30_000): Promise<Map<string, number>> {
    return this.observer.waitStarted(users, timeoutMs);
  }

  async stop(): Promise<void> {
    await Promise.all(this.hosts.map((h) => h.stop()));
    await this.api?.stop();
    this.observer.stop();
  }
}

/** Latencies in ms → p50 and p99. */
export function percentiles(values: number[]): { p50: number; p99: number; n: number } {
  const sorted = [...values].sort((a, b) => a - b);
  const at = (q: number): number => sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))]!;
  return { p50: at(0.5), p99: at(0.99), n: sorted.length };
}

/**
 * The limit: Node's child_process.spawn of the same command, from a Node process of its own (see
 * spawn-limit.ts), writing to a file of its own. `round(users)` spawns one per user at once and answers
 * each one's spawn → timestamp, ms.
 */
class SpawnLimit {
  readonly file = join(mkdtempSync(join(tmpdir(), 'cq-bench-limit-')), 'started.log');
  readonly #child: ChildProcess;
  readonly #answers: AsyncIterator<string>;

  constructor() {
    this.#child = spawn(process.execPath, [fileURLToPath(new URL('./spawn-limit.js', import.meta.url))], {
      env: { PATH: process.env['PATH'] ?? '', LIMIT_COMMAND: `echo "$USER_ID $(date +%s%N)" >> ${this.file}; exit 0` },
      stdio: ['pipe', 'pipe', 'inherit'],
    });
    children.add(this.#child);
    this.#answers = createInterface({ input: this.#child.stdout! })[Symbol.asyncIterator]();
  }

  async round(users: readonly string[]): Promise<number[]> {
    this.#child.stdin!.write(`${JSON.stringify({ users })}\n`);
    const answer = await this.#answers.next();
    if (answer.done === true) throw new Error('the spawn limit process exited');
    const { t0 } = JSON.parse(answer.value) as { t0: number };
    const seen = readStarted(this.file);
    return users.map((u) => seen.get(u)! - t0);
  }

  stop(): void {
    this.#child.stdin!.end();
  }
}

function readStarted(file: string): Map<string, number> {
  const seen = new Map<string, number>();
  for (const line of readFileSync(file, 'utf8').split('\n')) {
    const [user, ns] = line.split(' ');
    if (user !== undefined && ns !== undefined) seen.set(user, Number(BigInt(ns) / 1000n) / 1000);
  }
  return seen;
}

/** Resident set size of `pid`, bytes. */
export function rss(pid: number): number {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  return Number(/VmRSS:\s+(\d+) kB/.exec(status)?.[1] ?? 0) * 1024;
}

/** What {@link benchSessions} measured. */
/** `POST /v1/spawn` → 202 with and without the capacity check: the admission's own cost. */
export interface AdmissionRow {
  mode: string;
  /** One caller, one spawn at a time. */
  p50: number;
  p99: number;
  /** 50 callers at once. */
  perSecond: number;
  /** Scripts Redis ran per admitted spawn (EVAL/EVALSHA calls from INFO commandstats). */
  scriptsPerSpawn: number;
}

/**
 * The admission alone, on the built API over real HTTP: `POST /v1/spawn` → 202 with `CAPACITY_CHECK`
 * on and off, side by side, alternating. No worker host runs (the sessions stay pending): the check
 * counts the slots of a host record published through the coordinator (a stand-in with ample slots).
 */
export async function benchAdmission(redisUrl: string, quick: boolean): Promise<AdmissionRow[]> {
  const SERIAL = quick ? 300 : 1500;
  const PARALLEL = quick ? 1000 : 5000;
  const RUNS = quick ? 1 : 3;
  const redis = new Redis(redisUrl);
  const scripts = async (): Promise<number> => {
    const stats = await redis.info('commandstats');
    let calls = 0;
    for (const m of stats.matchAll(/cmdstat_(?:evalsha|eval|evalsha_ro|eval_ro):calls=(\d+)/g)) calls += Number(m[1]);
    return calls;
  };
  const modes = [
    { mode: 'CAPACITY_CHECK=true (admit, hold a slot, enqueue)', check: 'true' },
    { mode: 'CAPACITY_CHECK=false (admit, enqueue: the path before the check)', check: 'false' },
  ];
  const samples = new Map<string, AdmissionRow[]>();
  try {
    for (let run = 0; run < RUNS; run++) {
      for (const { mode, check } of run % 2 === 0 ? modes : [...modes].reverse()) {
        const prefix = `benchadm${check === 'true' ? 'on' : 'off'}${run}`;
        const stack = new Stack(redisUrl, prefix, 'exit 0');
        await stack.startApi({
          CAPACITY_CHECK: check,
          PENDING_TIMEOUT_MS: '3600000',
          SWEEP_INTERVAL_MS: '3600000',
        });
        await new Coordinator({ redis, keyPrefix: prefix }).workers.heartbeat(
          { workerId: 'stand-in', slots: 1_000_000, busy: 0, startedAt: Date.now() },
          3_600_000,
        );
        try {
          const warm = await stack.tokens(Array.from({ length: 50 }, (_, i) => `warm-${i}`));
          for (const token of warm) await stack.post('/v1/spawn', { token }, false);
          const serialTokens = await stack.tokens(Array.from({ length: SERIAL }, (_, i) => `one-${i}`));
          const times: number[] = [];
          const before = await scripts();
          for (const token of serialTokens) {
            const t0 = performance.now();
            await stack.post('/v1/spawn', { token }, false);
            times.push(performance.now() - t0);
          }
          const scriptsPerSpawn = ((await scripts()) - before) / SERIAL;
          const parallelTokens: string[] = [];
          for (let i = 0; i < PARALLEL; i += 500)
            parallelTokens.push(
              ...(await stack.tokens(Array.from({ length: Math.min(500, PARALLEL - i) }, (_, j) => `par-${i + j}`))),
            );
          let next = 0;
          const t0 = performance.now();
          await Promise.all(
            Array.from({ length: 50 }, async () => {
              while (next < parallelTokens.length)
                await stack.post('/v1/spawn', { token: parallelTokens[next++] }, false);
            }),
          );
          const perSecond = (PARALLEL * 1000) / (performance.now() - t0);
          const row = { mode, ...percentiles(times), perSecond, scriptsPerSpawn };
          samples.set(mode, [...(samples.get(mode) ?? []), row]);
        } finally {
          await stack.stop();
        }
      }
    }
  } finally {
    redis.disconnect();
  }
  // The median run of each mode, by throughput.
  return modes.map(({ mode }) => {
    const rows = [...samples.get(mode)!].sort((a, b) => a.perSecond - b.perSecond);
    return rows[Math.floor(rows.length / 2)]!;
  });
}

/** The worker hosts of the latency rows: containment on, off, and on with caps. */
const CONTAINMENTS = [
  {
    mode: 'namespace',
    case: 'ours, containment on (SESSION_CONTAINMENT=namespace)',
    env: { SESSION_CONTAINMENT: 'namespace' },
  },
  {
    mode: 'group',
    case: 'ours, containment off (SESSION_CONTAINMENT=group)',
    env: { SESSION_CONTAINMENT: 'group' },
  },
  {
    mode: 'caps',
    case: 'ours, containment on + caps (namespace, SESSION_MEMORY_MB=256, SESSION_PIDS_MAX=64)',
    env: { SESSION_CONTAINMENT: 'namespace', SESSION_MEMORY_MB: '256', SESSION_PIDS_MAX: '64' },
  },
] as const;

export type LatencyMode = (typeof CONTAINMENTS)[number]['mode'] | 'limit';

export interface LatencyRow {
  case: string;
  mode: LatencyMode;
  callers: number;
  p50: number;
  p99: number;
  n: number;
}

/** What one mode adds to another at one percentile: `on` − `off` ms, and `on` / `off`. */
export interface ContainmentCost {
  what: string;
  callers: number;
  percentile: 'p50' | 'p99';
  on: number;
  off: number;
  added: number;
  ratio: number;
}

export interface SessionBench {
  latency: LatencyRow[];
  /** Modes whose hosts refused to start here (no namespace, no cgroups), with the host's reason. */
  unavailable: Array<{ mode: LatencyMode; reason: string }>;
  /** Containment on − off (namespace − group), and caps − no caps (caps − namespace). */
  cost: ContainmentCost[];
  startsPerSecond: { ours: number; bare: number; sessions: number; containment: string };
  rssPerSession: { bytes: number; sessions: number; before: number; after: number; containment: string };
}

/** One row source of the latency benchmark: one session at a time, and a round of many at once. */
interface LatencyRunner {
  mode: LatencyMode;
  case: string;
  one(i: number): Promise<number>;
  many(round: number): Promise<number[]>;
}

/**
 * Spawn → session process started, one caller and 20 at once, on 2 hosts per containment mode (all
 * running, on prefixes of their own) and the limit, interleaved: each sample and each round goes to
 * every mode in turn, so the modes share whatever else the machine does. Then session starts per
 * second on one host, and host RSS per running session (hosts with their defaults). Everything on real
 * processes and real HTTP.
 */
export async function benchSessions(redisUrl: string, quick: boolean): Promise<SessionBench> {
  const result: SessionBench = {
    latency: [],
    unavailable: [],
    cost: [],
    startsPerSecond: { ours: 0, bare: 0, sessions: 0, containment: '' },
    rssPerSession: { bytes: 0, sessions: 0, before: 0, after: 0, containment: '' },
  };

  // 1. Latency: 2 hosts per mode, sessions that exit at once. A quick run leaves the caps out.
  const SERIAL = quick ? 20 : 200;
  const ROUNDS = quick ? 2 : 15;
  const AT_ONCE = 20;
  // Room for the sessions of a round and for the ones that ended but whose slots the hosts have not
  // given back yet (with their next heartbeat, within 250 ms).
  const LAT_SLOTS = 32;
  const modes = CONTAINMENTS.filter((m) => !quick || m.mode !== 'caps');
  const stacks: Stack[] = [];
  const limit = new SpawnLimit();
  try {
    const started = await Promise.all(
      modes.map(async (m): Promise<LatencyRunner | undefined> => {
        const stack = new Stack(redisUrl, `benchlat${m.mode}`, 'exit 0');
        stacks.push(stack);
        try {
          await stack.startApi();
          for (const n of [1, 2]) {
            const { containment } = await stack.addHost(`lat-${m.mode}-${n}`, LAT_SLOTS, m.env);
            if (containment !== m.env.SESSION_CONTAINMENT)
              throw new Error(`asked for ${m.env.SESSION_CONTAINMENT}, the host runs ${containment}`);
          }
        } catch (err) {
          result.unavailable.push({ mode: m.mode, reason: (err as Error).message });
          await stack.stop();
          return undefined;
        }
        // Warm-up: the first spawns load scripts and open connections.
        const warm = Array.from({ length: quick ? 3 : 10 }, (_, i) => `warm-${i}`);
        for (const [i, token] of (await stack.tokens(warm)).entries()) {
          await stack.post('/v1/spawn', { token }, false);
          await stack.waitStarted([warm[i]!]);
        }
        const serialUsers = Array.from({ length: SERIAL }, (_, i) => `one-${i}`);
        const serialTokens = await stack.tokens(serialUsers);
        const roundUsers = Array.from({ length: ROUNDS }, (_, r) =>
          Array.from({ length: AT_ONCE }, (_, i) => `many-${r}-${i}`),
        );
        const roundTokens = await Promise.all(roundUsers.map((users) => stack.tokens(users)));
        return {
          mode: m.mode,
          case: `${m.case}: POST /v1/spawn → session started`,
          one: async (i) => {
            const t0 = nowMs();
            await stack.post('/v1/spawn', { token: serialTokens[i] }, false);
            return (await stack.waitStarted([serialUsers[i]!])).get(serialUsers[i]!)! - t0;
          },
          many: async (round) => {
            const users = roundUsers[round]!;
            // The sessions before have ended and their slots come back: each round starts with both hosts idle.
            await stack.slotsFree(2 * LAT_SLOTS);
            const t0 = nowMs();
            await Promise.all(roundTokens[round]!.map((token) => stack.post('/v1/spawn', { token }, false)));
            const seen = await stack.waitStarted(users);
            return users.map((u) => seen.get(u)! - t0);
          },
        };
      }),
    );
    await limit.round(['warm']);
    const runners: LatencyRunner[] = [
      ...started.filter((r) => r !== undefined),
      {
        mode: 'limit',
        case: 'limit: child_process.spawn of the same command (a Node process of its own)',
        one: async (i) => (await limit.round([`one-${i}`]))[0]!,
        many: (round) => limit.round(Array.from({ length: AT_ONCE }, (_, i) => `many-${round}-${i}`)),
      },
    ];
    // Each sample, then each round, goes to every runner in turn, a different one first each time.
    const serial = new Map<LatencyRunner, number[]>(runners.map((r) => [r, []]));
    for (let i = 0; i < SERIAL; i++)
      for (let k = 0; k < runners.length; k++) {
        const runner = runners[(i + k) % runners.length]!;
        serial.get(runner)!.push(await runner.one(i));
      }
    const together = new Map<LatencyRunner, number[]>(runners.map((r) => [r, []]));
    for (let round = 0; round < ROUNDS; round++)
      for (let k = 0; k < runners.length; k++) {
        const runner = runners[(round + k) % runners.length]!;
        together.get(runner)!.push(...(await runner.many(round)));
      }
    for (const [callers, samples] of [
      [1, serial],
      [AT_ONCE, together],
    ] as const)
      for (const runner of runners)
        result.latency.push({ case: runner.case, mode: runner.mode, callers, ...percentiles(samples.get(runner)!) });
  } finally {
    limit.stop();
    await Promise.all(stacks.map((s) => s.stop()));
  }
  const row = (mode: LatencyMode, callers: number): LatencyRow | undefined =>
    result.latency.find((r) => r.mode === mode && r.callers === callers);
  for (const [what, on, off] of [
    ['containment on − off (namespace − group)', 'namespace', 'group'],
    ['caps on − off (namespace with caps − namespace)', 'caps', 'namespace'],
  ] as const)
    for (const callers of [1, AT_ONCE])
      for (const percentile of ['p50', 'p99'] as const) {
        const a = row(on, callers);
        const b = row(off, callers);
        if (a === undefined || b === undefined) continue;
        result.cost.push({
          what,
          callers,
          percentile,
          on: a[percentile],
          off: b[percentile],
          added: a[percentile] - b[percentile],
          ratio: a[percentile] / b[percentile],
        });
      }

  // 2. Host RSS per running session: one host, idle, then 100 sessions of `exec sleep 600`.
  const RUNNING = 100;
  const memory = new Stack(redisUrl, 'benchrss', 'exec sleep 600');
  try {
    await memory.startApi();
    const { host, runtimePid, containment } = await memory.addHost('rss-1', RUNNING);
    result.rssPerSession.containment = containment;
    await sleep(1000);
    const tree = (): number => rss(host.child.pid!) + rss(runtimePid);
    const before = tree();
    const users = Array.from({ length: RUNNING }, (_, i) => `rss-${i}`);
    const tokens = await memory.tokens(users);
    await Promise.all(tokens.map((token) => memory.post('/v1/spawn', { token }, false)));
    await memory.waitStarted(users);
    await sleep(1000);
    const after = tree();
    result.rssPerSession = {
      ...result.rssPerSession,
      bytes: (after - before) / RUNNING,
      sessions: RUNNING,
      before,
      after,
    };
  } finally {
    await memory.stop();
  }

  // 3. Starts per second on one host: the sessions are queued first, then the host starts and takes them.
  const STARTS = quick ? 100 : 300;
  const starts = new Stack(redisUrl, 'benchstarts', 'exec sleep 600');
  try {
    // Queued before any host runs: admitted without the capacity check, as for a pool that scales on its queue.
    await starts.startApi({ CAPACITY_CHECK: 'false' });
    const users = Array.from({ length: STARTS }, (_, i) => `start-${i}`);
    const tokens = await starts.tokens(users);
    for (let i = 0; i < tokens.length; i += 50)
      await Promise.all(tokens.slice(i, i + 50).map((token) => starts.post('/v1/spawn', { token }, false)));
    result.startsPerSecond.containment = (await starts.addHost('starts-1', STARTS)).containment;
    const seen = [...(await starts.waitStarted(users, 60_000)).values()].sort((a, b) => a - b);
    result.startsPerSecond.ours = ((seen.length - 1) * 1000) / (seen.at(-1)! - seen[0]!);
    result.startsPerSecond.sessions = STARTS;
  } finally {
    await starts.stop();
  }
  // The limit: the same command spawned in a loop by one Node.js process, each in a group of its own.
  const loopFile = join(mkdtempSync(join(tmpdir(), 'cq-bench-loop-')), 'started.log');
  const loop: ChildProcess[] = [];
  for (let i = 0; i < STARTS; i++) {
    loop.push(
      spawn('/bin/sh', ['-c', `echo "loop-${i} $(date +%s%N)" >> ${loopFile}; exec sleep 600`], {
        stdio: 'ignore',
        detached: true,
      }),
    );
  }
  const giveUp = performance.now() + 30_000;
  while (!existsSync(loopFile) || readStarted(loopFile).size < STARTS) {
    if (performance.now() > giveUp) break;
    await sleep(5);
  }
  const loopTimes = [...readStarted(loopFile).values()].sort((a, b) => a - b);
  result.startsPerSecond.bare = ((loopTimes.length - 1) * 1000) / (loopTimes.at(-1)! - loopTimes[0]!);
  for (const child of loop) if (child.pid !== undefined) process.kill(-child.pid, 'SIGKILL');
  return result;
}
