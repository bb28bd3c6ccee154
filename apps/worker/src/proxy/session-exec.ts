// Running a command inside a session for an API process (the contract's "Working inside a session"),
// over a connection of the proxy listener that presented an `exec` ticket: the request line, then
// frames both ways (@cq/service-kit's exec-frames.ts). The command runs as the plan's `execArgv` says:
// in the session's cgroups and namespaces, as its user, without a capability. It leads a process group
// of its own (with nsenter before it), which the host signals: SIGKILL when `timeoutMs` runs out or the
// session ends; SIGHUP when the connection drops, SIGKILL after SESSION_GRACE_MS. With `tty`, util-linux's
// `script`, run inside the session, gives it a terminal of the session's own devpts (so `tty` names a
// device the session sees); the size is set with `stty` on that terminal, from the host, by
// /proc/<pid>/fd/0 of the command (which also sends it SIGWINCH).
import { spawn, type ChildProcess } from 'node:child_process';
import { readFileSync, readdirSync, readlinkSync } from 'node:fs';
import type { Socket } from 'node:net';
import { constants } from 'node:os';
import {
  CHANNEL,
  EXEC_REQUEST_MAX_BYTES,
  FrameDecoder,
  execRequestSchema,
  frame,
  readSize,
  readUntil,
  type ExecStatus,
  type Frame,
} from '@cq/service-kit';
import type { Logger } from 'pino';
import type { ContainmentPlan } from '../containment.js';
import { firstInTree, inOwnNamespace, namespaceOf, type SessionNetTarget } from './session-ports.js';

/** What the host knows of a running session, for running a command inside it. */
export interface SessionExecTarget extends SessionNetTarget {
  /** Its SESSION_DIR (where commands run unless they name a `cwd`). */
  readonly dir: string;
  /** Its environment: a command gets it, with the request's `env` over it. */
  readonly env: Readonly<Record<string, string>>;
  /** The `cgroup.procs` files of its cgroups (none without caps). */
  readonly procs: readonly string[];
  /** SIGHUP → SIGKILL grace for a command whose connection dropped, ms. */
  readonly graceMs: number;
}

/** How long an API process has to send the command after the host's OK, ms. */
export const REQUEST_WAIT_MS = 5000;
/**
 * After a command exited, how long its output may stay silent (while the connection could take more)
 * before the host stops reading it, ms: something it left behind (a daemon) may hold its pipes open.
 */
export const OUTPUT_DRAIN_MS = 200;
/** Output gathered in one turn of the event loop is sent once it reaches this many bytes (a frame). */
const OUTPUT_FRAME_BYTES = 256 * 1024;
/** How long the status of a command killed by a signal from elsewhere waits to learn whether its session ended, ms. */
export const SESSION_END_WAIT_MS = 500;

/** A process in the session's own PID namespace: its init ({@link inOwnNamespace}). */
export function pidNamespacePid(leader: number): number | undefined {
  return inOwnNamespace(leader, 'pid');
}

/** The processes of process group `group` (as this machine numbers them), read from /proc. */
function groupMembers(group: number): number[] {
  const members: number[] = [];
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = readFileSync(`/proc/${entry}/stat`, 'utf8');
      // Fields after the command name: state, ppid, pgrp, ...
      if (Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[2]) === group) members.push(Number(entry));
    } catch {
      // gone meanwhile
    }
  }
  return members;
}

/** PF_EXITING in /proc/<pid>/stat's flags: the process is exiting (an init waits there for its namespace to empty). */
const PF_EXITING = 0x4;

/** Whether `pid` runs: not gone, not a zombie, not exiting. */
function running(pid: number): boolean {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    // Fields after the command name: state, ppid, pgrp, session, tty_nr, tpgid, flags, ...
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return !/^[ZX]/.test(fields[0]!) && (Number(fields[6]) & PF_EXITING) === 0;
  } catch {
    return false;
  }
}

/**
 * The first process below `pid` (breadth first) whose stdin is a terminal: the command `script` started
 * on the terminal it made (it lives as long as the command; what it runs in the foreground may not).
 */
function terminalHolder(pid: number): number | undefined {
  return firstInTree(pid, (at) => {
    try {
      return readlinkSync(`/proc/${at}/fd/0`).startsWith('/dev/pts/');
    } catch {
      return false; // gone meanwhile, or not ours to read
    }
  });
}

/** A POSIX shell word for `text`. */
export function shellQuote(text: string): string {
  return `'${text.replaceAll("'", "'\\''")}'`;
}

/** The argv a terminal runs: `script` gives `argv` a terminal of `cols`×`rows` inside the session. */
export function terminalArgv(argv: readonly string[], cols: number, rows: number): string[] {
  const line = `stty cols ${cols} rows ${rows} 2>/dev/null; exec ${argv.map(shellQuote).join(' ')}`;
  return ['script', '--quiet', '--return', '--command', line, '/dev/null'];
}

function signalNumber(signal: NodeJS.Signals): number {
  return (constants.signals as Record<string, number>)[signal] ?? 0;
}

/** A command's connection to a host, being served. */
export interface CommandRun {
  /** The session ended: the command is killed (the kernel did already when its PID namespace ended). */
  sessionEnded(): void;
}

/**
 * Serves one `exec` connection (after the host's OK): reads the request, runs the command inside the
 * session, carries its channels, and ends with its status. Never throws; a bad request is answered with
 * a `start_failed` status.
 */
export function serveCommand(
  socket: Socket,
  target: SessionExecTarget,
  plan: Pick<ContainmentPlan, 'execArgv'>,
  logger: Logger,
): CommandRun {
  let child: ChildProcess | undefined;
  let reason: ExecStatus['reason'];
  let finished = false;
  let killTimer: NodeJS.Timeout | undefined;
  let timeout: NodeJS.Timeout | undefined;

  let entered = false;
  let backstop: NodeJS.Timeout | undefined;
  const ended = (): boolean => child?.pid === undefined || child.exitCode !== null || child.signalCode !== null;
  /**
   * `signal` to the command's processes (its process group), but not to nsenter before them: nsenter
   * waits for the command and dies of what killed it, so the status is the command's, and what the
   * command leaves is its session's init's to reap. (Killed first, nsenter would leave the command to
   * its parent-death SIGKILL at once, with no time to end well after a hangup, and its orphans to the
   * host's init: a PID namespace ends only once every process of it is reaped.) A SIGKILL that nsenter
   * outlives (the command had not started) reaches the whole group a second later.
   */
  const signalCommand = (signal: NodeJS.Signals): void => {
    if (ended()) return;
    const leader = child!.pid!;
    for (const pid of entered ? groupMembers(leader) : [leader])
      if (pid !== leader || !entered)
        try {
          process.kill(entered ? pid : -pid, signal);
        } catch {
          // gone meanwhile
        }
    if (signal === 'SIGKILL' && entered && backstop === undefined) {
      backstop = setTimeout(() => {
        if (ended()) return;
        try {
          process.kill(-leader, 'SIGKILL');
        } catch {
          // gone meanwhile
        }
      }, 1000);
      backstop.unref();
    }
  };
  /** Sends the output gathered so far (set by `run`). */
  let flushOutput = (): void => {};
  const finish = (status: ExecStatus): void => {
    if (finished) return;
    finished = true;
    clearTimeout(timeout);
    clearTimeout(killTimer);
    clearTimeout(backstop);
    // Every byte of output before the status: the status is the last frame.
    flushOutput();
    if (!socket.destroyed) socket.end(frame(CHANNEL.status, JSON.stringify(status)));
  };
  const failed = (message: string): void =>
    finish({ status: 'Failure', exitCode: 127, reason: 'start_failed', message });

  socket.once('close', () => {
    if (finished) return;
    // Dropped: SIGHUP, as a terminal's hangup; SIGKILL after the grace time.
    reason ??= 'hangup';
    signalCommand('SIGHUP');
    killTimer = setTimeout(() => signalCommand('SIGKILL'), target.graceMs);
    killTimer.unref();
  });

  void (async () => {
    let line: Buffer;
    try {
      line = await readUntil(socket, '\n', EXEC_REQUEST_MAX_BYTES, REQUEST_WAIT_MS, 'command');
    } catch (err) {
      failed((err as Error).message);
      return;
    }
    let parsed: unknown;
    try {
      parsed = JSON.parse(line.toString('utf8'));
    } catch {
      failed('the command line is not JSON');
      return;
    }
    const checked = execRequestSchema.safeParse(parsed);
    if (!checked.success) {
      failed(`the command is not valid: ${checked.error.issues[0]?.message ?? 'invalid'}`);
      return;
    }
    const request = checked.data;
    if (socket.destroyed) return;
    const inside = target.pid === undefined ? undefined : pidNamespacePid(target.pid);
    entered = inside !== undefined;
    const cwd = request.cwd ?? target.dir;
    const argv = plan.execArgv(
      {
        pid: inside,
        userNamespace: inside !== undefined && namespaceOf('self', 'user') !== namespaceOf(inside, 'user'),
        procs: target.procs,
        cwd,
      },
      request.tty ? terminalArgv(request.argv, request.cols, request.rows) : request.argv,
      { ...target.env, ...(request.tty ? { TERM: 'xterm-256color', SHELL: '/bin/sh' } : {}), ...request.env },
    );
    if (argv === undefined) {
      failed("this host cannot run commands in its sessions: util-linux's setpriv is not on the PATH");
      return;
    }
    try {
      child = spawn(argv[0]!, argv.slice(1), {
        detached: true,
        stdio: ['pipe', 'pipe', 'pipe'],
        env: { PATH: process.env['PATH'] ?? '/usr/bin:/bin' },
      });
    } catch (err) {
      failed(`the command could not start: ${(err as Error).message}`);
      return;
    }
    run(child, inside, request.tty, request.timeoutMs);
  })().catch((err: unknown) => {
    logger.error({ err }, 'a command inside a session failed');
    failed('the host failed');
  });

  function run(proc: ChildProcess, inside: number | undefined, tty: boolean, timeoutMs: number | undefined): void {
    if (timeoutMs !== undefined) {
      timeout = setTimeout(() => {
        reason ??= 'timeout';
        signalCommand('SIGKILL');
      }, timeoutMs);
      timeout.unref();
    }
    for (const stream of [proc.stdin!, proc.stdout!, proc.stderr!]) stream.on('error', () => {});
    proc.once('error', (err) => failed(`the command could not start: ${err.message}`));
    // Output: what came in one turn of the event loop goes as one frame (a terminal's output comes in
    // pieces of a few KiB from its pty, and a frame apiece cost the host, the API and the client a
    // message each); a change of channel sends what came before it first, so stdout and stderr keep
    // their order. A connection that cannot take more pauses the command's pipes (it then blocks
    // writing: backpressure to the session, nothing piles up here).
    const outputs = [
      [proc.stdout!, CHANNEL.stdout],
      [proc.stderr!, CHANNEL.stderr],
    ] as const;
    /** Whether output waits for the connection, and when it last moved (`performance.now()`). */
    let waiting = false;
    let movedAt = performance.now();
    let gathered: Buffer[] = [];
    let gatheredBytes = 0;
    let gatheredChannel: number = CHANNEL.stdout;
    let sendLater: NodeJS.Immediate | undefined;
    flushOutput = (): void => {
      clearImmediate(sendLater);
      sendLater = undefined;
      if (gathered.length === 0) return;
      const payload = gathered;
      gathered = [];
      gatheredBytes = 0;
      if (socket.destroyed || socket.write(frame(gatheredChannel, payload)) || waiting) return;
      waiting = true;
      for (const [s] of outputs) s.pause();
      socket.once('drain', () => {
        waiting = false;
        movedAt = performance.now();
        outputs.forEach(([s]) => s.resume());
      });
    };
    for (const [stream, channel] of outputs)
      stream.on('data', (chunk: Buffer) => {
        movedAt = performance.now();
        if (socket.destroyed) return;
        if (channel !== gatheredChannel) flushOutput();
        gatheredChannel = channel;
        gathered.push(chunk);
        gatheredBytes += chunk.length;
        if (gatheredBytes >= OUTPUT_FRAME_BYTES) flushOutput();
        else sendLater ??= setImmediate(flushOutput);
      });
    // Input: stdin bytes, its close, a terminal's size.
    const decoder = new FrameDecoder();
    decoder.on('error', () => socket.destroy());
    decoder.on('data', (f: Frame) => {
      if (f.channel === CHANNEL.stdin) {
        if (!proc.stdin!.writableEnded && !proc.stdin!.write(f.payload)) {
          decoder.pause();
          proc.stdin!.once('drain', () => decoder.resume());
        }
      } else if (f.channel === CHANNEL.close && f.payload[0] === CHANNEL.stdin) proc.stdin!.end();
      else if (f.channel === CHANNEL.resize && tty) resize(proc, f.payload);
    });
    socket.pipe(decoder);
    socket.resume();

    proc.once('exit', (code, signal) => {
      const status = (): void => {
        const exitCode = code ?? 128 + signalNumber(signal!);
        finish({
          status: exitCode === 0 ? 'Success' : 'Failure',
          exitCode,
          ...(signal === null ? {} : { signal }),
          ...(reason === undefined || reason === 'hangup' ? {} : { reason }),
        });
      };
      // Its output is read to the end, however slowly the connection takes it, unless something it left
      // behind holds the pipes open: then once nothing has come for OUTPUT_DRAIN_MS while the
      // connection could take more.
      const drain = (): void => {
        if (proc.stdout!.readableEnded && proc.stderr!.readableEnded) {
          status();
          return;
        }
        const idle = setInterval(() => {
          if (waiting || performance.now() - movedAt < OUTPUT_DRAIN_MS) return;
          clearInterval(idle);
          proc.stdout!.destroy();
          proc.stderr!.destroy();
          status();
        }, OUTPUT_DRAIN_MS / 4);
        proc.once('close', () => {
          clearInterval(idle);
          status();
        });
      };
      // A signal from elsewhere may be the session's end: its init passes a stop's SIGTERM on to every
      // process of the session, and the kernel SIGKILLs them all once the init exits, before the host
      // hears that the session ended. Until its first process is gone or the host says so (a little
      // while at most), the status waits.
      if (signal === null || reason !== undefined || inside === undefined) {
        drain();
        return;
      }
      const since = performance.now();
      const check = (): void => {
        if (reason === undefined && !running(inside)) reason = 'session_ended';
        if (reason !== undefined || performance.now() - since >= SESSION_END_WAIT_MS) drain();
        else setTimeout(check, 20);
      };
      check();
    });
  }

  return {
    sessionEnded: () => {
      reason ??= 'session_ended';
      signalCommand('SIGKILL');
    },
  };
}

/** A terminal's new size, from a resize frame (`{"Width","Height"}`): `stty` on the command's terminal. */
function resize(proc: ChildProcess, payload: Buffer): void {
  const size = readSize(payload);
  if (size === undefined || proc.pid === undefined) return;
  const { cols, rows } = size;
  const pid = terminalHolder(proc.pid);
  if (pid === undefined) return;
  spawn('stty', ['-F', `/proc/${pid}/fd/0`, 'cols', String(cols), 'rows', String(rows)], { stdio: 'ignore' }).on(
    'error',
    () => {},
  );
}
