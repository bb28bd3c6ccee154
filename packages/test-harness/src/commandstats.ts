import type { Redis } from 'ioredis';
import { until } from './until.js';

/** Commands an observer sends itself, left out of every count. */
const OBSERVER = new Set(['config|resetstat', 'info', 'pttl']);

/**
 * Calls of every command Redis ran during `during`, by command, from INFO commandstats after a reset:
 * what Redis itself counts, the commands scripts run inside included. The observer's own commands
 * (RESETSTAT, INFO, PTTL) are left out.
 */
export async function commandsDuring(redis: Redis, during: () => Promise<unknown>): Promise<Map<string, number>> {
  await redis.config('RESETSTAT');
  await during();
  const info = await redis.info('commandstats');
  const calls = new Map<string, number>();
  for (const [, name, count] of info.matchAll(/^cmdstat_([^:]+):calls=(\d+)/gm))
    if (!OBSERVER.has(name!)) calls.set(name!, Number(count));
  return calls;
}

/** The sum of {@link commandsDuring}'s calls. */
export function totalCalls(calls: ReadonlyMap<string, number>): number {
  return [...calls.values()].reduce((a, b) => a + b, 0);
}

/** The commands called most, as `name count, ...`. */
export function topCalls(calls: ReadonlyMap<string, number>, n = 6): string {
  return [...calls.entries()]
    .sort((a, b) => b[1] - a[1])
    .slice(0, n)
    .map(([name, count]) => `${name} ${count}`)
    .join(', ');
}

/** Resolves after `ms` of wall-clock time (a measurement window, not a wait for a condition). */
export async function windowOf(ms: number): Promise<void> {
  const startedAt = performance.now();
  await until(() => performance.now() - startedAt >= ms, ms + 1000, `a window of ${ms} ms`);
}

/**
 * Waits until the middle of a sweep interval: the holder of the sweeping turn (`turnKey`) renews it as
 * each sweep begins (its PTTL jumps back up), so a window of whole intervals started half an interval
 * later holds exactly that many sweeps, whatever the phase.
 */
export async function midSweepInterval(redis: Redis, turnKey: string, intervalMs: number): Promise<void> {
  let last = await redis.pttl(turnKey);
  await until(
    async () => {
      const now = await redis.pttl(turnKey);
      const renewed = now > last + 100;
      last = now;
      return renewed;
    },
    intervalMs * 3,
    'a renewal of the sweeping turn',
  );
  await windowOf(intervalMs / 2);
}
