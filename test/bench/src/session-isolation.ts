// What isolating a session costs (issue 44): spawn → session started on the built API and worker hosts,
// one caller and 20 at once, for each way a host can keep a session apart, side by side in one run; the
// limit, the same wrappers started minimally from a Node process of their own; host memory per running
// session. `npm run bench -- --only isolation` runs it alone.
//
// One API, one host per way (each in a pool of its own, so a spawn goes to the host of its pool):
//   - namespace-only: `unshare --pid --fork --mount-proc` and the init, the containment from before
//     bubblewrap (a host whose PATH is the machine's, bwrap left out: symlinks to every other tool);
//   - mounts: bwrap with SESSION_NETWORK=host (PID, mount, IPC, UTS and cgroup namespaces; the host's
//     files read-only, its own /tmp and /dev/shm), the host's network;
//   - full: the defaults (bwrap, SESSION_NETWORK none: a network namespace with only loopback);
//   - egress: SESSION_NETWORK=egress (a network namespace made before bwrap, its routes, slirp4netns
//     started by the runtime per session: the session waits for it). The sessions here send nothing;
//   - cgroups: full plus SESSION_CPUS=1, SESSION_MEMORY_MB=256, SESSION_PIDS_MAX=64.
// Sessions write "<user> <epoch ns>" to an observer FIFO first thing (sessions.ts's Observer): the
// figures run from just before POST /v1/spawn to that instant, in the session's own clock. Every sample
// and every round goes to each way and each limit in turn, a different one first each time.
// Where the time goes: each start split at the host's order to start it (its log line); the CPU each
// process spent per start (/proc: the session's processes are the runtime's children, counted when it
// reaps them); bwrap's options added one at a time to a minimal sandbox. Then host memory per running
// session: RSS of the host and its runtime (and the slirp4netns processes), N sessions running − none,
// ÷ N.
import { TICK_MS, cpuOf, descendants } from './proc.js';
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync, symlinkSync } from 'node:fs';
import { delimiter, join } from 'node:path';
import { loadavg, tmpdir } from 'node:os';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { setTimeout as sleep } from 'node:timers/promises';
import { probeContainment } from '@cq/worker';
import { Observer, Stack, percentiles, rss, type Proc } from './sessions.js';

/** A way of keeping sessions apart, as a host runs it. */
interface Way {
  readonly mode: string;
  readonly case: string;
  readonly env: Record<string, string>;
  /** What the host's start line must say, or the row measures something else. */
  readonly network: string;
  readonly filesystem: 'private' | 'shared';
}

const BWRAP_MINIMAL = ['bwrap', '--unshare-all', '--ro-bind', '/', '/', '--tmpfs', '/tmp'];
const BWRAP_MINIMAL_HOST_NET = ['bwrap', '--unshare-all', '--share-net', '--ro-bind', '/', '/', '--tmpfs', '/tmp'];

/** A limit: the same command spawned from a small Node process (spawn-limit.ts), wrapped or not. */
interface LimitWay {
  readonly mode: string;
  readonly case: string;
  readonly wrap?: readonly string[];
  /** Spawned instead of the command: the figure is spawn → exit. */
  readonly argv?: readonly string[];
  /** bwrap's own init (no --as-pid-1) reaps the command: its CPU time is not passed on to be counted. */
  readonly cpuUncounted?: true;
}

/**
 * The wrappers our hosts put before a session's `sh -c` (setpriv, the namespaces, the init), as the
 * worker's own plan builds them for this machine: with bubblewrap (the defaults), or without it (a probe
 * that finds no bwrap). `dir` is the SESSION_DIR they bind.
 */
function ourWrappers(bubblewrap: boolean, network: 'none' | 'host', dir: string): string[] {
  const probe = {
    uid: process.getuid?.() ?? 0,
    run(argv: readonly string[]) {
      if (!bubblewrap && argv[0] === 'bwrap')
        return { status: null, stdout: '', stderr: '', error: 'ENOENT' as string | undefined };
      const r = spawnSync(argv[0]!, argv.slice(1), { stdio: ['ignore', 'pipe', 'pipe'], timeout: 5000 });
      return { status: r.status, stdout: String(r.stdout ?? ''), stderr: String(r.stderr ?? '') };
    },
  };
  const { plan } = probeContainment(
    {
      containment: 'namespace',
      memoryMb: undefined,
      pidsMax: undefined,
      user: undefined,
      network: bubblewrap ? network : 'auto',
      tmpMb: 256,
      sessionsDir: join(tmpdir(), 'cq-sessions'),
    },
    probe,
  );
  const argv = plan.argv(['/bin/sh', '-c', 'COMMAND'], undefined, dir);
  return argv.slice(0, argv.lastIndexOf('/bin/sh'));
}

/** A minimal sandbox, then each of the options our hosts give bwrap added alone (isolation.ts's isolationArgv). */
function optionWays(dir: string): LimitWay[] {
  // With --as-pid-1, as ours: bwrap's own init would not pass the CPU time of the processes it reaps on.
  const base = ['bwrap', '--ro-bind', '/', '/', '--unshare-pid', '--as-pid-1'];
  const added: Array<[string, string[]]> = [
    ['--unshare-ipc --unshare-uts --unshare-cgroup-try', ['--unshare-ipc', '--unshare-uts', '--unshare-cgroup-try']],
    ['--die-with-parent', ['--die-with-parent']],
    ['--cap-drop ALL', ['--cap-drop', 'ALL']],
    ['--proc /proc', ['--proc', '/proc']],
    ['--dev /dev', ['--dev', '/dev']],
    ['--tmpfs /tmp', ['--tmpfs', '/tmp']],
    ['--tmpfs /dev/shm', ['--tmpfs', '/dev/shm']],
    ['--bind DIR DIR --chdir DIR', ['--bind', dir, dir, '--chdir', dir]],
    ['--unshare-net', ['--unshare-net']],
  ];
  const ours = ourWrappers(true, 'none', dir);
  return [
    { mode: 'option-none', case: '`sh -c` alone (no sandbox)' },
    { mode: 'option-env', case: '`env sh -c`: one exec more (as each `env` and `setpriv` of ours)', wrap: ['env'] },
    {
      mode: 'option-init',
      case: 'our init alone (`sh -c INIT`, which forks `env --default-signal` → `sh -c`)',
      wrap: ours.slice(ours.indexOf('/bin/sh')),
    },
    { mode: 'option-base', case: '`bwrap --ro-bind / / --unshare-pid --as-pid-1`', wrap: base },
    ...added.map(([name, args], i) => ({ mode: `option-${i}`, case: `… + \`${name}\``, wrap: [...base, ...args] })),
    {
      mode: 'option-all',
      case: 'bwrap with all our options (none of setpriv, env or the init)',
      wrap: ours.slice(ours.indexOf('bwrap'), ours.indexOf('--', ours.indexOf('bwrap')) + 1),
    },
  ];
}

function limitWays(dir: string): LimitWay[] {
  return [
    { mode: 'limit-sh', case: 'limit: `sh -c` of the same command (no containment)' },
    {
      mode: 'limit-unshare',
      case: 'limit: `unshare --pid --fork sh -c` of the same command',
      wrap: ['unshare', '--pid', '--fork'],
    },
    {
      mode: 'limit-bwrap-host-net',
      cpuUncounted: true,
      case: 'limit: `bwrap --unshare-all --share-net --ro-bind / / --tmpfs /tmp sh -c` of the same command',
      wrap: BWRAP_MINIMAL_HOST_NET,
    },
    {
      mode: 'limit-bwrap',
      cpuUncounted: true,
      case: 'limit: `bwrap --unshare-all --ro-bind / / --tmpfs /tmp sh -c` of the same command',
      wrap: BWRAP_MINIMAL,
    },
    {
      mode: 'limit-ours-namespace-only',
      case: 'limit: our namespace-only wrappers (setpriv, unshare --pid --fork --mount-proc --kill-child, the init) before the same `sh -c`, no host',
      wrap: ourWrappers(false, 'host', dir),
    },
    {
      mode: 'limit-ours-mounts',
      case: 'limit: our wrappers with SESSION_NETWORK=host (bwrap with our options but --unshare-net) before the same `sh -c`, no host',
      wrap: ourWrappers(true, 'host', dir),
    },
    {
      mode: 'limit-ours-full',
      case: 'limit: our full-isolation wrappers (setpriv, bwrap with our options, the init) before the same `sh -c`, no host',
      wrap: ourWrappers(true, 'none', dir),
    },
    {
      mode: 'limit-unshare-true',
      case: 'limit: `unshare --pid --fork true`, spawn → exit',
      argv: ['unshare', '--pid', '--fork', 'true'],
    },
    {
      mode: 'limit-bwrap-true',
      cpuUncounted: true,
      case: 'limit: `bwrap --unshare-all --ro-bind / / --tmpfs /tmp true`, spawn → exit',
      argv: [...BWRAP_MINIMAL, 'true'],
    },
  ];
}

export interface IsolationRow {
  mode: string;
  case: string;
  callers: number;
  p50: number;
  p99: number;
  n: number;
  /** Ours: spawn → the host's order to start the session (its log line, ms precision). */
  toOrder?: { p50: number; p99: number };
  /** Ours: that order → the session's first command. */
  fromOrder?: { p50: number; p99: number };
}

/** CPU time per session start, ms, over the latency rounds (one caller and at once): who spent it. */
export interface IsolationCpu {
  mode: string;
  starts: number;
  /** The session's processes, the wrappers, the sandbox's set-up and the command (and, with egress, slirp4netns): the runtime's children. */
  session: number;
  /** The session runtime itself (orders, directories, spawning, pipes). */
  runtime: number;
  /** The worker host (the claim, the lease, the start, the end). */
  host: number;
}

/** One of bwrap's options, added alone to a minimal sandbox, started from the limit process. */
export interface IsolationOption {
  case: string;
  p50: number;
  p99: number;
  n: number;
  cpuMs: number;
}

/** Host memory per running session of one way: what the host side holds beyond the session's command. */
export interface IsolationMemory {
  mode: string;
  sessions: number;
  /** RSS of the host and its session runtime, after − before, ÷ sessions. */
  hostRuntimeBytes: number;
  /** RSS of the slirp4netns processes ÷ sessions (egress). */
  slirpBytes: number;
  /** Proportional set size of each session's wrapper processes (bwrap's or unshare's monitor, the init `sh`). */
  wrapperPssBytes: number;
  /** The wrapper processes by name, per session. */
  wrappers: Record<string, number>;
}

export interface IsolationPart {
  what: string;
  callers: number;
  percentile: 'p50' | 'p99';
  with: number;
  without: number;
}

export interface IsolationBench {
  latency: IsolationRow[];
  unavailable: Array<{ mode: string; reason: string }>;
  memory: IsolationMemory[];
  parts: IsolationPart[];
  /** Ours: CPU per start by process; the limits: CPU per start of their processes (`session`). */
  cpu: IsolationCpu[];
  /** The API's CPU per session started, all ways together (one API serves them all). */
  apiCpuMs: number;
  options: IsolationOption[];
  /** Whether the cgroups way's host made a cpu cgroup (SESSION_CPUS), or why not. */
  cpus: string;
  /** The machine's 1-minute load average at the section's start and end (other work on the 2 cores). */
  load: { start: number; end: number };
  serial: number;
  rounds: number;
  atOnce: number;
}

/** A PATH like this process's without bwrap: one directory of symlinks to every other program on it. */
function pathWithoutBwrap(): string {
  mkdirSync('/var/tmp/cq-bench', { recursive: true, mode: 0o755 });
  const dir = mkdtempSync('/var/tmp/cq-bench/path-without-bwrap-');
  const linked = new Set<string>(['bwrap']);
  for (const from of (process.env['PATH'] ?? '').split(delimiter)) {
    let names: string[];
    try {
      names = readdirSync(from);
    } catch {
      continue;
    }
    for (const name of names) {
      if (linked.has(name)) continue;
      linked.add(name);
      symlinkSync(join(from, name), join(dir, name));
    }
  }
  return dir;
}

/** The limit process (spawn-limit.ts), its commands writing to an observer of their own. */
class Limit {
  readonly observer = new Observer('limit');
  readonly #child: ChildProcess;
  readonly #answers: AsyncIterator<string>;

  constructor() {
    this.#child = spawn(process.execPath, [fileURLToPath(new URL('./spawn-limit.js', import.meta.url))], {
      env: {
        PATH: process.env['PATH'] ?? '',
        LIMIT_COMMAND: `echo "$USER_ID $(date +%s%N)" >> ${this.observer.fifo}; exit 0`,
      },
      stdio: ['pipe', 'pipe', 'inherit'],
    });
    this.#answers = createInterface({ input: this.#child.stdout! })[Symbol.asyncIterator]();
  }

  /** CPU ms the processes of each way's rounds used, and how many were started. */
  readonly cpu = new Map<string, { ms: number; starts: number }>();

  /** Spawns one per user at once: each one's spawn → started (its own timestamp), or spawn → exit with `argv`. */
  async round(way: LimitWay, users: readonly string[]): Promise<number[]> {
    this.#child.stdin!.write(`${JSON.stringify({ users, wrap: way.wrap, argv: way.argv })}\n`);
    const answer = await this.#answers.next();
    if (answer.done === true) throw new Error('the spawn limit process exited');
    const { t0, exited, cpuTicks } = JSON.parse(answer.value) as { t0: number; exited: number[]; cpuTicks: number };
    const cpu = this.cpu.get(way.mode) ?? { ms: 0, starts: 0 };
    this.cpu.set(way.mode, { ms: cpu.ms + cpuTicks * TICK_MS, starts: cpu.starts + users.length });
    if (way.argv !== undefined) return exited;
    const seen = await this.observer.waitStarted(users);
    return users.map((u) => seen.get(u)! - t0);
  }

  stop(): void {
    this.#child.stdin!.end();
    this.observer.stop();
  }
}

interface Runner {
  mode: string;
  case: string;
  one(i: number): Promise<number>;
  many(round: number): Promise<number[]>;
}

function pss(pid: number): number {
  try {
    return Number(/^Pss:\s+(\d+) kB/m.exec(readFileSync(`/proc/${pid}/smaps_rollup`, 'utf8'))?.[1] ?? 0) * 1024;
  } catch {
    return 0;
  }
}

/** Whether the host `pid` made the cpu cgroup of its sessions (cgroups v1: in the cpu hierarchy; v2: cpu enabled below it). */
function cpuCgroupOf(pid: number): boolean {
  const own = readFileSync(`/proc/${pid}/cgroup`, 'utf8');
  const tag = `cq-worker-${pid}`;
  const v1 = /^\d+:(?:[^:]*,)?cpu(?:,[^:]*)?:(.*)$/m.exec(own)?.[1];
  if (v1 !== undefined && existsSync('/sys/fs/cgroup/cpu')) return existsSync(join('/sys/fs/cgroup/cpu', v1, tag));
  const v2 = /^0::(.*)$/m.exec(own)?.[1] ?? '/';
  try {
    return readFileSync(join('/sys/fs/cgroup', v2, tag, 'cgroup.subtree_control'), 'utf8').includes('cpu');
  } catch {
    return false;
  }
}

export async function benchIsolation(redisUrl: string, quick: boolean): Promise<IsolationBench> {
  const SERIAL = quick ? 5 : 200;
  const ROUNDS = quick ? 1 : 10;
  const AT_ONCE = 20;
  const HELD = quick ? 5 : 100;
  const OPTION_SAMPLES = quick ? 2 : 100;
  // Before and after starting the sessions whose memory is read: the host idle, then the sessions settled.
  const SETTLE_MS = quick ? 200 : 1000;
  const SLOTS = 128;
  const made = [pathWithoutBwrap()];
  const ways: Way[] = [
    {
      mode: 'namespace-only',
      case: 'namespace-only containment (unshare; bwrap not on the PATH)',
      env: { SESSION_CONTAINMENT: 'namespace', PATH: made[0]! },
      network: 'host',
      filesystem: 'shared',
    },
    {
      mode: 'mounts',
      case: 'bwrap, SESSION_NETWORK=host (namespaces and mounts, the host network)',
      env: { SESSION_NETWORK: 'host' },
      network: 'host',
      filesystem: 'private',
    },
    {
      mode: 'full',
      case: 'full isolation: the defaults (bwrap, SESSION_NETWORK none)',
      env: {},
      network: 'none',
      filesystem: 'private',
    },
    {
      mode: 'egress',
      case: 'bwrap, SESSION_NETWORK=egress (network namespace + slirp4netns)',
      env: { SESSION_NETWORK: 'egress' },
      network: 'egress',
      filesystem: 'private',
    },
    {
      mode: 'cgroups',
      case: 'full isolation + SESSION_CPUS=1, SESSION_MEMORY_MB=256, SESSION_PIDS_MAX=64',
      env: { SESSION_CPUS: '1', SESSION_MEMORY_MB: '256', SESSION_PIDS_MAX: '64' },
      network: 'none',
      filesystem: 'private',
    },
  ];
  const result: IsolationBench = {
    latency: [],
    unavailable: [],
    memory: [],
    parts: [],
    cpu: [],
    apiCpuMs: 0,
    options: [],
    cpus: 'not measured',
    load: { start: loadavg()[0]!, end: 0 },
    serial: SERIAL,
    rounds: ROUNDS,
    atOnce: AT_ONCE,
  };
  // Sessions whose user is held-* keep running (the memory figures); the others exit once they said so.
  const stack = new Stack(redisUrl, 'benchisolation', 'case "$USER_ID" in held-*) exec sleep 600;; esac; exit 0');
  const limit = new Limit();
  const hosts = new Map<string, { host: Proc; runtimePid: number }>();
  try {
    await stack.startApi();
    for (const way of ways) {
      const started = await startHost(stack, way, SLOTS).catch((err: Error) => err);
      if (started instanceof Error && way.mode === 'cgroups' && 'SESSION_CPUS' in way.env) {
        // A host that cannot cap CPU here: measured without it, and said.
        result.cpus = `SESSION_CPUS refused here: ${started.message}`;
        const { SESSION_CPUS: _, ...env } = way.env;
        const without = { ...way, env, case: way.case.replace('SESSION_CPUS=1, ', '') };
        ways.splice(ways.indexOf(way), 1, without);
        const again = await startHost(stack, without, SLOTS).catch((err: Error) => err);
        if (again instanceof Error) result.unavailable.push({ mode: way.mode, reason: again.message });
        else hosts.set(way.mode, again);
        continue;
      }
      if (started instanceof Error) result.unavailable.push({ mode: way.mode, reason: started.message });
      else hosts.set(way.mode, started);
    }
    const cgroupsHost = hosts.get('cgroups');
    if (cgroupsHost !== undefined && result.cpus === 'not measured')
      result.cpus = cpuCgroupOf(cgroupsHost.host.child.pid!)
        ? 'SESSION_CPUS=1 applied (a cpu cgroup per session)'
        : 'SESSION_CPUS=1 accepted but no cpu cgroup of the host found (the row may have the memory and pids caps only)';
    let measured = ways.filter((w) => hosts.has(w.mode));
    // Where the time of ours goes: spawn → the host orders the start (its "session started" line: the
    // API, the admission, the queue, the claim) and the order → the session's first command (the
    // runtime, the wrappers, the sandbox). The host's clock is the log line's, to the millisecond.
    const splits = new Map<string, { toOrder: number[]; fromOrder: number[] }>();
    const split = async (mode: string, callers: number, host: Proc, user: string, t0: number, started: number) => {
      const line = await host.waitFor((l) => l['msg'] === 'session started' && l['userId'] === user, 5000);
      const key = `${mode}/${callers}`;
      if (!splits.has(key)) splits.set(key, { toOrder: [], fromOrder: [] });
      splits.get(key)!.toOrder.push(Number(line['time']) - t0);
      splits.get(key)!.fromOrder.push(started - Number(line['time']));
    };
    const tokens = async (users: string[], pool: string): Promise<string[]> =>
      Promise.all(users.map(async (userId) => String((await stack.post('/v1/tokens', { userId, pool }))['token'])));
    const runners: Runner[] = [];
    for (const way of measured) {
      const pool = way.mode;
      // Warm-up: the first spawns load scripts and open connections. A way whose sessions do not start
      // is left out, with what its first session said.
      const warm = Array.from({ length: quick ? 1 : 10 }, (_, i) => `${pool}-warm-${i}`);
      const warmed = await (async () => {
        for (const [i, token] of (await tokens(warm, pool)).entries()) {
          await stack.post('/v1/spawn', { token }, false);
          await stack.waitStarted([warm[i]!], 10_000);
        }
      })().catch((err: Error) => err);
      if (warmed instanceof Error) {
        result.unavailable.push({ mode: way.mode, reason: await whyNotStarted(stack, hosts.get(way.mode)!.host) });
        hosts.delete(way.mode);
        continue;
      }
      const serialUsers = Array.from({ length: SERIAL }, (_, i) => `${pool}-one-${i}`);
      const serialTokens = await tokens(serialUsers, pool);
      const roundUsers = Array.from({ length: ROUNDS }, (_, r) =>
        Array.from({ length: AT_ONCE }, (_, i) => `${pool}-many-${r}-${i}`),
      );
      const roundTokens = await Promise.all(roundUsers.map((users) => tokens(users, pool)));
      const { host } = hosts.get(way.mode)!;
      runners.push({
        mode: way.mode,
        case: `ours, ${way.case}`,
        one: async (i) => {
          const t0 = performance.timeOrigin + performance.now();
          await stack.post('/v1/spawn', { token: serialTokens[i] }, false);
          const started = (await stack.waitStarted([serialUsers[i]!])).get(serialUsers[i]!)!;
          await split(way.mode, 1, host, serialUsers[i]!, t0, started);
          return started - t0;
        },
        many: async (round) => {
          const users = roundUsers[round]!;
          // The sessions before have ended and their slots come back (with the host's next heartbeat).
          while (((await stack.get(`/v1/hosts?pool=${pool}`))['freeSlots'] as number) < SLOTS) await sleep(20);
          const t0 = performance.timeOrigin + performance.now();
          await Promise.all(roundTokens[round]!.map((token) => stack.post('/v1/spawn', { token }, false)));
          const seen = await stack.waitStarted(users);
          for (const u of users) await split(way.mode, AT_ONCE, host, u, t0, seen.get(u)!);
          return users.map((u) => seen.get(u)! - t0);
        },
      });
    }
    measured = measured.filter((w) => hosts.has(w.mode));
    const limitDir = mkdtempSync('/var/tmp/cq-bench/limit-session-dir-');
    made.push(limitDir);
    const limits = limitWays(limitDir);
    for (const way of limits) {
      await limit.round(way, [`${way.mode}-warm`]);
      runners.push({
        mode: way.mode,
        case: way.case,
        one: async (i) => (await limit.round(way, [`${way.mode}-one-${i}`]))[0]!,
        many: (round) =>
          limit.round(
            way,
            Array.from({ length: AT_ONCE }, (_, i) => `${way.mode}-many-${round}-${i}`),
          ),
      });
    }
    // Host memory per running session, one way after the other, on hosts just started and warmed up
    // (before the latency rounds: what they leave for the garbage collector would blur the figures).
    for (const way of measured.filter((w) => hosts.has(w.mode))) {
      const { host, runtimePid } = hosts.get(way.mode)!;
      await sleep(SETTLE_MS);
      const side = (): { hostRuntime: number; slirp: number; wrappers: Map<string, number> } => {
        const wrappers = new Map<string, number>();
        let slirp = 0;
        for (const { pid, name } of descendants(runtimePid)) {
          if (name === 'slirp4netns') slirp += rss(pid);
          else if (name !== 'sleep') wrappers.set(name, (wrappers.get(name) ?? 0) + pss(pid));
        }
        return { hostRuntime: rss(host.child.pid!) + rss(runtimePid), slirp, wrappers };
      };
      const before = side();
      const users = Array.from({ length: HELD }, (_, i) => `held-${way.mode}-${i}`);
      const held = await tokens(users, way.mode);
      await Promise.all(held.map((token) => stack.post('/v1/spawn', { token }, false)));
      await stack.waitStarted(users);
      await sleep(SETTLE_MS);
      const after = side();
      const wrappers = Object.fromEntries(
        [...after.wrappers].map(([name, bytes]) => [name, (bytes - (before.wrappers.get(name) ?? 0)) / HELD]),
      );
      result.memory.push({
        mode: way.mode,
        sessions: HELD,
        hostRuntimeBytes: (after.hostRuntime - before.hostRuntime) / HELD,
        slirpBytes: (after.slirp - before.slirp) / HELD,
        wrapperPssBytes: Object.values(wrappers).reduce((a, b) => a + b, 0),
        wrappers,
      });
      // Ended, and their slots back, before the next way's figures.
      await Promise.all(users.map((u) => stack.request('DELETE', `/v1/users/${u}/session`, undefined, true)));
      while (((await stack.get(`/v1/hosts?pool=${way.mode}`))['freeSlots'] as number) < SLOTS) await sleep(50);
    }
    const cpuNow = (): Map<string, { host: number; runtime: number; session: number }> =>
      new Map(
        [...hosts].map(([mode, { host, runtimePid }]) => {
          const runtime = cpuOf(runtimePid);
          return [mode, { host: cpuOf(host.child.pid!).self, runtime: runtime.self, session: runtime.children }];
        }),
      );
    const cpuBefore = cpuNow();
    limit.cpu.clear();
    const apiBefore = cpuOf(stack.api.child.pid!).self;
    const serial = new Map<Runner, number[]>(runners.map((r) => [r, []]));
    for (let i = 0; i < SERIAL; i++)
      for (let k = 0; k < runners.length; k++) {
        const runner = runners[(i + k) % runners.length]!;
        serial.get(runner)!.push(await runner.one(i));
      }
    const together = new Map<Runner, number[]>(runners.map((r) => [r, []]));
    for (let round = 0; round < ROUNDS; round++)
      for (let k = 0; k < runners.length; k++) {
        const runner = runners[(round + k) % runners.length]!;
        together.get(runner)!.push(...(await runner.many(round)));
      }
    // The last sessions reaped, their CPU counted.
    await sleep(500);
    const cpuAfter = cpuNow();
    const starts = SERIAL + ROUNDS * AT_ONCE;
    result.apiCpuMs = (cpuOf(stack.api.child.pid!).self - apiBefore) / (starts * cpuAfter.size);
    for (const [mode, after] of cpuAfter) {
      const before = cpuBefore.get(mode)!;
      result.cpu.push({
        mode,
        starts,
        session: (after.session - before.session) / starts,
        runtime: (after.runtime - before.runtime) / starts,
        host: (after.host - before.host) / starts,
      });
    }
    const uncounted = new Set(limits.flatMap((w) => (w.cpuUncounted ? [w.mode] : [])));
    for (const [mode, { ms, starts: n }] of limit.cpu)
      if (!uncounted.has(mode)) result.cpu.push({ mode, starts: n, session: ms / n, runtime: 0, host: 0 });
    for (const [callers, samples] of [
      [1, serial],
      [AT_ONCE, together],
    ] as const)
      for (const runner of runners) {
        const parts = splits.get(`${runner.mode}/${callers}`);
        result.latency.push({
          mode: runner.mode,
          case: runner.case,
          callers,
          ...percentiles(samples.get(runner)!),
          ...(parts === undefined
            ? {}
            : { toOrder: percentiles(parts.toOrder), fromOrder: percentiles(parts.fromOrder) }),
        });
      }

    // bwrap's options one at a time, added to a minimal sandbox: what each of ours costs.
    const options = optionWays(limitDir);
    limit.cpu.clear();
    for (const way of options) await limit.round(way, [`${way.mode}-warm`]);
    limit.cpu.clear();
    const optionSamples = new Map<LimitWay, number[]>(options.map((w) => [w, []]));
    for (let i = 0; i < OPTION_SAMPLES; i++)
      for (let k = 0; k < options.length; k++) {
        const way = options[(i + k) % options.length]!;
        optionSamples.get(way)!.push(...(await limit.round(way, [`${way.mode}-${i}`])));
      }
    for (const way of options) {
      const cpu = limit.cpu.get(way.mode)!;
      result.options.push({ case: way.case, ...percentiles(optionSamples.get(way)!), cpuMs: cpu.ms / cpu.starts });
    }
  } finally {
    limit.stop();
    await stack.stop();
    for (const dir of made) rmSync(dir, { recursive: true, force: true });
  }
  result.load.end = loadavg()[0]!;
  const row = (mode: string, callers: number): IsolationRow | undefined =>
    result.latency.find((r) => r.mode === mode && r.callers === callers);
  for (const [what, withMode, withoutMode] of [
    ['mounts: bwrap (SESSION_NETWORK=host) − namespace-only (unshare)', 'mounts', 'namespace-only'],
    ['network namespace: full (none) − mounts (host)', 'full', 'mounts'],
    ['egress helper: egress − full (none)', 'egress', 'full'],
    ['cgroups: full + caps − full', 'cgroups', 'full'],
    ['all of isolation: full − namespace-only', 'full', 'namespace-only'],
    ['limit, bwrap (host network) − unshare --pid --fork', 'limit-bwrap-host-net', 'limit-unshare'],
    ['limit, network namespace: bwrap --unshare-all − with --share-net', 'limit-bwrap', 'limit-bwrap-host-net'],
    ['limit, our wrappers: bwrap (host network) − namespace-only', 'limit-ours-mounts', 'limit-ours-namespace-only'],
    ['limit, our wrappers: network namespace (none − host)', 'limit-ours-full', 'limit-ours-mounts'],
    ['ours − the limit of its wrappers, namespace-only', 'namespace-only', 'limit-ours-namespace-only'],
    ['ours − the limit of its wrappers, full isolation', 'full', 'limit-ours-full'],
  ] as const)
    for (const callers of [1, AT_ONCE])
      for (const percentile of ['p50', 'p99'] as const) {
        const a = row(withMode, callers);
        const b = row(withoutMode, callers);
        if (a !== undefined && b !== undefined)
          result.parts.push({ what, callers, percentile, with: a[percentile], without: b[percentile] });
      }
  return result;
}

/** Why a way's sessions did not start: how its host says the first one ended, and the session's last line of output. */
async function whyNotStarted(stack: Stack, host: Proc): Promise<string> {
  const ended = host.logs.find((l) => l['msg'] === 'session ended');
  if (ended === undefined) return 'its sessions did not start within 10 s';
  const said = (await stack.get(
    `/v1/users/${String(ended['userId'])}/sessions/${String(ended['sessionId'])}/logs`,
  )) as { lines?: Array<{ line: string }> };
  return `its sessions end ${String(ended['state'])} (exit ${String(ended['exitCode'])}) before their command runs: "${said.lines?.at(-1)?.line ?? ''}"`;
}

/** Starts the way's host in a pool of its own; rejects when it refuses, or runs something else than asked. */
async function startHost(stack: Stack, way: Way, slots: number): Promise<{ host: Proc; runtimePid: number }> {
  const { host, runtimePid, containment } = await stack.addHost(`iso-${way.mode}`, slots, {
    POOL: way.mode,
    ...way.env,
  });
  const line = await host.waitFor((l) => typeof l['network'] === 'string' && typeof l['filesystem'] === 'string');
  if (containment !== 'namespace' || line['network'] !== way.network || line['filesystem'] !== way.filesystem)
    throw new Error(
      `asked for ${way.network} network and ${way.filesystem} files, the host runs ${containment} with ${String(line['network'])} and ${String(line['filesystem'])}`,
    );
  return { host, runtimePid };
}

const fmt = (n: number, digits = 1): string =>
  Number.isFinite(n)
    ? n.toLocaleString('en-US', { maximumFractionDigits: digits, minimumFractionDigits: digits })
    : '–';

/** The section's Markdown. */
export function isolationMarkdown(r: IsolationBench): string[] {
  const lines: string[] = [];
  const limitOf = (callers: number): IsolationRow | undefined =>
    r.latency.find((x) => x.mode === 'limit-bwrap' && x.callers === callers);
  lines.push(
    `One API and one worker host per way (built processes, real HTTP, each host in a pool of its own); ${r.serial} spawns one at a time and ${r.rounds} rounds of ${r.atOnce} at once, every sample and round going to each way and each limit in turn. Spawn: just before POST /v1/spawn (or the limit's spawn); started: the session's own timestamp, its first command. The limits: the same command spawned by a Node process of its own under the wrapper named. Load average (1 min) ${fmt(r.load.start, 2)} at the start, ${fmt(r.load.end, 2)} at the end.`,
  );
  lines.push('');
  lines.push(
    '| way | callers | samples | p50 ms | p99 ms | p50 ÷ bwrap limit | p99 ÷ bwrap limit | spawn → host orders the start, p50 / p99 ms | order → started, p50 / p99 ms | CPU ms per start (session processes) |',
  );
  lines.push('| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |');
  const pair = (p: { p50: number; p99: number } | undefined): string =>
    p === undefined ? '–' : `${fmt(p.p50)} / ${fmt(p.p99)}`;
  for (const x of r.latency) {
    const limit = limitOf(x.callers);
    const cpu = r.cpu.find((c) => c.mode === x.mode);
    lines.push(
      `| ${x.case} | ${x.callers} | ${x.n} | ${fmt(x.p50)} | ${fmt(x.p99)} | ${limit === undefined ? '–' : `${fmt(x.p50 / limit.p50, 2)}×`} | ${limit === undefined ? '–' : `${fmt(x.p99 / limit.p99, 2)}×`} | ${pair(x.toOrder)} | ${pair(x.fromOrder)} | ${cpu === undefined ? '–' : fmt(cpu.session)} |`,
    );
  }
  lines.push('');
  lines.push(
    `CPU per start, ms (user + system time from /proc over the latency rounds, ÷ the ${r.serial + r.rounds * r.atOnce} starts of each way; work the kernel does in its own threads, such as a network namespace's teardown, is not in it; – where bwrap's own init, without --as-pid-1, reaps the command and does not pass its time on). The API's share, all ways together: ${fmt(r.apiCpuMs, 2)} ms per session.`,
  );
  lines.push('');
  lines.push(
    '| way | session processes (wrappers, sandbox, command; slirp4netns) | session runtime | worker host | in all, with the API |',
  );
  lines.push('| --- | ---: | ---: | ---: | ---: |');
  for (const c of r.cpu.filter((x) => !x.mode.startsWith('limit')))
    lines.push(
      `| ${c.mode} | ${fmt(c.session, 2)} | ${fmt(c.runtime, 2)} | ${fmt(c.host, 2)} | ${fmt(c.session + c.runtime + c.host + r.apiCpuMs, 2)} |`,
    );
  lines.push('');
  const base = r.options.find((o) => o.case.startsWith('`bwrap'));
  lines.push(
    "bwrap's options one at a time: a minimal sandbox (`bwrap --ro-bind / / --unshare-pid --as-pid-1`), then each option our hosts give it added alone, started by the limit process before the same `sh -c`, one at a time, interleaved:",
  );
  lines.push('');
  lines.push('| wrapper | samples | p50 ms | p99 ms | p50 − minimal sandbox, ms | CPU ms per start |');
  lines.push('| --- | ---: | ---: | ---: | ---: | ---: |');
  for (const o of r.options)
    lines.push(
      `| ${o.case} | ${o.n} | ${fmt(o.p50)} | ${fmt(o.p99)} | ${base === undefined ? '–' : fmt(o.p50 - base.p50)} | ${fmt(o.cpuMs, 2)} |`,
    );
  lines.push('');
  for (const { mode, reason } of r.unavailable) lines.push(`Not measured here: ${mode} (${reason}).`);
  lines.push(`CPU cap: ${r.cpus}.`);
  lines.push('');
  lines.push(
    `| what each part costs: added ms (with − without) | one caller p50 | one caller p99 | ${r.atOnce} at once p50 | ${r.atOnce} at once p99 |`,
  );
  lines.push('| --- | ---: | ---: | ---: | ---: |');
  for (const what of new Set(r.parts.map((p) => p.what))) {
    const cell = (callers: number, percentile: 'p50' | 'p99'): string => {
      const p = r.parts.find((x) => x.what === what && x.callers === callers && x.percentile === percentile);
      return p === undefined ? '–' : fmt(p.with - p.without);
    };
    lines.push(
      `| ${what} | ${cell(1, 'p50')} | ${cell(1, 'p99')} | ${cell(r.atOnce, 'p50')} | ${cell(r.atOnce, 'p99')} |`,
    );
  }
  lines.push('');
  lines.push(
    '| way | running sessions | host + runtime RSS per session, MiB | slirp4netns RSS per session, MiB | in all, MiB | besides: the wrapper processes (Pss) per session, MiB |',
  );
  lines.push('| --- | ---: | ---: | ---: | ---: | ---: |');
  const mib = (b: number): string => fmt(b / 2 ** 20, 2);
  for (const m of r.memory)
    lines.push(
      `| ${m.mode} | ${m.sessions} | ${mib(m.hostRuntimeBytes)} | ${mib(m.slirpBytes)} | ${mib(m.hostRuntimeBytes + m.slirpBytes)} | ${mib(m.wrapperPssBytes)} (${Object.entries(
        m.wrappers,
      )
        .filter(([, b]) => Math.abs(b) >= 1024)
        .map(([name, b]) => `${name} ${mib(b)}`)
        .join(', ')}) |`,
    );
  lines.push('');
  return lines;
}

/** The section's targets (full isolation, the default): p50 ≤ 15 ms and p99 ≤ 60 ms, one caller and 20 at once. */
export function isolationTargets(r: IsolationBench): Array<[string, number, number]> {
  const targets: Array<[string, number, number]> = [];
  for (const x of r.latency.filter((l) => l.mode === 'full')) {
    const who = x.callers === 1 ? 'one caller' : `${x.callers} at once`;
    targets.push([`spawn → started, full isolation, ${who}, p50 ms`, x.p50, 15]);
    targets.push([`spawn → started, full isolation, ${who}, p99 ms`, x.p99, 60]);
  }
  const full = r.memory.find((m) => m.mode === 'full');
  if (full !== undefined)
    targets.push([
      'host RSS per running session, full isolation (host + runtime), MiB',
      full.hostRuntimeBytes / 2 ** 20,
      2,
    ]);
  return targets;
}
