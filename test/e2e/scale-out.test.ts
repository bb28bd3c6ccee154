import { startRedisServer } from '@cq/test-harness';
import { Redis } from 'ioredis';
import { describe, expect, it, onTestFinished } from 'vitest';
import { until, type Started } from '../support/processes.js';
import { startSystem } from '../support/system.js';

/** Calls of every command over `ms` (INFO commandstats), by command, after a reset. */
async function commandsOver(redis: Redis, ms: number): Promise<Map<string, number>> {
  await redis.config('RESETSTAT');
  const startedAt = performance.now();
  await until(() => performance.now() - startedAt >= ms, ms + 1000, 'the window');
  const info = await redis.info('commandstats');
  const calls = new Map<string, number>();
  for (const [, name, count] of info.matchAll(/^cmdstat_([^:]+):calls=(\d+)/gm))
    if (name !== 'config|resetstat' && name !== 'info') calls.set(name!, Number(count));
  return calls;
}

const total = (calls: Map<string, number>): number => [...calls.values()].reduce((a, b) => a + b, 0);
const top = (calls: Map<string, number>): string =>
  [...calls.entries()]
    .sort((a, b) => b[1] - a[1])
    .slice(0, 5)
    .map(([name, n]) => `${name} ${n}`)
    .join(', ');

describe('what Redis pays per API process', () => {
  it('10 idle API processes (and 2 idle hosts) cost Redis at most 1.2× what one does: they take turns to sweep', async () => {
    const server = await startRedisServer();
    onTestFinished(() => server.stop());
    const redis = new Redis(server.url);
    onTestFinished(() => redis.disconnect());
    // A sweep a second, so a 20 s window holds 20 of them, give or take one.
    const system = await startSystem({ redisUrl: server.url, workers: 2, apiEnv: { SWEEP_INTERVAL_MS: '1000' } });
    const WINDOW_MS = 20_000;
    const one = await commandsOver(redis, WINDOW_MS);
    const more: Started[] = [];
    for (let i = 0; i < 9; i++) more.push(await system.addApi());
    const ten = await commandsOver(redis, WINDOW_MS);
    const perSecond = (calls: Map<string, number>): number => (total(calls) * 1000) / WINDOW_MS;
    console.info(
      `idle, commands/s: 1 API process ${perSecond(one).toFixed(1)} (${top(one)}); ` +
        `10 API processes ${perSecond(ten).toFixed(1)} (${top(ten)}); ratio ${(total(ten) / total(one)).toFixed(2)}`,
    );
    expect(total(one)).toBeGreaterThan(0);
    expect(total(ten)).toBeLessThanOrEqual(total(one) * 1.2);
  }, 120_000);
});
