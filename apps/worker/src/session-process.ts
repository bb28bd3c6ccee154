import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { settleWithin } from '@cq/service-kit';
import type { Logger } from 'pino';
import { procsFiles, removeCgroup, type CgroupLayout, type CgroupSpec } from './cgroups.js';
import { PROCESS_GROUPS, type ContainmentPlan } from './containment.js';
import { hostDir, writeResolvConf } from './isolation.js';
import type { SessionExecTarget } from './proxy/session-exec.js';
import { demoSessionPath, runtimeProgram, sessionEnvironment } from './session-env.js';
import { fromMonotonic, toMonotonic, type FromRuntime, type RuntimeCause, type ToRuntime } from './runtime-protocol.js';

/** How a session is started and stopped: a process of the session runtime, or anything in-process for tests. */
export interface SessionLauncher {
  launch(spec: LaunchSpec): SessionHandle;
  /** Gets ready to launch (the runtime process is up). */
  open?(): Promise<void>;
  /** Lets go of what it holds, once no session runs any more (the host is stopping). */
  close?(): Promise<void>;
  /** The running session of that id (for the session proxy and commands); undefined when none runs. */
  target?(sessionId: string): SessionExecTarget | undefined;
  /** Calls `listener` with the id of each session that ends. */
  onEnded?(listener: (sessionId: string) => void): void;
}

/** What a launcher is given for one session. */
export interface LaunchSpec {
  /** The contract's variables: SESSION_ID, USER_ID, FENCE, DEADLINE, SESSION_METADATA, SESSION_LABELS, SESSION_POOL. */
  readonly sessionEnv: Record<string, string>;
  /** SIGTERM → SIGKILL grace, ms. */
  readonly graceMs: number;
  /** The lifetime cap, a `performance.now()` instant (as at the start: {@link SessionHandle.deadlineMoved} moves it). */
  readonly deadlineAt: number;
  /** The lease holds until this `performance.now()` instant (the safety margin already taken off). */
  readonly holdsUntil: number;
  /** Receives each line the session prints (cut at 16 KiB; `[output dropped: <n> bytes]` where output was dropped). */
  readonly onOutput: (stream: 'stdout' | 'stderr', lines: readonly string[], droppedBytes: number) => void;
  /** The session announced it is ready on `SESSION_NOTIFY_FD` (again when its endpoint changes). */
  readonly onReady?: (endpoint: string | undefined, port?: number) => void;
  /**
   * The session was active at this `performance.now()` instant (`{"active": true}` or readiness on
   * `SESSION_NOTIFY_FD`); reported at most about every 100 ms, the latest instant always.
   */
  readonly onActive?: (at: number) => void;
}

/** How a session ended. */
export interface SessionExit {
  /** The exit code (128 + signal number when killed). */
  readonly exitCode: number;
  /**
   * Set when the session was ended by something other than the host's order or its own exit:
   * `lease` (its lease stopped holding before the host renewed it), `deadline` (its lifetime cap),
   * `runtime_lost` (the runtime died, and the host killed the session's group), `spawn_failed`.
   */
  readonly cause?: RuntimeCause | 'runtime_lost';
  /** The kernel killed a process of the session for its memory cap (SESSION_MEMORY_MB). */
  readonly outOfMemory?: true;
}

/** A running session. */
export interface SessionHandle {
  /** Resolves once the session's process has exited and its process group was killed. */
  readonly exited: Promise<SessionExit>;
  /** A renewal got through: the lease now holds until this `performance.now()` instant. */
  leaseHolds(holdsUntil: number): void;
  /** The session's lifetime was changed: it now ends at this `performance.now()` instant (sooner or later). */
  deadlineMoved(deadlineAt: number): void;
  /** SIGTERM to its process group, SIGKILL after the grace time. */
  terminate(): void;
  /** SIGKILL to its process group now. */
  kill(): void;
}

/** How long the host waits for the runtime to confirm a kill it also did itself, ms. */
const KILL_CONFIRM_MS = 1000;

export { demoSessionPath, runtimeProgram } from './session-env.js';

interface Running {
  readonly spec: LaunchSpec;
  readonly cgroup: CgroupSpec | undefined;
  /** Its SESSION_DIR and environment. */
  readonly dir: string;
  readonly env: Readonly<Record<string, string>>;
  pid: number | undefined;
  settled: boolean;
  settle(exit: SessionExit): void;
  /** The host's own kill, should a SIGTERM not end the session within its grace time. */
  overdue: NodeJS.Timeout | undefined;
  /** Settles a session the host killed itself, should the runtime not report it. */
  confirm: NodeJS.Timeout | undefined;
}

/** Options of {@link RuntimeLauncher}. */
export interface RuntimeLauncherOptions {
  /** Shell command (`/bin/sh -c`); undefined: the built-in demo session. */
  readonly command: string | undefined;
  readonly logger: Logger;
  /** How sessions are contained. @defaultValue {@link PROCESS_GROUPS} (no parent-death signal, the host's user) */
  readonly containment?: ContainmentPlan;
  /** Where the sessions' cgroups go, made by `prepareCgroups` at the host's start. @defaultValue none (no caps) */
  readonly cgroups?: CgroupLayout | undefined;
  /** Output one session may send per second on average, bytes. @defaultValue 65536 */
  readonly outputRate?: number;
  /** The runtime's program (tests run the built one). @defaultValue {@link runtimeProgram} */
  readonly program?: string;
}

/**
 * Runs sessions through the session runtime (`session-runtime.ts`): one process per host, in a
 * process session of its own, that starts each session (contained as the plan says: its own PID
 * namespace, or its process group) in its own process group and kills that group
 * when its lease stops holding, even while this host is frozen or after it has died. The host enforces
 * the same instant on its own clock ({@link SessionHandle.kill} signals the group directly), so either
 * process alone keeps a session from outliving its lease. Should the runtime die, the host kills the
 * groups of its sessions (the session leaders also die of their parent-death signal), reports them as
 * `runtime_lost`, and starts a new runtime for the next sessions.
 */
export class RuntimeLauncher implements SessionLauncher {
  readonly #command: readonly string[];
  readonly #logger: Logger;
  readonly #program: string;
  readonly #plan: ContainmentPlan;
  readonly #cgroups: CgroupLayout | undefined;
  readonly #outputRate: number;
  /** Where this host makes its sessions' directories. */
  readonly #dirs: string;
  readonly #sessions = new Map<string, Running>();
  readonly #endListeners: Array<(sessionId: string) => void> = [];
  #runtime: ChildProcess | undefined;
  #ready: Promise<void> | undefined;
  #startedAt = 0;
  /** After a runtime that died young: no new one before this `performance.now()` instant. */
  #retryAt = 0;
  #backoffMs = 0;
  /** Consecutive runtimes that died within a second of their start. */
  #youngDeaths = 0;
  #retry: NodeJS.Timeout | undefined;
  #next = 0;
  #closing = false;

  constructor(options: RuntimeLauncherOptions) {
    const { command } = options;
    // The demo's text rather than its path: a session may not see the host's checkout (under /tmp, say).
    this.#command =
      command === undefined
        ? ['/bin/sh', '-c', readFileSync(demoSessionPath, 'utf8'), 'demo-session']
        : ['/bin/sh', '-c', command];
    this.#logger = options.logger;
    this.#program = options.program ?? runtimeProgram;
    this.#plan = options.containment ?? PROCESS_GROUPS;
    this.#cgroups = options.cgroups;
    this.#outputRate = options.outputRate ?? 65_536;
    this.#dirs = hostDir(this.#plan.isolation.sessionsDir);
  }

  /** How this launcher contains its sessions. */
  get containment(): ContainmentPlan {
    return this.#plan;
  }

  /** The runtime's process id, while one runs. */
  get runtimePid(): number | undefined {
    return this.#runtime?.pid;
  }

  async open(): Promise<void> {
    writeResolvConf(this.#plan.isolation);
    this.#ensure();
    await this.#ready;
  }

  /** The runtime, started if none runs; undefined while a runtime that keeps dying is backed off. */
  #ensure(): ChildProcess | undefined {
    if (this.#runtime !== undefined) return this.#runtime;
    if (performance.now() < this.#retryAt || this.#closing) return undefined;
    this.#startedAt = performance.now();
    // A young generation of 2 MB: the runtime reads floods of output in 64 KiB chunks, and a small one
    // collects them sooner (measured: 110 → 88 MB at its peak under three floods at once).
    const runtime = spawn(process.execPath, ['--max-semi-space-size=2', this.#program], {
      // A process session of its own: a signal to the host's group (a group SIGKILL) misses it.
      detached: true,
      stdio: ['ignore', 'ignore', 'inherit', 'ipc'],
      env: { PATH: process.env['PATH'] ?? '' },
    });
    this.#runtime = runtime;
    this.#ready = new Promise<void>((resolve) => {
      runtime.once('spawn', () => {
        this.#logger.info({ runtimePid: runtime.pid }, 'session runtime started');
        resolve();
      });
      runtime.once('exit', () => resolve());
    });
    runtime.on('message', (message: FromRuntime) => this.#onMessage(message));
    runtime.on('error', (err) => this.#logger.error({ err }, 'session runtime error'));
    runtime.on('exit', (code, signal) => this.#onRuntimeExit(runtime, code, signal));
    return runtime;
  }

  /**
   * The lease instants moved in this tick, sent together on the next (one message for a heartbeat's
   * worth of sessions rather than one each).
   */
  #leases = new Map<string, number>();

  #leaseHolds(id: string, killBy: number): void {
    if (this.#leases.size === 0)
      setImmediate(() => {
        const leases = [...this.#leases];
        this.#leases = new Map();
        if (leases.length === 1) this.#send({ t: 'lease', id: leases[0]![0], killBy: leases[0]![1] });
        else this.#send({ t: 'leases', leases });
      });
    this.#leases.set(id, killBy);
  }

  #send(order: ToRuntime): void {
    const runtime = this.#runtime;
    if (runtime === undefined || !runtime.connected) return;
    runtime.send(order, (err) => {
      if (err !== null) this.#logger.debug({ err }, 'could not reach the session runtime');
    });
  }

  #onMessage(message: FromRuntime): void {
    const running = this.#sessions.get(message.id);
    if (running === undefined) return;
    switch (message.t) {
      case 'started':
        running.pid = message.pid;
        break;
      case 'out':
        running.spec.onOutput(message.stream, message.lines, message.dropped ?? 0);
        break;
      case 'ready':
        running.spec.onReady?.(message.endpoint, message.port);
        break;
      case 'active':
        running.spec.onActive?.(fromMonotonic(message.at));
        break;
      case 'notify_bad':
        this.#logger.warn(
          { sessionId: running.spec.sessionEnv['SESSION_ID'], reason: message.reason, count: message.count },
          message.count < 5
            ? 'bad line on SESSION_NOTIFY_FD ignored'
            : 'bad line on SESSION_NOTIFY_FD ignored; further ones are ignored without a word',
        );
        break;
      case 'exit':
        running.settle({
          exitCode: message.code,
          ...(message.cause === undefined ? {} : { cause: message.cause }),
          ...(message.oom === true ? { outOfMemory: true } : {}),
        });
        break;
    }
  }

  #onRuntimeExit(runtime: ChildProcess, code: number | null, signal: NodeJS.Signals | null): void {
    if (this.#runtime !== runtime) return;
    this.#runtime = undefined;
    this.#ready = undefined;
    if (this.#sessions.size === 0 && this.#closing) return;
    this.#logger.error(
      { code, signal, sessions: this.#sessions.size },
      'session runtime died; its sessions are killed and end as lost',
    );
    for (const running of [...this.#sessions.values()]) {
      this.#killGroup(running);
      running.settle({ exitCode: 137, cause: 'runtime_lost' });
    }
    if (this.#closing) return;
    // Started again at once; only a runtime that keeps dying within a second of its start (a crash loop,
    // not a kill) waits before the next try, 0.5 s doubling to 30 s, and sessions fail meanwhile.
    this.#youngDeaths = performance.now() - this.#startedAt < 1000 ? this.#youngDeaths + 1 : 0;
    this.#backoffMs = this.#youngDeaths < 2 ? 0 : Math.min(500 * 2 ** (this.#youngDeaths - 2), 30_000);
    this.#retryAt = performance.now() + this.#backoffMs;
    this.#retry = setTimeout(() => {
      // A timer may fire a fraction of a millisecond early on the monotonic clock.
      this.#retryAt = 0;
      this.#ensure();
    }, this.#backoffMs);
    this.#retry.unref();
  }

  /** SIGKILL to the session's group (and so its namespace), and to what is left in its cgroup, by the host itself. */
  #killGroup(running: Running): void {
    if (running.pid !== undefined) {
      try {
        process.kill(-running.pid, 'SIGKILL');
      } catch {
        // ESRCH: gone already.
      }
    }
    const cgroup = running.cgroup;
    if (cgroup === undefined) return;
    // What the runtime would have removed: tried again while the killed processes are dying.
    let tries = 0;
    const release = (): void => {
      if (!removeCgroup(cgroup) && ++tries < 100) setTimeout(release, 50).unref();
    };
    release();
  }

  target(sessionId: string): SessionExecTarget | undefined {
    for (const running of this.#sessions.values())
      if (running.spec.sessionEnv['SESSION_ID'] === sessionId && !running.settled)
        return {
          network: this.#plan.isolation.network,
          pid: running.pid,
          dir: running.dir,
          env: running.env,
          procs: running.cgroup === undefined ? [] : procsFiles(running.cgroup),
          graceMs: running.spec.graceMs,
        };
    return undefined;
  }

  onEnded(listener: (sessionId: string) => void): void {
    this.#endListeners.push(listener);
  }

  launch(spec: LaunchSpec): SessionHandle {
    const id = String(++this.#next);
    const user = this.#plan.user;
    // A name of its own among the host's sessions (a host runs one session per user at a time).
    const name = `session-${(spec.sessionEnv['SESSION_ID'] ?? '').replace(/[^\w.-]/g, '_')}-${id}`;
    const dir = join(this.#dirs, name);
    const env = sessionEnvironment(spec.sessionEnv, user, dir);
    const cgroup = this.#cgroups?.specFor(name);
    let settle!: (exit: SessionExit) => void;
    const exited = new Promise<SessionExit>((resolve) => (settle = resolve));
    const running: Running = {
      spec,
      cgroup,
      dir,
      env,
      pid: undefined,
      settled: false,
      overdue: undefined,
      confirm: undefined,
      settle: (exit) => {
        if (running.settled) return;
        running.settled = true;
        clearTimeout(running.overdue);
        clearTimeout(running.confirm);
        this.#sessions.delete(id);
        for (const listener of this.#endListeners) listener(spec.sessionEnv['SESSION_ID'] ?? '');
        settle(exit);
      },
    };
    this.#sessions.set(id, running);
    if (this.#ensure() === undefined) {
      this.#logger.error(
        { retryInMs: Math.round(this.#retryAt - performance.now()) },
        'the session runtime keeps dying; the session cannot start',
      );
      running.settle({ exitCode: 127, cause: 'spawn_failed' });
    }
    this.#send({
      t: 'start',
      id,
      argv: this.#plan.argv(this.#command, cgroup, dir),
      env,
      cwd: dir,
      dir: { path: dir, uid: user?.uid ?? process.getuid?.() ?? 0, gid: user?.gid ?? process.getgid?.() ?? 0 },
      ...(this.#plan.isolation.network === 'egress' ? { egress: true as const } : {}),
      ...(cgroup === undefined ? {} : { cgroup }),
      outputRate: this.#outputRate,
      graceMs: spec.graceMs,
      deadlineAt: toMonotonic(spec.deadlineAt),
      killBy: toMonotonic(spec.holdsUntil),
    });

    /**
     * The host's own kill, for when the runtime does not act: SIGKILL to the group, and the session
     * counts as ended unless the runtime reports otherwise within a second (SIGKILL cannot be ignored).
     */
    const hostKill = (): void => {
      if (running.settled) return;
      if (running.pid === undefined) {
        // The runtime never said where the session runs: only its death (and the leaders'
        // parent-death signal) can end it; its exit handler settles every session it ran.
        this.#logger.error(
          { sessionId: spec.sessionEnv['SESSION_ID'] },
          'the session runtime does not answer; killing it',
        );
        this.#runtime?.kill('SIGKILL');
        return;
      }
      this.#killGroup(running);
      running.confirm ??= setTimeout(() => running.settle({ exitCode: 137 }), KILL_CONFIRM_MS);
    };
    return {
      exited,
      leaseHolds: (holdsUntil) => this.#leaseHolds(id, toMonotonic(holdsUntil)),
      deadlineMoved: (deadlineAt) => this.#send({ t: 'deadline', id, deadlineAt: toMonotonic(deadlineAt) }),
      terminate: () => {
        this.#send({ t: 'term', id });
        running.overdue ??= setTimeout(hostKill, spec.graceMs + KILL_CONFIRM_MS);
      },
      kill: () => {
        this.#send({ t: 'kill', id });
        // On the host's own clock too, but after the I/O phase: an exit report that waited while
        // this host was frozen is read first, so a process group the runtime already reaped is left
        // alone.
        setImmediate(hostKill);
      },
    };
  }

  async close(): Promise<void> {
    this.#closing = true;
    clearTimeout(this.#retry);
    const runtime = this.#runtime;
    if (runtime === undefined) return;
    const exited = once(runtime, 'exit');
    // The runtime exits when its channel closes (and ends any session still running, quickly).
    if (runtime.connected) runtime.disconnect();
    await settleWithin(exited, 2000);
  }
}
