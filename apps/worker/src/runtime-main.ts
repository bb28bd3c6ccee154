// The session runtime's program (see session-runtime.ts): wires the runtime to this process, its IPC
// channel to the host, and its signals.
import { spawn } from 'node:child_process';
import { createRuntime, orphanGrace } from './session-runtime.js';
import { monotonicNow, type ToRuntime } from './runtime-protocol.js';

const runtime = createRuntime({
  spawn: (argv, env, cwd) =>
    spawn(argv[0]!, argv.slice(1), {
      detached: true,
      // fd 3 is SESSION_NOTIFY_FD: the session writes readiness announcements there.
      stdio: ['ignore', 'pipe', 'pipe', 'pipe'],
      env: { ...env },
      ...(cwd === undefined ? {} : { cwd }),
    }),
  send: (message, done) => {
    if (!process.connected) return;
    process.send!(message, undefined, {}, done);
  },
  now: monotonicNow,
  signalGroup: (pgid, signal) => {
    try {
      process.kill(-pgid, signal);
    } catch {
      // ESRCH: the group is gone already.
    }
  },
  exit: () => process.exit(0),
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
