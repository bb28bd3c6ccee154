import { Redis } from 'ioredis';
import { inject } from 'vitest';
import { cleanUp, deletePrefix, randomPrefix } from '@cq/test-harness';
import { Coordinator, type CoordinatorOptions } from '../coordinator.js';
import type { AdmitOutcome } from '../session-types.js';
import { setTimeout as sleep } from 'node:timers/promises';

/** A client on the run's shared Redis. */
export function connect(url: string = inject('redisUrl')): Redis {
  return new Redis(url, { maxRetriesPerRequest: 1, lazyConnect: false });
}

/**
 * A coordinator on the shared Redis under a random key prefix; its keys and clients are removed after
 * the file's tests.
 */
export function testCoordinator(
  options: Partial<Omit<CoordinatorOptions, 'redis' | 'keyPrefix'>> = {},
  url?: string,
): Coordinator {
  const redis = connect(url);
  const keyPrefix = randomPrefix();
  const coordinator = new Coordinator({ redis, keyPrefix, ...options });
  cleanUp(async () => {
    if (redis.status === 'ready') await deletePrefix(redis, keyPrefix);
    redis.disconnect();
  });
  return coordinator;
}

/** `n` separate connections, so that concurrent calls really arrive from many clients at once. */
export function connectionPool(n: number, url: string = inject('redisUrl')): Redis[] {
  const pool = Array.from({ length: n }, () => connect(url));
  cleanUp(() => pool.forEach((r) => r.disconnect()));
  return pool;
}

/** Same coordinator (same prefix and policy) seen through each connection of a pool. */
export function coordinatorsOn(pool: readonly Redis[], like: Coordinator): Coordinator[] {
  return pool.map((redis) => new Coordinator({ redis, keyPrefix: like.keys.prefix, policy: like.policy }));
}

/** Redis's own clock, epoch ms. */
export async function redisNow(c: Coordinator): Promise<number> {
  const [seconds, micros] = await c.redis.time();
  return Number(seconds) * 1000 + Math.floor(Number(micros) / 1000);
}

/**
 * Resolves once `ms` milliseconds have passed by the clock (performance.now()), for tests whose claim is
 * about time itself (retry advice, expiry). A timer alone can fire early by that measure: libuv counts
 * from the loop's cached time, which is behind the clock by however long the current turn has run, and a
 * call sent after exactly `retryAfterMs` then came a millisecond too soon (a CI failure of the sliding
 * window's retry advice).
 */
export async function elapse(ms: number): Promise<void> {
  const end = performance.now() + ms;
  for (let left = ms; left > 0; left = end - performance.now()) await sleep(Math.ceil(left));
}

/** Resolves when `signal` aborts, with the time it took from now in ms. */
export function abortedWithin(signal: AbortSignal): Promise<number> {
  const start = performance.now();
  return new Promise((resolve) => {
    if (signal.aborted) resolve(0);
    signal.addEventListener('abort', () => resolve(performance.now() - start), { once: true });
  });
}

/** Issues a token for `userId` and admits it; throws unless both succeed. */
export async function issueAndAdmit(
  coordinator: Coordinator,
  userId: string,
): Promise<Extract<AdmitOutcome, { outcome: 'admitted' }>> {
  const issued = await coordinator.tokens.issue(userId);
  if (issued.outcome !== 'issued') throw new Error(`token not issued: ${issued.outcome}`);
  const admitted = await coordinator.sessions.admit(issued.token);
  if (admitted.outcome !== 'admitted') throw new Error(`not admitted: ${admitted.outcome}`);
  return admitted;
}
