import { randomBytes } from 'node:crypto';
import { Redis as IORedis, type Redis } from 'ioredis';
import { cleanUp } from './clean-up.js';

/** A random key prefix, so test files can share one Redis and run in parallel. */
export function randomPrefix(label = 't'): string {
  return `${label}${randomBytes(6).toString('hex')}`;
}

/** Deletes every key under `prefix:` (test teardown only; SCAN is fine here, never in the product). */
export async function deletePrefix(redis: Redis, prefix: string): Promise<number> {
  let cursor = '0';
  let deleted = 0;
  do {
    const [next, keys] = await redis.scan(cursor, 'MATCH', `${prefix}:*`, 'COUNT', 1000);
    cursor = next;
    if (keys.length > 0) deleted += await redis.unlink(...keys);
  } while (cursor !== '0');
  return deleted;
}

/**
 * A connection of the test file's own to `url` and a random key prefix, both cleaned up after the
 * test (or the file's tests, when called outside one) (the prefix's keys deleted, the connection closed).
 */
export function isolatedRedis(url: string): { redis: Redis; keyPrefix: string } {
  const redis = new IORedis(url, { maxRetriesPerRequest: 1 });
  const keyPrefix = randomPrefix();
  cleanUp(async () => {
    if (redis.status === 'ready') await deletePrefix(redis, keyPrefix);
    redis.disconnect();
  });
  return { redis, keyPrefix };
}
