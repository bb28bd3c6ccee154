import type { RedisClient } from './redis-errors.js';

/**
 * Closes a Redis client: `QUIT` when it is connected, so the commands already sent get their answers,
 * else (or when `QUIT` fails) a plain `disconnect()`, which never waits for a Redis that is away.
 */
export async function closeRedis(client: RedisClient): Promise<void> {
  if (client.status !== 'ready') {
    client.disconnect();
    return;
  }
  await client.quit().then(
    () => {},
    () => client.disconnect(),
  );
}
