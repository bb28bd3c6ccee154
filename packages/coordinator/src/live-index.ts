import type { Context } from './context.js';
import { wrapRedisError } from './redis-errors.js';
import type { HistoryEntry } from './session-types.js';
import { SLOT_COUNT } from './slots.js';

/** A user with a live session, as the index knows it. */
export interface IndexedUser {
  readonly userId: string;
  /** When the session is next due for a check (pending deadline or lease expiry), epoch ms. */
  readonly dueAt: number;
}

/** A recent ending, with its user. */
export type RecentEnding = HistoryEntry & { readonly userId: string };

/** Everything the index holds, read in one pass. */
export interface IndexSnapshot {
  readonly live: IndexedUser[];
  /** Newest first. */
  readonly ended: RecentEnding[];
}

/**
 * Reads the per-slot indexes (live sessions and recent endings) of every cluster slot in pipelined
 * batches: 2 × 16384 cheap commands, never a keyspace scan.
 */
export async function readIndex(
  context: Context,
  options: { batchSize?: number; endedPerSlot?: number } = {},
): Promise<IndexSnapshot> {
  const { redis, keys } = context;
  const batchSize = options.batchSize ?? 2048;
  const endedPerSlot = options.endedPerSlot ?? 20;
  const live: IndexedUser[] = [];
  const ended: RecentEnding[] = [];
  try {
    for (let first = 0; first < SLOT_COUNT; first += batchSize) {
      const slots = Array.from({ length: Math.min(batchSize, SLOT_COUNT - first) }, (_, i) => first + i);
      let replies: Array<[string[], string[]]>;
      if ('nodes' in redis) {
        replies = await Promise.all(
          slots.map(
            async (slot) =>
              [
                await redis.zrange(keys.liveIndex(slot), 0, -1, 'WITHSCORES'),
                await redis.lrange(keys.ended(slot), 0, endedPerSlot - 1),
              ] as [string[], string[]],
          ),
        );
      } else {
        const pipeline = redis.pipeline();
        for (const slot of slots)
          pipeline.zrange(keys.liveIndex(slot), 0, -1, 'WITHSCORES').lrange(keys.ended(slot), 0, endedPerSlot - 1);
        const results = (await pipeline.exec()) ?? [];
        replies = slots.map((_, i) => {
          const [zErr, z] = results[2 * i]!;
          const [lErr, l] = results[2 * i + 1]!;
          if (zErr) throw zErr;
          if (lErr) throw lErr;
          return [z as string[], l as string[]];
        });
      }
      for (const [members, endings] of replies) {
        for (let i = 0; i + 1 < members.length; i += 2)
          live.push({ userId: members[i]!, dueAt: Number(members[i + 1]) });
        for (const json of endings) ended.push(JSON.parse(json) as RecentEnding);
      }
    }
  } catch (err) {
    throw wrapRedisError(err);
  }
  ended.sort((a, b) => b.endedAt - a.endedAt);
  return { live, ended };
}
