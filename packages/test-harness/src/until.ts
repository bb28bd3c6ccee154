import { setTimeout as sleep } from 'node:timers/promises';

/**
 * Polls `check` every 20 ms until it holds; rejects after `timeoutMs` with an error naming `what`.
 * Resolves with the time it took, ms. For tests that wait for a condition instead of sleeping.
 */
export async function until(check: () => boolean | Promise<boolean>, timeoutMs: number, what: string): Promise<number> {
  const start = performance.now();
  for (;;) {
    if (await check()) return performance.now() - start;
    if (performance.now() - start > timeoutMs) throw new Error(`${what}: not within ${timeoutMs} ms`);
    await sleep(20);
  }
}
