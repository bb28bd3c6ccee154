import { spawn, type ChildProcess } from 'node:child_process';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import type { SupervisorSpec } from './supervisor.js';

/** How a session is started and stopped: a process under a supervisor, or anything in-process for benchmarks. */
export interface SessionLauncher {
  launch(spec: LaunchSpec): SessionHandle;
}

/** What a launcher is given for one session. */
export interface LaunchSpec {
  /** The contract's variables: SESSION_ID, USER_ID, FENCE, DEADLINE, SESSION_METADATA. */
  readonly sessionEnv: Record<string, string>;
  /** SIGTERM → SIGKILL grace, ms. */
  readonly graceMs: number;
  /** Time left until the deadline, ms. */
  readonly deadlineInMs: number;
  /** Receives each line the session prints. */
  readonly onOutput: (stream: 'stdout' | 'stderr', line: string) => void;
}

/** A running session. */
export interface SessionHandle {
  /** Resolves with the exit code (128 + signal number when killed). */
  readonly exited: Promise<number>;
  /** SIGTERM to its process group, SIGKILL after the grace time. */
  terminate(): void;
  /** SIGKILL to its process group now. */
  kill(): void;
}

/** Longest line of session output written to the log; longer lines are cut. */
const MAX_LINE = 4096;

/** The variables of the host's environment a session also gets; nothing else (no Redis credentials). */
const PASSED_THROUGH = ['PATH', 'HOME', 'LANG', 'LC_ALL', 'TZ', 'TMPDIR'];

const supervisorPath = fileURLToPath(new URL('./supervisor.js', import.meta.url));
const demoPath = fileURLToPath(new URL('./demo-session.js', import.meta.url));

/**
 * Runs each session as a process under the supervisor (`supervisor.js`), which ends the session's
 * process group when told to, at its deadline, or when this host dies.
 * @param sessionCommand shell command (`/bin/sh -c`), or undefined for the built-in demo session
 */
export function processLauncher(sessionCommand: string | undefined): SessionLauncher {
  const command = sessionCommand === undefined ? [process.execPath, demoPath] : ['/bin/sh', '-c', sessionCommand];
  return {
    launch(spec: LaunchSpec): SessionHandle {
      const env: Record<string, string> = {};
      for (const name of PASSED_THROUGH) {
        const value = process.env[name];
        if (value !== undefined) env[name] = value;
      }
      Object.assign(env, spec.sessionEnv);
      const supervisorSpec: SupervisorSpec = { command, env, graceMs: spec.graceMs, deadlineInMs: spec.deadlineInMs };
      const child: ChildProcess = spawn(process.execPath, [supervisorPath, JSON.stringify(supervisorSpec)], {
        stdio: ['pipe', 'pipe', 'pipe'],
        env: { PATH: process.env['PATH'] ?? '' },
      });
      for (const stream of ['stdout', 'stderr'] as const) {
        createInterface({ input: child[stream]!, crlfDelay: Infinity }).on('line', (line) =>
          spec.onOutput(stream, line.length > MAX_LINE ? `${line.slice(0, MAX_LINE)}…` : line),
        );
      }
      // The supervisor reads its orders from this pipe; it closing tells the supervisor the host is gone.
      child.stdin!.on('error', () => {});
      const send = (order: string): void => {
        if (child.stdin!.writable) child.stdin!.write(`${order}\n`);
      };
      const exited = new Promise<number>((resolve) => {
        child.on('error', () => resolve(127));
        child.on('exit', (code, signal) => resolve(code ?? (signal === 'SIGKILL' ? 137 : 143)));
      });
      return { exited, terminate: () => send('term'), kill: () => send('kill') };
    },
  };
}
