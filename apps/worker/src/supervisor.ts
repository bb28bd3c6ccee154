// The session supervisor: a small process between the worker host and one session. It starts the
// session in a process group of its own and ends that group:
//   - on "term" from the host (SIGTERM, then SIGKILL after the grace time), or "kill" (SIGKILL now);
//   - when its stdin pipe from the host closes: the host has died (even by SIGKILL), so the session
//     must not outlive the host's lease (SIGTERM, then SIGKILL within a second);
//   - at the session's deadline on its own (SIGTERM, then SIGKILL after the grace time), should the
//     host fail to do it.
// It exits with the session's exit code (128 + signal number when the session was killed).
import { spawn } from 'node:child_process';
import { constants } from 'node:os';

/** What the host passes as the single argument, in JSON. */
export interface SupervisorSpec {
  /** Program and arguments of the session. */
  command: string[];
  /** The session's whole environment. */
  env: Record<string, string>;
  /** SIGTERM → SIGKILL grace, ms. */
  graceMs: number;
  /** Time left until the session's deadline, ms, measured by the host just before it started us. */
  deadlineInMs: number;
}

/** How fast the group dies once the host is gone, ms. */
const ORPHAN_GRACE_MS = 1000;

const spec = JSON.parse(process.argv[2] ?? '{}') as SupervisorSpec;
const child = spawn(spec.command[0]!, spec.command.slice(1), { detached: true, stdio: ['ignore', 'inherit', 'inherit'], env: spec.env });
let killTimer: NodeJS.Timeout | undefined;
let killAt = Number.POSITIVE_INFINITY;

function signalGroup(signal: NodeJS.Signals): void {
  if (child.pid === undefined) return;
  try {
    process.kill(-child.pid, signal);
  } catch {
    // ESRCH: the group is gone already.
  }
}

/** SIGTERM now, SIGKILL after `graceMs` (or earlier, if an earlier SIGKILL is already due). */
function terminate(graceMs: number): void {
  signalGroup('SIGTERM');
  const at = performance.now() + graceMs;
  if (at >= killAt) return;
  killAt = at;
  clearTimeout(killTimer);
  killTimer = setTimeout(() => signalGroup('SIGKILL'), graceMs);
}

child.on('error', (err) => {
  process.stderr.write(`supervisor: could not start the session: ${err.message}\n`);
  process.exit(127);
});

child.on('exit', (code, signal) => {
  // Whatever the session left behind in its group goes with it.
  signalGroup('SIGKILL');
  process.exit(code ?? 128 + (signal === null ? 0 : (constants.signals[signal] ?? 0)));
});

const deadline = setTimeout(() => terminate(spec.graceMs), Math.max(0, spec.deadlineInMs));
deadline.unref();

let input = '';
process.stdin.setEncoding('utf8');
process.stdin.on('data', (chunk: string) => {
  input += chunk;
  let newline: number;
  while ((newline = input.indexOf('\n')) >= 0) {
    const line = input.slice(0, newline).trim();
    input = input.slice(newline + 1);
    if (line === 'term') terminate(spec.graceMs);
    else if (line === 'kill') terminate(0);
  }
});
// The pipe from the host closed: the host is gone.
process.stdin.on('end', () => terminate(Math.min(spec.graceMs, ORPHAN_GRACE_MS)));
process.stdin.on('error', () => terminate(Math.min(spec.graceMs, ORPHAN_GRACE_MS)));

// Signals sent to the host's whole process group (Ctrl-C) are the host's to handle; a SIGTERM sent to
// this process alone asks for the session to stop.
process.on('SIGINT', () => {});
process.on('SIGHUP', () => {});
process.on('SIGTERM', () => terminate(spec.graceMs));
