import type { RedisClient } from './redis-errors.js';

/** One Redis command: its name, then its arguments. */
export type Command = readonly [name: string, ...args: Array<string | number>];

/**
 * Sends many independent commands at once and answers their replies, in order: one pipeline on
 * standalone Redis (one round trip), and on Redis Cluster one command each, all at once (ioredis
 * sends each to its slot's node; a Cluster pipeline would need every key in one slot). Throws the
 * first command's error, as Redis gave it (callers wrap it).
 */
export async function fanOut(redis: RedisClient, commands: readonly Command[]): Promise<unknown[]> {
  if ('nodes' in redis) return Promise.all(commands.map(([name, ...args]) => redis.call(name, ...args)));
  const results = (await redis.pipeline(commands.map((command) => [...command])).exec()) ?? [];
  return commands.map((_, i) => {
    const [err, reply] = results[i] ?? [new Error('pipeline answered short')];
    if (err) throw err;
    return reply;
  });
}

/**
 * Runs `run` on each item, at most `limit` at once, starting no more once `stopped()` answers true;
 * resolves once every call started has settled, with their outcomes (one per call started, in order).
 */
export async function settleBounded<T, R>(
  items: readonly T[],
  limit: number,
  stopped: () => boolean,
  run: (item: T) => Promise<R>,
): Promise<Array<PromiseSettledResult<R>>> {
  const outcomes: Array<PromiseSettledResult<R>> = [];
  let next = 0;
  const lane = async (): Promise<void> => {
    while (next < items.length && !stopped()) {
      const index = next++;
      try {
        outcomes[index] = { status: 'fulfilled', value: await run(items[index]!) };
      } catch (reason) {
        outcomes[index] = { status: 'rejected', reason };
      }
    }
  };
  await Promise.all(Array.from({ length: Math.min(Math.max(1, limit), items.length) }, lane));
  return outcomes.filter((outcome) => outcome !== undefined);
}
