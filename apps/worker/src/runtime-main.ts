// The session runtime's program (see session-runtime.ts): wires the runtime to this process, its IPC
// channel to the host, and its signals.
import { spawn } from 'node:child_process';
import { chownSync, mkdirSync, rmSync } from 'node:fs';
import { rm } from 'node:fs/promises';
import { dirname } from 'node:path';
import { settleWithin } from '@cq/service-kit';
import { slirpArgv } from './isolation.js';
import { createRuntime, orphanGrace } from './session-runtime.js';
import { monotonicNow, type ToRuntime } from './runtime-protocol.js';

/** Session directories being removed (in the background: a large one must not hold up a lease's kill). */
const removing = new Set<Promise<unknown>>();

const runtime = createRuntime({
  spawn: (argv, env, cwd, egress) =>
    spawn(argv[0]!, argv.slice(1), {
      detached: true,
      // fd 3 is SESSION_NOTIFY_FD: the session writes readiness announcements there. fd 4, with
      // `egress`: the network step's (it closes it before the session's own program runs).
      stdio: egress ? ['ignore', 'pipe', 'pipe', 'pipe', 'pipe'] : ['ignore', 'pipe', 'pipe', 'pipe'],
      env: { ...env },
      ...(cwd === undefined ? {} : { cwd }),
    }),
  send: (message, done) => {
    if (!process.connected) return;
    process.send!(message, undefined, {}, done);
  },
  makeDir: ({ path, uid, gid }) => {
    // The host's directory and the session's let others through, not list them (0711): the session's
    // init, root without capabilities, must enter it (`bwrap --chdir`) before it becomes the session's user.
    mkdirSync(dirname(path), { recursive: true, mode: 0o711 });
    rmSync(path, { recursive: true, force: true });
    mkdirSync(path, { mode: 0o711 });
    chownSync(path, uid, gid);
  },
  removeDir: (path) => {
    const removed = rm(path, { recursive: true, force: true, maxRetries: 3 })
      .catch((err: Error) => process.stderr.write(`session runtime: could not remove ${path}: ${err.message}\n`))
      .finally(() => removing.delete(removed));
    removing.add(removed);
  },
  startEgress: (pid) => {
    // fd 3: slirp4netns writes there once the namespace is configured; fd 4: it exits when that closes
    // (when this runtime dies, too).
    const slirp = spawn(slirpArgv(pid)[0]!, slirpArgv(pid).slice(1), {
      stdio: ['ignore', 'ignore', 'pipe', 'pipe', 'pipe'],
    });
    let stderr = '';
    slirp.stderr!.on('data', (chunk: Buffer) => (stderr = (stderr + chunk.toString()).slice(-400)));
    for (const fd of [3, 4]) (slirp.stdio[fd] as NodeJS.ReadableStream).on('error', () => {});
    const ready = new Promise<void>((resolve, reject) => {
      (slirp.stdio[3] as NodeJS.ReadableStream).once('data', () => resolve());
      slirp.once('error', reject);
      slirp.once('exit', (code, signal) =>
        reject(new Error(`slirp4netns exited (${code ?? signal}) before it was ready: ${stderr.trim()}`)),
      );
    });
    return { ready, stop: () => slirp.kill('SIGKILL') };
  },
  now: monotonicNow,
  signalGroup: (pgid, signal) => {
    try {
      process.kill(-pgid, signal);
    } catch {
      // ESRCH: the group is gone already.
    }
  },
  // Once the sessions' directories are removed (10 s at most: a directory of millions of files).
  exit: () => void settleWithin(Promise.allSettled(removing), 10_000).then(() => process.exit(0)),
  warn: (message) => process.stderr.write(`session runtime: ${message}\n`),
});

process.on('message', (order: ToRuntime) => runtime.order(order));
// The channel closes when the host dies, however it died, or when it is done with us.
process.on('disconnect', () => runtime.shutdown(orphanGrace));
// A SIGTERM sent to the runtime itself (a process manager stopping everything) stops the sessions
// with their grace time; the host learns each exit, then that the runtime is gone.
process.on('SIGTERM', () => runtime.shutdown((graceMs) => graceMs));
process.on('SIGINT', () => {});
process.on('SIGHUP', () => {});
// Nobody may read our stderr any more (the host's log pipe went with it): never die of EPIPE.
process.stderr.on('error', () => {});
if (!process.connected) process.exit(0);
