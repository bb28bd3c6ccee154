// The session runtime: one small process per worker host, between the host and its sessions. The host
// starts it in a process session of its own, so a signal to the host's process group (a process
// manager's group kill, Ctrl-C) does not reach it. It starts each session directly, in a process
// group of the session's own, and ends that group:
//   - when the host says so ("term": SIGTERM, SIGKILL after the grace time; "kill": SIGKILL now);
//   - at the instant the session's lease stops holding (`killBy`: the lease's end less a safety
//     margin, on the machine's monotonic clock), unless a renewal has moved it: this covers a host
//     that is frozen (SIGSTOP, a long GC pause), cut off from Redis, or too slow to renew;
//   - at the session's deadline (SIGTERM, then SIGKILL after the grace time), should the host not; a
//     "deadline" message (the session's lifetime was changed) moves it, until it has passed;
//   - when the IPC channel to the host closes: the host has died (even by SIGKILL of its whole group),
//     so its leases are no longer renewed (SIGTERM, SIGKILL within a second, never after `killBy`).
// Where util-linux's setpriv is on the PATH, each session leader also gets a parent-death signal
// (PR_SET_PDEATHSIG = SIGKILL), so a SIGKILLed runtime takes its session leaders with it; the host
// kills the rest of their groups. The runtime exits once the host is gone and its sessions have ended.
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { constants } from 'node:os';
import { createInterface } from 'node:readline';
import { monotonicNow, type FromRuntime, type RuntimeCause, type ToRuntime } from './runtime-protocol.js';

/** Longest line of session output passed on to the host; longer lines are cut. */
const MAX_LINE = 4096;
/** How fast the sessions die once the host is gone, ms. */
const ORPHAN_GRACE_MS = 1000;
/** Messages not yet written to the host beyond which session output is dropped (and counted). */
const MAX_UNSENT = 1000;

interface Session {
  readonly id: string;
  readonly child: ChildProcess;
  readonly graceMs: number;
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
  dropped: number;
  ended: boolean;
}

const sessions = new Map<string, Session>();
let hostGone = false;
let unsent = 0;

/** PR_SET_PDEATHSIG through util-linux's setpriv, when it is there and knows the option. */
const pdeathsig: readonly string[] =
  process.platform === 'linux' &&
  spawnSync('setpriv', ['--pdeathsig', 'KILL', '--', 'true'], { stdio: 'ignore' }).status === 0
    ? ['setpriv', '--pdeathsig', 'KILL', '--']
    : [];

function send(message: FromRuntime): void {
  if (!process.connected) return;
  unsent++;
  process.send!(message, undefined, {}, () => {
    unsent--;
  });
}

function signalGroup(session: Session, signal: NodeJS.Signals): void {
  if (session.pid === undefined) return;
  try {
    process.kill(-session.pid, signal);
  } catch {
    // ESRCH: the group is gone already.
  }
}

function killNow(session: Session, cause?: RuntimeCause): void {
  if (cause !== undefined) session.cause ??= cause;
  signalGroup(session, 'SIGKILL');
}

/** SIGTERM now, SIGKILL after `graceMs` (or earlier, if an earlier SIGKILL is already due). */
function terminate(session: Session, graceMs: number): void {
  signalGroup(session, 'SIGTERM');
  const at = Math.min(monotonicNow() + graceMs, session.killBy);
  if (at >= session.killAt) return;
  session.killAt = at;
  clearTimeout(session.killTimer);
  session.killTimer = setTimeout(() => signalGroup(session, 'SIGKILL'), Math.max(0, at - monotonicNow()));
}

/** (Re)arms the deadline timer: SIGTERM at `deadlineAt` (monotonic ms), SIGKILL after the grace time. */
function stopAt(session: Session, deadlineAt: number): void {
  if (session.deadlinePassed) return;
  clearTimeout(session.deadlineTimer);
  session.deadlineTimer = setTimeout(
    () => {
      session.deadlinePassed = true;
      session.cause ??= 'deadline';
      terminate(session, session.graceMs);
    },
    Math.max(0, deadlineAt - monotonicNow()),
  );
}

/** (Re)arms the lease timer: SIGKILL at `killBy` unless a later renewal moves it. */
function holdUntil(session: Session, killBy: number): void {
  session.killBy = killBy;
  clearTimeout(session.leaseTimer);
  const left = killBy - monotonicNow();
  if (left <= 0) {
    killNow(session, 'lease');
    return;
  }
  session.leaseTimer = setTimeout(() => killNow(session, 'lease'), left);
}

function ended(session: Session, code: number): void {
  if (session.ended) return;
  session.ended = true;
  clearTimeout(session.leaseTimer);
  clearTimeout(session.deadlineTimer);
  clearTimeout(session.killTimer);
  // Whatever the session left behind in its group goes with it.
  signalGroup(session, 'SIGKILL');
  sessions.delete(session.id);
  if (session.dropped > 0) send({ t: 'dropped', id: session.id, lines: session.dropped });
  send({ t: 'exit', id: session.id, code, ...(session.cause === undefined ? {} : { cause: session.cause }) });
  if (hostGone && sessions.size === 0) process.exit(0);
}

function start(order: Extract<ToRuntime, { t: 'start' }>): void {
  const argv = [...pdeathsig, ...order.command];
  let child: ChildProcess;
  try {
    child = spawn(argv[0]!, argv.slice(1), {
      detached: true,
      // fd 3 is SESSION_NOTIFY_FD: the session writes readiness announcements there.
      stdio: ['ignore', 'pipe', 'pipe', 'pipe'],
      env: { ...order.env },
    });
  } catch (err) {
    process.stderr.write(`session runtime: could not start session ${order.id}: ${(err as Error).message}\n`);
    send({ t: 'exit', id: order.id, code: 127, cause: 'spawn_failed' });
    return;
  }
  const session: Session = {
    id: order.id,
    child,
    graceMs: order.graceMs,
    pid: child.pid,
    leaseTimer: undefined,
    deadlineTimer: undefined,
    deadlinePassed: false,
    killTimer: undefined,
    killAt: Number.POSITIVE_INFINITY,
    killBy: order.killBy,
    cause: undefined,
    dropped: 0,
    ended: false,
  };
  sessions.set(order.id, session);
  child.on('error', (err) => {
    process.stderr.write(`session runtime: session ${order.id}: ${err.message}\n`);
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
  for (const stream of ['stdout', 'stderr'] as const) {
    createInterface({ input: child[stream]!, crlfDelay: Infinity }).on('line', (line) => {
      if (unsent >= MAX_UNSENT) {
        session.dropped++;
        return;
      }
      send({ t: 'out', id: order.id, stream, line: line.length > MAX_LINE ? `${line.slice(0, MAX_LINE)}…` : line });
    });
  }
  const notify = child.stdio[3];
  if (notify !== null && notify !== undefined) readNotifications(order.id, notify as NodeJS.ReadableStream);
  holdUntil(session, order.killBy);
  stopAt(session, order.deadlineAt);
  if (hostGone) terminate(session, Math.min(session.graceMs, ORPHAN_GRACE_MS));
}

/** How long a session's end waits for what it wrote to `SESSION_NOTIFY_FD` before it exited to be read. */
const NOTIFY_DRAIN_MS = 100;
/** Longest line read on `SESSION_NOTIFY_FD`; a longer one is skipped whole, never buffered. */
const MAX_NOTIFY_LINE = 1024;
/** Longest endpoint a session may announce (the contract's). */
const MAX_ENDPOINT = 512;
/** Bad notification lines reported to the host per session; the rest are only counted. */
const BAD_REPORTED = 5;

/**
 * Reads JSON lines from a session's `SESSION_NOTIFY_FD`: `{"ready": true, "endpoint"?: "..."}` marks
 * it ready (the host hears of it again only when the endpoint changes); anything else is reported as a
 * bad line (the first few) and ignored. Memory stays bounded whatever the session writes: at most one
 * line of {@link MAX_NOTIFY_LINE} characters is held.
 */
function readNotifications(id: string, stream: NodeJS.ReadableStream): void {
  let line = '';
  let overlong = false;
  let bad = 0;
  let announced: string | undefined | null = null;
  const reject = (reason: string): void => {
    bad++;
    if (bad <= BAD_REPORTED) send({ t: 'notify_bad', id, reason, count: bad });
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
    const { ready, endpoint } = (message ?? {}) as { ready?: unknown; endpoint?: unknown };
    if (ready !== true) return reject('not {"ready": true, ...}');
    if (
      endpoint !== undefined &&
      (typeof endpoint !== 'string' || endpoint.length < 1 || endpoint.length > MAX_ENDPOINT)
    )
      return reject(`endpoint must be a string of 1 to ${MAX_ENDPOINT} characters`);
    if (announced === endpoint) return;
    announced = endpoint;
    send({ t: 'ready', id, ...(endpoint === undefined ? {} : { endpoint }) });
  };
  stream.setEncoding('utf8');
  stream.on('data', (chunk: string) => {
    let from = 0;
    for (;;) {
      const newline = chunk.indexOf('\n', from);
      const piece = newline === -1 ? chunk.slice(from) : chunk.slice(from, newline);
      if (!overlong) {
        line += piece;
        if (line.length > MAX_NOTIFY_LINE) {
          overlong = true;
          line = '';
        }
      }
      if (newline === -1) return;
      if (overlong) reject(`a line longer than ${MAX_NOTIFY_LINE} characters`);
      else handle(line);
      line = '';
      overlong = false;
      from = newline + 1;
    }
  });
  stream.on('error', () => {});
}

process.on('message', (order: ToRuntime) => {
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
});

/** The host is gone (or asked us to stop): end every session quickly, then exit. */
function shutdown(graceMs: (session: Session) => number): void {
  hostGone = true;
  if (sessions.size === 0) process.exit(0);
  for (const session of sessions.values()) terminate(session, graceMs(session));
}

// The channel closes when the host dies, however it died, or when it is done with us.
process.on('disconnect', () => shutdown((session) => Math.min(session.graceMs, ORPHAN_GRACE_MS)));
// A SIGTERM sent to the runtime itself (a process manager stopping everything) stops the sessions
// with their grace time; the host learns each exit, then that the runtime is gone.
process.on('SIGTERM', () => shutdown((session) => session.graceMs));
process.on('SIGINT', () => {});
process.on('SIGHUP', () => {});
// Nobody may read our stderr any more (the host's log pipe went with it): never die of EPIPE.
process.stderr.on('error', () => {});
if (!process.connected) process.exit(0);
