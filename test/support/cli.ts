// The built `cq` command line, run by the system tests as a user would run it.
import { spawn } from 'node:child_process';
import { onTestFinished } from 'vitest';
import { ROOT } from './processes.js';

/** Runs the built `cq` with `args`; resolves with its exit code and output. */
export function cq(
  args: string[],
  env: Record<string, string> = {},
  input?: string | Buffer,
): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [`${ROOT}packages/cli/bin/cq.js`, ...args], {
      env: { PATH: process.env['PATH'] ?? '', ...env },
    });
    // Given: its stdin, then its end.
    if (input !== undefined) child.stdin.end(input);
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (c: Buffer) => (stdout += c.toString()));
    child.stderr.on('data', (c: Buffer) => (stderr += c.toString()));
    child.on('exit', (code) => resolve({ code, stdout, stderr }));
  });
}

/** Starts the built `cq` with `args` and leaves it running: its output so far, and its exit. */
export function cqStarted(
  args: string[],
  env: Record<string, string>,
): { output: { stdout: string; stderr: string }; exited: Promise<number | null>; stop: () => void } {
  const child = spawn(process.execPath, [`${ROOT}packages/cli/bin/cq.js`, ...args], {
    env: { PATH: process.env['PATH'] ?? '', ...env },
  });
  const output = { stdout: '', stderr: '' };
  child.stdout.on('data', (c: Buffer) => (output.stdout += c.toString()));
  child.stderr.on('data', (c: Buffer) => (output.stderr += c.toString()));
  const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
  onTestFinished(() => void child.kill());
  return { output, exited, stop: () => void child.kill() };
}

/**
 * Runs the built `cq` with `args`, its stdout a pipe this end closes once it has read the first line, as
 * `cq … | head -1` does; resolves, once cq has exited, with that line, its exit code and all its stderr.
 */
export function cqFirstLine(
  args: string[],
  env: Record<string, string>,
): Promise<{ line: string; code: number | null; stderr: string }> {
  const child = spawn(process.execPath, [`${ROOT}packages/cli/bin/cq.js`, ...args], {
    env: { PATH: process.env['PATH'] ?? '', ...env },
  });
  onTestFinished(() => void child.kill());
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (c: Buffer) => {
    stdout += c.toString();
    // The reader goes away: cq's next write finds the pipe closed (EPIPE).
    if (stdout.includes('\n')) child.stdout.destroy();
  });
  child.stderr.on('data', (c: Buffer) => (stderr += c.toString()));
  // 'close', not 'exit': stderr is read to its end.
  return new Promise((resolve) =>
    child.on('close', (code) => resolve({ line: stdout.slice(0, stdout.indexOf('\n')), code, stderr })),
  );
}
