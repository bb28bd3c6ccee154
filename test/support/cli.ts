// The built `cq` command line, run by the system tests as a user would run it.
import { spawn } from 'node:child_process';
import { onTestFinished } from 'vitest';
import { ROOT } from './processes.js';

/** Runs the built `cq` with `args`; resolves with its exit code and output. */
export function cq(
  args: string[],
  env: Record<string, string> = {},
): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [`${ROOT}packages/cli/bin/cq.js`, ...args], {
      env: { PATH: process.env['PATH'] ?? '', ...env },
    });
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
