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
// It reads the sessions' output in bounded pieces (lines cut at 16 KiB, a token bucket per session), and
// makes and removes the sessions' cgroups. Everything it touches outside comes in as {@link RuntimeDeps},
// so the logic runs in tests without processes.
import type { ChildProcess } from 'node:child_process';
import { constants } from 'node:os';
import { createCgroup, oomKills, removeCgroup, type CgroupSpec } from './cgroups.js';
import { CUT_MARK, LineSplitter, TokenBucket, droppedLine, type Line } from './output.js';
import {
  ACTIVE_REPORT_MS,
  MAX_LINE_BYTES,
  OUTPUT_BURST_BYTES,
  type FromRuntime,
  type RuntimeCause,
  type ToRuntime,
} from './runtime-protocol.js';

/** How fast the sessions die once the host is gone, ms. */
const ORPHAN_GRACE_MS = 1000;
/** Messages not yet written to the host beyond which session output is dropped (and counted). */
const MAX_UNSENT = 1000;
/** How long a session's end waits for what it wrote to `SESSION_NOTIFY_FD` before it exited to be read. */
const NOTIFY_DRAIN_MS = 100;
/** Longest line read on `SESSION_NOTIFY_FD`; a longer one is skipped whole, never buffered. */
const MAX_NOTIFY_LINE = 1024;
/** Longest endpoint a session may announce (the contract's). */
const MAX_ENDPOINT = 512;
/** Most lines read on `SESSION_NOTIFY_FD` a second, per session (a session says it is ready once or twice). */
const NOTIFY_LINES_PER_SECOND = 1000;
/** Bad notification lines reported to the host per session; the rest are only counted. */
const BAD_REPORTED = 5;
/** Most `[output dropped: <n> bytes]` lines per session: one a second (and one at its end). */
const MARK_EVERY_MS = 1000;
/** How often a cgroup that still holds a dying process is tried again, and for how long, ms. */
const CGROUP_RETRY_MS = 50;
const CGROUP_GIVE_UP_MS = 10_000;

/** What the runtime touches outside itself. */
export interface RuntimeDeps {
  /** Starts a session's program in a process group of its own, stdio: ignore, pipe, pipe, pipe (fd 3). */
  spawn(argv: readonly string[], env: Readonly<Record<string, string>>, cwd: string | undefined): ChildProcess;
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
  readonly bucket: TokenBucket;
  /** Output bytes dropped (over the rate, or while the host did not read) and not yet marked. */
  dropped: number;
  /** When the last `[output dropped]` line was passed on (monotonic ms): at most one a second. */
  markedAt: number;
  /** Marks what was dropped once a second is up, when no line comes to carry the mark sooner. */
  markTimer: NodeJS.Timeout | undefined;
  ended: boolean;
}

/** The runtime: feed it the host's orders with {@link Runtime.order}; it answers through `deps.send`. */
export interface Runtime {
  order(order: ToRuntime): void;
  /** The host is gone or asks everything to stop: end every session (with `graceMs` each), then exit. */
  shutdown(graceMs: (sessionGraceMs: number) => number): void;
  /** Sessions running. */
  readonly size: number;
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
    clearTimeout(session.markTimer);
    // Whatever the session left behind in its group goes with it.
    signalGroup(session, 'SIGKILL');
    sessions.delete(session.id);
    let oom = false;
    if (session.cgroup !== undefined) {
      oom = cgroups.oomKills(session.cgroup) > 0;
      release(session.cgroup, deps.now());
    }
    if (session.dropped > 0)
      send({
        t: 'out',
        id: session.id,
        stream: 'stdout',
        lines: [droppedLine(session.dropped)],
        dropped: session.dropped,
      });
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
  const readOutput = (session: Session, stream: 'stdout' | 'stderr', input: NodeJS.ReadableStream): void => {
    const splitter = new LineSplitter(MAX_LINE_BYTES);
    // A line over the rate, or while the host does not read, is dropped before it is made into a string.
    const admit = (bytes: number): boolean => unsent < MAX_UNSENT && session.bucket.take(bytes);
    const pass = ({ lines, dropped }: { lines: Line[]; dropped: number }): void => {
      const out: string[] = [];
      let marked = 0;
      // What was dropped before this chunk is marked before its lines; what this chunk dropped, after them.
      // (Within a chunk the lines that pass come first: once the bucket is empty, the rest of it is dropped.)
      if (session.dropped > 0 && lines.length > 0 && deps.now() - session.markedAt >= MARK_EVERY_MS) {
        out.push(droppedLine(session.dropped));
        marked = session.dropped;
        session.dropped = 0;
        session.markedAt = deps.now();
      }
      for (const { text, cut } of lines) out.push(cut ? `${text}${CUT_MARK}` : text);
      session.dropped += dropped;
      if (out.length > 0)
        send({ t: 'out', id: session.id, stream, lines: out, ...(marked > 0 ? { dropped: marked } : {}) });
      // A flood that stops leaves its drop unmarked until a line comes: mark it once the second is up.
      if (session.dropped > 0 && session.markTimer === undefined && !session.ended) {
        session.markTimer = setTimeout(
          () => {
            session.markTimer = undefined;
            if (session.dropped === 0 || session.ended) return;
            const bytes = session.dropped;
            session.dropped = 0;
            session.markedAt = deps.now();
            send({ t: 'out', id: session.id, stream, lines: [droppedLine(bytes)], dropped: bytes });
          },
          Math.max(0, session.markedAt + MARK_EVERY_MS - deps.now()),
        );
      }
    };
    input.on('data', (chunk: Buffer) => pass(splitter.push(chunk, admit)));
    input.on('end', () => pass({ lines: splitter.end(), dropped: 0 }));
    input.on('error', () => {});
  };

  /**
   * Reads JSON lines from a session's `SESSION_NOTIFY_FD`: `{"ready": true, "endpoint"?: "..."}` marks
   * it ready (the host hears of it again only when the endpoint changes); `{"active": true}` and every
   * readiness line are activity (the host hears of it at most every {@link ACTIVE_REPORT_MS}, with the
   * instant of the latest); anything else is reported as a bad line (the first few) and ignored. At most
   * one line of {@link MAX_NOTIFY_LINE} bytes is held.
   */
  const readNotifications = (id: string, input: NodeJS.ReadableStream): void => {
    const splitter = new LineSplitter(MAX_NOTIFY_LINE);
    let bad = 0;
    let announced: string | undefined | null = null;
    const reject = (reason: string): void => {
      bad++;
      if (bad <= BAD_REPORTED) send({ t: 'notify_bad', id, reason, count: bad });
    };
    // Activity: the first at once, then at most one report per ACTIVE_REPORT_MS, carrying the latest instant.
    let reportedAt = Number.NEGATIVE_INFINITY;
    let latest: number | undefined;
    let reportTimer: NodeJS.Timeout | undefined;
    const report = (): void => {
      reportTimer = undefined;
      if (latest === undefined) return;
      reportedAt = deps.now();
      send({ t: 'active', id, at: latest });
      latest = undefined;
    };
    const active = (): void => {
      latest = deps.now();
      if (reportTimer !== undefined) return;
      const wait = reportedAt + ACTIVE_REPORT_MS - latest;
      if (wait <= 0) report();
      else reportTimer = setTimeout(report, wait);
    };
    const handle = (text: string): void => {
      if (text.trim() === '') return;
      let message: unknown;
      try {
        message = JSON.parse(text);
      } catch {
        reject('not JSON');
        return;
      }
      const {
        ready,
        endpoint,
        active: isActive,
      } = (message ?? {}) as {
        ready?: unknown;
        endpoint?: unknown;
        active?: unknown;
      };
      if (ready !== true) {
        if (isActive === true) return active();
        return reject('not {"ready": true, ...} or {"active": true}');
      }
      if (
        endpoint !== undefined &&
        (typeof endpoint !== 'string' || endpoint.length < 1 || endpoint.length > MAX_ENDPOINT)
      )
        return reject(`endpoint must be a string of 1 to ${MAX_ENDPOINT} characters`);
      active();
      if (announced === endpoint) return;
      announced = endpoint;
      send({ t: 'ready', id, ...(endpoint === undefined ? {} : { endpoint }) });
    };
    const lines = (found: Line[]): void => {
      for (const { text, cut } of found) {
        if (cut) reject(`a line longer than ${MAX_NOTIFY_LINE} characters`);
        else handle(text);
      }
    };
    // At most NOTIFY_LINES_PER_SECOND lines are read a second: a session that writes more waits on its
    // writes (nothing it says there is lost, and a flood of lines to parse cannot take the runtime's time
    // from other sessions). Skipping an overlong line costs next to nothing, so bytes are not counted.
    const bucket = new TokenBucket(NOTIFY_LINES_PER_SECOND, NOTIFY_LINES_PER_SECOND, deps.now);
    const stream = input as NodeJS.ReadableStream & { pause(): void; resume(): void };
    input.on('data', (chunk: Buffer) => {
      const found = splitter.push(chunk).lines;
      lines(found);
      const waitMs = bucket.spend(found.length);
      if (waitMs === 0) return;
      stream.pause();
      setTimeout(() => stream.resume(), waitMs);
    });
    input.on('end', () => lines(splitter.end()));
    input.on('error', () => {});
  };

  const start = (order: Extract<ToRuntime, { t: 'start' }>): void => {
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
      bucket: new TokenBucket(order.outputRate, OUTPUT_BURST_BYTES, deps.now),
      dropped: 0,
      markedAt: Number.NEGATIVE_INFINITY,
      markTimer: undefined,
      ended: false,
    };
    let child: ChildProcess;
    try {
      if (order.cgroup !== undefined) cgroups.create(order.cgroup);
      child = deps.spawn(order.argv, order.env, order.cwd);
    } catch (err) {
      deps.warn(`could not start session ${order.id}: ${(err as Error).message}`);
      if (order.cgroup !== undefined) release(order.cgroup, deps.now());
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
    child.on('exit', (code, signal) => {
      const exitCode = code ?? 128 + (signal === null ? 0 : (constants.signals[signal] ?? 0));
      // A process's 'exit' can come before its pipes are read. What the session announced on
      // SESSION_NOTIFY_FD before it exited is passed on before its end: wait for fd 3 to be read to its
      // end, but no longer than NOTIFY_DRAIN_MS (a process left in its group may still hold it open).
      const notify = child.stdio[3] as NodeJS.ReadableStream | null | undefined;
      if (notify === null || notify === undefined || (notify as { readableEnded?: boolean }).readableEnded === true) {
        ended(session, exitCode);
        return;
      }
      const done = (): void => {
        clearTimeout(timer);
        ended(session, exitCode);
      };
      const timer = setTimeout(done, NOTIFY_DRAIN_MS);
      notify.once('end', done);
      notify.once('close', done);
    });
    if (child.pid === undefined) return; // 'error' follows
    send({ t: 'started', id: order.id, pid: child.pid });
    readOutput(session, 'stdout', child.stdout!);
    readOutput(session, 'stderr', child.stderr!);
    const notify = child.stdio[3];
    if (notify !== null && notify !== undefined) readNotifications(order.id, notify as NodeJS.ReadableStream);
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
