import { spawn, type ChildProcess } from 'node:child_process';
import { closeSync, openSync, readFileSync, readdirSync, readlinkSync } from 'node:fs';
import { once } from 'node:events';
import { fileURLToPath } from 'node:url';
import { cleanUp, until } from '@cq/test-harness';

/** Every process a test started that may still run; all are killed when the test file ends. */
const running = new Set<ChildProcess>();
/** Processes started in a process group of their own: the whole group is killed. */
const leaders = new Set<ChildProcess>();
const killAll = (): void => {
  for (const child of running) {
    if (child.exitCode !== null || child.signalCode !== null) continue;
    if (leaders.has(child) && child.pid !== undefined) {
      try {
        process.kill(-child.pid, 'SIGKILL');
        continue;
      } catch {
        // fall through to the process alone
      }
    }
    child.kill('SIGKILL');
  }
};
cleanUp(killAll);
process.on('exit', killAll);

/** Kills `child` with the test file's other processes (at its end, or when the test process exits). */
export function track(child: ChildProcess): ChildProcess {
  running.add(child);
  child.once('exit', () => running.delete(child));
  return child;
}

/** Repository root. */
export const ROOT = fileURLToPath(new URL('../../', import.meta.url));

/** A process started by a test, with its JSON log lines. */
export interface Started {
  readonly child: ChildProcess;
  readonly logs: Array<Record<string, unknown>>;
  readonly stderr: string[];
  /** Resolves with the first log line for which `match` is true (or rejects after `timeoutMs`). */
  waitForLog(match: (line: Record<string, unknown>) => boolean, timeoutMs?: number): Promise<Record<string, unknown>>;
  /** Sends `signal` (SIGTERM by default) and resolves with the exit code once the process has exited. */
  stop(signal?: NodeJS.Signals): Promise<number | null>;
  exited(): Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
}

/** Options of {@link startNode}. */
export interface StartOptions {
  /**
   * Start it in a process group (and session) of its own, as a process manager does, so that the
   * test can signal the whole group without reaching the test runner. @defaultValue false
   */
  ownGroup?: boolean;
  /** Its open-file limit (soft and hard, as `ulimit -n` sets it), through util-linux's `prlimit`. */
  nofile?: number;
}

/** Starts `node <script>` with `env` added to a clean environment; killed (if still running) after the file's tests. */
export function startNode(script: string, env: Record<string, string>, options: StartOptions = {}): Started {
  // prlimit sets the limit and execs node: the child's pid is node's.
  const [command, args] =
    options.nofile === undefined
      ? [process.execPath, [script]]
      : ['prlimit', [`--nofile=${options.nofile}:${options.nofile}`, '--', process.execPath, script]];
  const child = spawn(command, args, {
    cwd: ROOT,
    // The harness's Redis servers keep nothing on disk (throwaways): the processes are told to accept
    // that, as they refuse it otherwise. A test of that refusal sets REDIS_ACCEPT_RISKS itself.
    env: { PATH: process.env['PATH'] ?? '', REDIS_ACCEPT_RISKS: 'no-persistence', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
    detached: options.ownGroup ?? false,
  });
  if (options.ownGroup === true) leaders.add(child);
  const logs: Array<Record<string, unknown>> = [];
  const stderr: string[] = [];
  const waiters: Array<{
    match: (line: Record<string, unknown>) => boolean;
    resolve: (line: Record<string, unknown>) => void;
  }> = [];
  let buffer = '';
  child.stdout!.on('data', (chunk: Buffer) => {
    buffer += chunk.toString();
    let newline: number;
    while ((newline = buffer.indexOf('\n')) >= 0) {
      const text = buffer.slice(0, newline);
      buffer = buffer.slice(newline + 1);
      let line: Record<string, unknown>;
      try {
        line = JSON.parse(text) as Record<string, unknown>;
      } catch {
        line = { msg: text, unparsed: true };
      }
      logs.push(line);
      for (const waiter of [...waiters]) {
        if (waiter.match(line)) {
          waiters.splice(waiters.indexOf(waiter), 1);
          waiter.resolve(line);
        }
      }
    }
  });
  child.stderr!.on('data', (chunk: Buffer) => stderr.push(chunk.toString()));
  running.add(child);
  const exit = once(child, 'exit').then(([code, signal]) => {
    running.delete(child);
    return { code: code as number | null, signal: signal as NodeJS.Signals | null };
  });
  return {
    child,
    logs,
    stderr,
    waitForLog(match, timeoutMs = 15_000) {
      const found = logs.find(match);
      if (found !== undefined) return Promise.resolve(found);
      return new Promise((resolve, reject) => {
        const timer = setTimeout(
          () => reject(new Error(`no matching log line within ${timeoutMs} ms; stderr: ${stderr.join('')}`)),
          timeoutMs,
        );
        waiters.push({
          match,
          resolve: (line) => {
            clearTimeout(timer);
            resolve(line);
          },
        });
        void exit.then(({ code, signal }) =>
          reject(new Error(`process exited (${code ?? signal}) before the log line; stderr: ${stderr.join('')}`)),
        );
      });
    },
    async stop(signal = 'SIGTERM') {
      if (child.exitCode !== null || child.signalCode !== null) return child.exitCode;
      child.kill(signal);
      return (await exit).code;
    },
    exited: () => exit,
  };
}

/** Starts the built API with `env`; resolves once it listens, with its base URL. */
export async function startApi(
  env: Record<string, string>,
  options: StartOptions = {},
): Promise<Started & { baseUrl: string }> {
  const api = startNode(
    `${ROOT}apps/api/dist/main.js`,
    { HOST: '127.0.0.1', PORT: '0', LOG_LEVEL: 'info', ...env },
    options,
  );
  const line = await api.waitForLog(
    (l) => typeof l['msg'] === 'string' && (l['msg'] as string).startsWith('Server listening at http://127.0.0.1'),
  );
  const baseUrl = /(http:\/\/127\.0\.0\.1:\d+)/.exec(line['msg'] as string)![1]!;
  return Object.assign(api, { baseUrl });
}

/** Starts the built worker host with `env`; resolves once it has started. */
export async function startWorker(env: Record<string, string>, options: StartOptions = {}): Promise<Started> {
  const worker = startNode(`${ROOT}apps/worker/dist/main.js`, { LOG_LEVEL: 'info', ...env }, options);
  await worker.waitForLog((l) => l['msg'] === 'worker host started');
  return worker;
}

/** A process's name, state (`S`, `Z`, ...) and parent, from /proc/<pid>/stat; undefined once it is gone. */
function procStat(pid: number | string): { name: string; state: string; ppid: number } | undefined {
  let stat: string;
  try {
    stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  } catch {
    return undefined; // gone meanwhile
  }
  // The fields after the name (which may hold spaces and parentheses): state, ppid, ...
  const end = stat.lastIndexOf(')');
  const [state, ppid] = stat.slice(end + 2).split(' ');
  return { name: stat.slice(stat.indexOf('(') + 1, end), state: state!, ppid: Number(ppid) };
}

/** True while `pid` is a live process (a zombie waiting to be reaped counts as gone). */
export function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
  } catch {
    return false;
  }
  const stat = procStat(pid);
  return stat !== undefined && stat.state !== 'Z';
}

/** The parent, grandparent, ... of `pid`, up to pid 1 (as this machine sees them); empty once it is gone. */
export function ancestorsOf(pid: number): number[] {
  const ancestors: number[] = [];
  for (let at = pid; at > 1;) {
    const stat = procStat(at);
    if (stat === undefined) break;
    at = stat.ppid;
    ancestors.push(at);
  }
  return ancestors;
}

/** Re-exported for the system tests: polls a condition with a deadline. */
export { until } from '@cq/test-harness';

/**
 * The variable that marks the sessions a test process started (in their environment, `<name>=<its pid>`),
 * so that sessionPids tells them from the same user's sessions of a run beside it.
 */
export const TEST_RUN = 'CQ_TEST_RUN';

/**
 * The pids (as this machine sees them) of every live process of a user's session, found by reading
 * `/proc/<pid>/environ` for the session's USER_ID (and FENCE, when given): the session's own pid is
 * another number inside its PID namespace, and its daemons may have left its process group.
 */
export function sessionPids(userId: string, fence?: number): number[] {
  const ours = `${TEST_RUN}=${process.pid}`;
  return pidsWithEnv(
    [`USER_ID=${userId}`, ...(fence === undefined ? [] : [`FENCE=${fence}`])],
    // A session of the other project's run (the two run at once, with the same user ids) is not ours.
    (environ) => !environ.some((e) => e.startsWith(`${TEST_RUN}=`) && e !== ours),
  );
}

/**
 * The pids of the live processes (zombies aside) whose environment holds every one of `wanted`
 * (`NAME=value`) and that `also` accepts, read from /proc/<pid>/environ: a test finds what runs of a
 * session or of a command by a variable it set.
 */
export function pidsWithEnv(wanted: readonly string[], also: (environ: string[]) => boolean = () => true): number[] {
  const pids: number[] = [];
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    let environ: string[];
    try {
      environ = readFileSync(`/proc/${entry}/environ`, 'latin1').split('\0');
    } catch {
      continue; // gone meanwhile
    }
    if (wanted.every((w) => environ.includes(w)) && also(environ) && alive(Number(entry))) pids.push(Number(entry));
  }
  return pids;
}

/** The SESSION_DIR of a running session, read from its processes' environment in /proc. */
export function sessionDirOf(userId: string, fence: number): string {
  for (const pid of sessionPids(userId, fence)) {
    try {
      const dir = readFileSync(`/proc/${pid}/environ`, 'latin1')
        .split('\0')
        .find((e) => e.startsWith('SESSION_DIR='));
      if (dir !== undefined) return dir.slice('SESSION_DIR='.length);
    } catch {
      // gone meanwhile
    }
  }
  throw new Error(`no process of ${userId}'s session shows SESSION_DIR`);
}

/** The resident memory of a process, bytes (0 once it is gone), from /proc. */
export function rss(pid: number): number {
  try {
    const match = /^VmRSS:\s+(\d+) kB$/m.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
    return match === null ? 0 : Number(match[1]) * 1024;
  } catch {
    return 0;
  }
}

const NAMESPACES = ['mnt', 'net', 'pid', 'ipc', 'uts', 'cgroup', 'user'] as const;

/** The namespaces (`net:[4026532…]`, as /proc names them) of `pid`; empty once it is gone. */
function namespacesOfPid(pid: number | 'self'): string[] {
  const found: string[] = [];
  for (const kind of NAMESPACES) {
    try {
      found.push(readlinkSync(`/proc/${pid}/ns/${kind}`));
    } catch {
      // gone meanwhile, or a kind this kernel lacks
    }
  }
  return found;
}

/** What a process is, for a failure's message: its name, state, parent and command line. */
function described(pid: string): string {
  const stat = procStat(pid);
  let cmdline = '';
  try {
    cmdline = readFileSync(`/proc/${pid}/cmdline`, 'utf8').replaceAll('\0', ' ').trim().slice(0, 200);
  } catch {
    // gone meanwhile
  }
  return stat === undefined ? 'gone meanwhile' : `${stat.name}, state ${stat.state}, parent ${stat.ppid}: ${cmdline}`;
}

/**
 * Open handles on the namespaces {@link sessionNamespaces} named, by name. A namespace's name is its
 * inode number, which the kernel gives to a new namespace once the old one is freed: CI's run beside
 * another found the next sessions (of the other lane) in "a stopped session's" mount, PID, IPC, UTS and
 * cgroup namespaces, each new and numbered as the freed ones. Held open here, a namespace is not freed,
 * so its number names it alone until {@link nothingLeftBehind} has looked (holding it keeps no process
 * in it, and shows in no mount table of ours).
 */
const held = new Map<string, number>();

/** Lets go of the namespaces `names` (held by {@link sessionNamespaces}). */
function release(names: readonly string[]): void {
  for (const name of names) {
    const fd = held.get(name);
    if (fd === undefined) continue;
    held.delete(name);
    closeSync(fd);
  }
}

/**
 * The namespaces a session's processes are in that this test process is not: the session's own. Each
 * is held open until {@link nothingLeftBehind} is done with it (or the test ends), so that no new
 * namespace takes its number meanwhile.
 */
export function sessionNamespaces(pids: number[]): string[] {
  const own = new Set(namespacesOfPid('self'));
  const found: string[] = [];
  for (const pid of pids)
    for (const kind of NAMESPACES) {
      let fd: number;
      try {
        fd = openSync(`/proc/${pid}/ns/${kind}`, 'r');
      } catch {
        continue; // gone meanwhile, or a kind this kernel lacks
      }
      // The name of what was opened (not of what the link names a moment later).
      const name = readlinkSync(`/proc/self/fd/${fd}`);
      if (own.has(name) || found.includes(name)) {
        closeSync(fd);
        continue;
      }
      if (held.has(name)) closeSync(fd);
      else held.set(name, fd);
      found.push(name);
    }
  cleanUp(() => release(found));
  return found;
}

/**
 * What still holds any of `namespaces` or shows `paths`, read from outside: every process's
 * /proc/<pid>/ns/ links, and this machine's mount table (where a namespace kept by a bind mount of its
 * nsfs file, or a mount left on a session's directory, would show). Empty when nothing is left.
 */
export function leftBehind(namespaces: string[], paths: string[]): string[] {
  const wanted = new Set(namespaces);
  const found: string[] = [];
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    const inWanted = namespacesOfPid(Number(entry)).filter((ns) => wanted.has(ns));
    if (inWanted.length > 0) found.push(`pid ${entry} (${described(entry)}) in ${inWanted.join(' ')}`);
  }
  for (const line of readFileSync('/proc/self/mountinfo', 'utf8').split('\n')) {
    if (namespaces.some((ns) => line.includes(ns)) || paths.some((p) => line.includes(p))) found.push(`mount ${line}`);
  }
  return found;
}

/**
 * Waits (up to `timeoutMs`) until {@link leftBehind} finds nothing; throws naming what is still there
 * (each process with its state, parent and command line), then lets go of the namespaces. It asserts
 * that nothing is left, not how fast: 10 s at most by default, for a machine loaded by the other lane.
 */
export async function nothingLeftBehind(namespaces: string[], paths: string[], timeoutMs = 10_000): Promise<void> {
  let found: string[] = [];
  try {
    await until(() => (found = leftBehind(namespaces, paths)).length === 0, timeoutMs, 'nothing left behind');
  } catch {
    throw new Error(`left behind after ${timeoutMs} ms:\n${found.join('\n')}`);
  } finally {
    release(namespaces);
  }
}

/**
 * The session cgroups of a host (its sessions get one when a cap is set), read from the machine's
 * cgroup tree: `<the host's pids cgroup>/cq-worker-<pid>/session-*` on cgroup v1, as on this machine.
 * Call it while the host runs (its own cgroup is read from /proc).
 */
export function sessionCgroupsOf(hostPid: number): () => string[] {
  const own = /^\d+:pids:(.*)$/m.exec(readFileSync(`/proc/${hostPid}/cgroup`, 'utf8'))?.[1];
  const dir = `/sys/fs/cgroup/pids${own === '/' || own === undefined ? '' : own}/cq-worker-${hostPid}`;
  return () => {
    try {
      return readdirSync(dir).filter((name) => name.startsWith('session-'));
    } catch {
      return [];
    }
  };
}
