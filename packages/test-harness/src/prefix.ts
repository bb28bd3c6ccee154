import { randomBytes } from 'node:crypto';
import type { Redis } from 'ioredis';

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
