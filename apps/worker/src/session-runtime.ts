// The session runtime: one small process per worker host, between the host and its sessions (its
// program is `runtime-main.ts`). The host starts it in a process session of its own, so a signal to the
// host's process group (a process manager's group kill, Ctrl-C) does not reach it. It starts each
// session with the program the host gives it (the containment's wrappers, then the session's command),
// in a process group of the session's own, and ends that group (and with it the session's namespace):
//   - when the host says so ("term": SIGTERM, SIGKILL after the grace time; "kill": SIGKILL now);
//   - at the instant the session's lease stops holding (`killBy`: the lease's end less a safety
//     margin, on the machine's monotonic clock), unless a renewal has moved it: this covers a host
//     that is frozen (SIGSTOP, a long GC pause), cut off from Redis, or too slow to renew;
//   - at the session's deadline (SIGTERM, then SIGKILL after the grace time), should the host not; a
//     "deadline" message (the session's lifetime was changed) moves it, until it has passed;
//   - when the host is gone (its IPC channel closed, even by SIGKILL of its whole group): its leases
//     are no longer renewed (SIGTERM, SIGKILL within a second, never after `killBy`).
// It passes the sessions' output (`output-reader.ts`) and what they say on SESSION_NOTIFY_FD
// (`notify-reader.ts`) on to the host, every line a session wrote before its exit, and makes and removes
// the sessions' cgroups. Everything it touches outside comes in as {@link RuntimeDeps},
// so the logic runs in tests without processes.
import type { ChildProcess } from 'node:child_process';
import { constants } from 'node:os';
import type { Readable } from 'node:stream';
import { createCgroup, oomKills, removeCgroup, type CgroupSpec } from './cgroups.js';
import { followEgressStep, type Egress } from './egress-step.js';
import { NotifyReader, type NotifyMessage } from './notify-reader.js';
import { OutputReader, type OutMessage, type OutputStreamName } from './output-reader.js';
import type { FromRuntime, RuntimeCause, SessionDir, ToRuntime } from './runtime-protocol.js';

/** How fast the sessions die once the host is gone, ms. */
const ORPHAN_GRACE_MS = 1000;
/** Messages not yet written to the host beyond which session output is dropped (and counted). */
const MAX_UNSENT = 1000;
/** How long a session's end waits, after its exit (and its group's SIGKILL), for its pipes to be read to their end, ms. */
const PIPES_DRAIN_MS = 250;
/** How often a cgroup that still holds a dying process is tried again, and for how long, ms. */
const CGROUP_RETRY_MS = 50;
const CGROUP_GIVE_UP_MS = 10_000;

/** What the runtime touches outside itself. */
export interface RuntimeDeps {
  /**
   * Starts a session's program in a process group of its own, stdio: ignore, pipe, pipe, pipe (fd 3),
   * and with `egress` a duplex pipe on fd 4 (the network step's).
   */
  spawn(
    argv: readonly string[],
    env: Readonly<Record<string, string>>,
    cwd: string | undefined,
    egress: boolean,
  ): ChildProcess;
  /** Makes a session's directory (empty, its user's, 0711). Throws when it cannot. */
  makeDir?(dir: SessionDir): void;
  /** Removes a session's directory and everything in it, in the background. */
  removeDir?(path: string): void;
  /** Starts slirp4netns on the network namespace of process `pid`: `ready` once it configured it. */
  startEgress?(pid: number): Egress;
  /** Sends a message to the host; `done` is called once it is written. */
  send(message: FromRuntime, done: () => void): void;
  /** Now on the machine's monotonic clock, ms. */
  now(): number;
  /** Sends `signal` to process group `pgid` (ESRCH ignored). */
  signalGroup(pgid: number, signal: NodeJS.Signals): void;
  /** The runtime has nothing left to do and the host is gone: exit. */
  exit(): void;
  /** Reports a problem of the runtime itself (the host's log gets it through stderr). */
  warn(message: string): void;
  /** Cgroups (tests may leave the real ones out). */
  cgroups?: { create(spec: CgroupSpec): void; oomKills(spec: CgroupSpec): number; remove(spec: CgroupSpec): boolean };
}

interface Session {
  readonly id: string;
  readonly graceMs: number;
  readonly cgroup: CgroupSpec | undefined;
  pid: number | undefined;
  leaseTimer: NodeJS.Timeout | undefined;
  deadlineTimer: NodeJS.Timeout | undefined;
  /** The deadline has passed and the session was told to stop: a later deadline cannot take that back. */
  deadlinePassed: boolean;
  killTimer: NodeJS.Timeout | undefined;
  /** When the pending SIGKILL after a SIGTERM is due (monotonic ms). */
  killAt: number;
  killBy: number;
  cause: RuntimeCause | undefined;
  readonly output: OutputReader;
  /** Marks what was dropped once a second is up, when no line comes to carry the mark sooner. */
  readonly markAlarm: Alarm;
  /** Reports the latest activity when its slot comes. */
  readonly reportAlarm: Alarm;
  readonly dir: string | undefined;
  /** slirp4netns of an `egress` session, once started. */
  egress: { stop(): void } | undefined;
  ended: boolean;
}

/** A timer set to an instant (monotonic ms): setting it again moves it, undefined clears it. */
interface Alarm {
  set(at: number | undefined): void;
}

/** The runtime: feed it the host's orders with {@link Runtime.order}; it answers through `deps.send`. */
export interface Runtime {
  order(order: ToRuntime): void;
  /** The host is gone or asks everything to stop: end every session (with `graceMs` each), then exit. */
  shutdown(graceMs: (sessionGraceMs: number) => number): void;
  /** Sessions running. */
  readonly size: number;
}

/** Calls `done` once every stream is read to its end (or closed), or after `withinMs`, whichever is first. */
function drain(streams: ReadonlyArray<unknown>, withinMs: number, done: () => void): void {
  const open = streams.filter(
    (s): s is NodeJS.ReadableStream =>
      s !== null && s !== undefined && !(s as Readable).readableEnded && !(s as Readable).destroyed,
  );
  let left = open.length;
  if (left === 0) {
    done();
    return;
  }
  const finish = (): void => {
    clearTimeout(timer);
    left = -1;
    done();
  };
  const timer = setTimeout(finish, withinMs);
  for (const stream of open) {
    let seen = false;
    const one = (): void => {
      if (seen) return;
      seen = true;
      if (--left === 0) finish();
    };
    stream.once('end', one);
    stream.once('close', one);
  }
}

/** The host's channel closed: its sessions end quickly. */
export const orphanGrace = (graceMs: number): number => Math.min(graceMs, ORPHAN_GRACE_MS);

export function createRuntime(deps: RuntimeDeps): Runtime {
  const cgroups = deps.cgroups ?? { create: createCgroup, oomKills, remove: removeCgroup };
  const sessions = new Map<string, Session>();
  let hostGone = false;
  let unsent = 0;

  const send = (message: FromRuntime): void => {
    unsent++;
    deps.send(message, () => unsent--);
  };

  const alarm = (fire: () => void): Alarm => {
    let timer: NodeJS.Timeout | undefined;
    let armedAt: number | undefined;
    return {
      set(at) {
        if (at === armedAt) return;
        clearTimeout(timer);
        armedAt = at;
        if (at === undefined) return;
        timer = setTimeout(
          () => {
            armedAt = undefined;
            fire();
          },
          Math.max(0, at - deps.now()),
        );
      },
    };
  };

  const signalGroup = (session: Session, signal: NodeJS.Signals): void => {
    if (session.pid !== undefined) deps.signalGroup(session.pid, signal);
  };

  const killNow = (session: Session, cause?: RuntimeCause): void => {
    if (cause !== undefined) session.cause ??= cause;
    signalGroup(session, 'SIGKILL');
  };

  /** SIGTERM now, SIGKILL after `graceMs` (or earlier, if an earlier SIGKILL is already due). */
  const terminate = (session: Session, graceMs: number): void => {
    signalGroup(session, 'SIGTERM');
    const at = Math.min(deps.now() + graceMs, session.killBy);
    if (at >= session.killAt) return;
    session.killAt = at;
    clearTimeout(session.killTimer);
    session.killTimer = setTimeout(() => signalGroup(session, 'SIGKILL'), Math.max(0, at - deps.now()));
  };

  /** (Re)arms the deadline timer: SIGTERM at `deadlineAt` (monotonic ms), SIGKILL after the grace time. */
  const stopAt = (session: Session, deadlineAt: number): void => {
    if (session.deadlinePassed) return;
    clearTimeout(session.deadlineTimer);
    session.deadlineTimer = setTimeout(
      () => {
        session.deadlinePassed = true;
        session.cause ??= 'deadline';
        terminate(session, session.graceMs);
      },
      Math.max(0, deadlineAt - deps.now()),
    );
  };

  /** (Re)arms the lease timer: SIGKILL at `killBy` unless a later renewal moves it. */
  const holdUntil = (session: Session, killBy: number): void => {
    session.killBy = killBy;
    clearTimeout(session.leaseTimer);
    const left = killBy - deps.now();
    if (left <= 0) {
      killNow(session, 'lease');
      return;
    }
    session.leaseTimer = setTimeout(() => killNow(session, 'lease'), left);
  };

  /** Removes the session's cgroup once what is left in it has died. */
  const release = (cgroup: CgroupSpec, since: number): void => {
    if (cgroups.remove(cgroup)) return;
    if (deps.now() - since > CGROUP_GIVE_UP_MS) {
      deps.warn(`could not remove cgroup ${cgroup.dirs[0]?.path ?? ''}: a process in it does not die`);
      return;
    }
    setTimeout(() => release(cgroup, since), CGROUP_RETRY_MS);
  };

  const ended = (session: Session, code: number): void => {
    if (session.ended) return;
    session.ended = true;
    clearTimeout(session.leaseTimer);
    clearTimeout(session.deadlineTimer);
    clearTimeout(session.killTimer);
    session.markAlarm.set(undefined);
    session.reportAlarm.set(undefined);
    // Whatever the session left behind in its group goes with it.
    signalGroup(session, 'SIGKILL');
    sessions.delete(session.id);
    session.egress?.stop();
    if (session.dir !== undefined) deps.removeDir?.(session.dir);
    let oom = false;
    if (session.cgroup !== undefined) {
      oom = cgroups.oomKills(session.cgroup) > 0;
      release(session.cgroup, deps.now());
    }
    for (const message of session.output.finish(deps.now())) send(message);
    send({
      t: 'exit',
      id: session.id,
      code,
      ...(session.cause === undefined ? {} : { cause: session.cause }),
      ...(oom ? { oom } : {}),
    });
    if (hostGone && sessions.size === 0) deps.exit();
  };

  /** Passes a stream's lines on, within the session's rate; what is over it is counted and marked. */
  const readOutput = (session: Session, stream: OutputStreamName, input: NodeJS.ReadableStream): void => {
    input.on('data', (chunk: Buffer) =>
      passOutput(session, session.output.push(stream, chunk, deps.now(), unsent < MAX_UNSENT)),
    );
    input.on('end', () => passOutput(session, session.output.end(stream, deps.now())));
    input.on('error', () => {});
  };

  const passOutput = (session: Session, messages: OutMessage[]): void => {
    if (session.ended) return;
    for (const message of messages) send(message);
    session.markAlarm.set(session.output.markDueAt);
  };

  /** Passes on what the session says on `SESSION_NOTIFY_FD`, reading no faster than the reader allows. */
  const readNotifications = (session: Session, reader: NotifyReader, input: NodeJS.ReadableStream): void => {
    const stream = input as NodeJS.ReadableStream & { pause(): void; resume(): void };
    input.on('data', (chunk: Buffer) => {
      const { messages, pauseUntil } = reader.push(chunk, deps.now());
      passNotifications(session, reader, messages);
      if (pauseUntil === undefined) return;
      stream.pause();
      setTimeout(() => stream.resume(), Math.max(0, pauseUntil - deps.now()));
    });
    input.on('end', () => passNotifications(session, reader, reader.end(deps.now())));
    input.on('error', () => {});
  };

  const passNotifications = (session: Session, reader: NotifyReader, messages: NotifyMessage[]): void => {
    if (session.ended) return;
    for (const message of messages) send(message);
    session.reportAlarm.set(reader.reportDueAt);
  };

  const start = (order: Extract<ToRuntime, { t: 'start' }>): void => {
    // An order that arrives after its lease ran out starts nothing: its host was frozen or stalled
    // between the claim and the order, and the user's next session may have run meanwhile. Started and
    // killed at once, it would still have run (and printed) after that one.
    if (order.killBy <= deps.now()) {
      send({ t: 'exit', id: order.id, code: 137, cause: 'lease' });
      return;
    }
    const session: Session = {
      id: order.id,
      graceMs: order.graceMs,
      cgroup: order.cgroup,
      pid: undefined,
      leaseTimer: undefined,
      deadlineTimer: undefined,
      deadlinePassed: false,
      killTimer: undefined,
      killAt: Number.POSITIVE_INFINITY,
      killBy: order.killBy,
      cause: undefined,
      output: new OutputReader(order.id, order.outputRate, deps.now()),
      markAlarm: alarm(() => passOutput(session, session.output.tick(deps.now()))),
      reportAlarm: alarm(() => passNotifications(session, notifications, notifications.tick(deps.now()))),
      dir: order.dir?.path,
      egress: undefined,
      ended: false,
    };
    const notifications = new NotifyReader(order.id, deps.now());
    let child: ChildProcess;
    try {
      if (order.cgroup !== undefined) cgroups.create(order.cgroup);
      if (order.dir !== undefined) deps.makeDir?.(order.dir);
      child = deps.spawn(order.argv, order.env, order.cwd, order.egress === true);
    } catch (err) {
      deps.warn(`could not start session ${order.id}: ${(err as Error).message}`);
      if (order.cgroup !== undefined) release(order.cgroup, deps.now());
      if (order.dir !== undefined) deps.removeDir?.(order.dir.path);
      send({ t: 'exit', id: order.id, code: 127, cause: 'spawn_failed' });
      return;
    }
    session.pid = child.pid;
    sessions.set(order.id, session);
    child.on('error', (err) => {
      deps.warn(`session ${order.id}: ${err.message}`);
      session.cause ??= 'spawn_failed';
      ended(session, 127);
    });
    let exited = false;
    child.on('exit', (code, signal) => {
      if (exited) return;
      exited = true;
      const exitCode = code ?? 128 + (signal === null ? 0 : (constants.signals[signal] ?? 0));
      // A process's 'exit' can come before its pipes are read to their end. What is left in its group
      // goes now (so nothing else holds the pipes open), and the end is reported once stdout, stderr and
      // SESSION_NOTIFY_FD are read to their end: every line the session wrote is passed on before its
      // 'exit'. No longer than PIPES_DRAIN_MS, though (a process that left the group may hold a pipe).
      signalGroup(session, 'SIGKILL');
      drain([child.stdout, child.stderr, child.stdio[3]], PIPES_DRAIN_MS, () => ended(session, exitCode));
    });
    if (child.pid === undefined) return; // 'error' follows
    send({ t: 'started', id: order.id, pid: child.pid });
    readOutput(session, 'stdout', child.stdout!);
    readOutput(session, 'stderr', child.stderr!);
    const notify = child.stdio[3];
    if (notify !== null && notify !== undefined)
      readNotifications(session, notifications, notify as NodeJS.ReadableStream);
    if (order.egress === true)
      followEgressStep(
        child.stdio[4] as (NodeJS.ReadableStream & NodeJS.WritableStream) | null | undefined,
        session.pid,
        deps.startEgress,
        {
          ended: () => session.ended,
          started: (egress) => (session.egress = egress),
          failed: (why) => {
            deps.warn(`session ${session.id}: its network could not be made: ${why}`);
            session.cause ??= 'spawn_failed';
            killNow(session);
          },
        },
      );
    holdUntil(session, order.killBy);
    stopAt(session, order.deadlineAt);
    if (hostGone) terminate(session, orphanGrace(session.graceMs));
  };

  return {
    order(order) {
      if (order.t === 'start') {
        start(order);
        return;
      }
      if (order.t === 'leases') {
        for (const [id, killBy] of order.leases) {
          const held = sessions.get(id);
          if (held !== undefined) holdUntil(held, killBy);
        }
        return;
      }
      const session = sessions.get(order.id);
      if (session === undefined) return;
      if (order.t === 'lease') holdUntil(session, order.killBy);
      else if (order.t === 'deadline') stopAt(session, order.deadlineAt);
      else if (order.t === 'term') terminate(session, session.graceMs);
      else killNow(session);
    },
    shutdown(graceMs) {
      hostGone = true;
      if (sessions.size === 0) deps.exit();
      for (const session of sessions.values()) terminate(session, graceMs(session.graceMs));
    },
    get size() {
      return sessions.size;
    },
  };
}
