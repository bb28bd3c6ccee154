import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { describe, expect, it } from 'vitest';
import { demoSessionPath } from './session-process.js';

/** Runs the demo session with `metadata`; resolves with its exit code, output and run time. */
function demo(
  metadata: string | undefined,
  signalAfterMs?: number,
): Promise<{ code: number | null; signal: NodeJS.Signals | null; out: string; err: string; ms: number }> {
  const started = performance.now();
  const child = spawn('/bin/sh', [demoSessionPath], {
    env: {
      PATH: process.env['PATH'] ?? '',
      USER_ID: 'alice',
      SESSION_ID: 's-1',
      FENCE: '7',
      ...(metadata === undefined ? {} : { SESSION_METADATA: metadata }),
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  let err = '';
  child.stdout.on('data', (chunk: Buffer) => (out += chunk.toString()));
  child.stderr.on('data', (chunk: Buffer) => (err += chunk.toString()));
  if (signalAfterMs !== undefined) setTimeout(() => child.kill('SIGTERM'), signalAfterMs);
  return once(child, 'close').then(([code, signal]) => ({
    code: code as number | null,
    signal: signal as NodeJS.Signals | null,
    out,
    err,
    ms: performance.now() - started,
  }));
}

describe('the built-in demo session (a POSIX shell script)', () => {
  it('runs for durationMs, printing a line a second, then exits with exitCode', async () => {
    const run = await demo('{"durationMs": 1300, "exitCode": 3}');
    expect(run.code).toBe(3);
    expect(run.ms).toBeGreaterThanOrEqual(1300);
    expect(run.ms).toBeLessThan(1300 + 500);
    expect(run.out).toContain('demo: alice session s-1 fence 7 started; runs 1300 ms');
    expect(run.out).toContain('alive for 1 s');
    expect(run.out).toContain('done');
  });

  it('exits 0 by default, and 143 at once on SIGTERM', async () => {
    expect((await demo('{"durationMs":0}')).code).toBe(0);
    const stopped = await demo(undefined, 300);
    expect(stopped.code).toBe(143);
    expect(stopped.ms).toBeLessThan(300 + 500);
    expect(stopped.out).toContain('runs until stopped');
    expect(stopped.out).toContain('stopping on SIGTERM');
  });

  it('ignores metadata it cannot use, saying why, and runs with the defaults', async () => {
    const bad = await demo('{"durationMs": "soon", "exitCode": 300}', 300);
    expect(bad.err).toContain('durationMs must be a non-negative integer');
    expect(bad.err).toContain('exitCode must be an integer from 0 to 255');
    expect(bad.code).toBe(143);
  });
});
