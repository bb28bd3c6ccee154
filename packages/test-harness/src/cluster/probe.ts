import { once } from 'node:events';
import { Redis } from 'ioredis';
import { HOST } from './address.js';

/** How long one probe of one node may take before it counts as not answering. */
const PROBE_TIMEOUT_MS = 1000;

/**
 * Runs `fn` on a fresh standalone connection to one node and closes it again. A node that is down or
 * does not answer makes it reject within about {@link PROBE_TIMEOUT_MS} instead of hanging.
 */
export async function onNode<T>(port: number, fn: (redis: Redis) => Promise<T>): Promise<T> {
  const redis = new Redis({
    host: HOST,
    port,
    lazyConnect: true,
    connectTimeout: PROBE_TIMEOUT_MS,
    commandTimeout: PROBE_TIMEOUT_MS,
    maxRetriesPerRequest: 0,
    retryStrategy: () => null,
    enableOfflineQueue: false,
    enableReadyCheck: false,
  });
  redis.on('error', () => {});
  try {
    await redis.connect();
    return await fn(redis);
  } finally {
    if (redis.status !== 'end') {
      const ended = once(redis, 'end');
      redis.disconnect();
      await ended;
    }
  }
}
