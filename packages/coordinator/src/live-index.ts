import type { Context } from './context.js';
import { fanOut, type Command } from './fan-out.js';
import { wrapRedisError } from './redis-errors.js';
import { parseHistoryEntry } from './records.js';
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
      const replies = await fanOut(
        redis,
        slots.flatMap((slot): Command[] => [
          ['zrange', keys.liveIndex(slot), 0, -1, 'WITHSCORES'],
          ['lrange', keys.ended(slot), 0, endedPerSlot - 1],
        ]),
      );
      for (let i = 0; i + 1 < replies.length; i += 2) {
        const members = replies[i] as string[];
        const endings = replies[i + 1] as string[];
        for (let j = 0; j + 1 < members.length; j += 2)
          live.push({ userId: members[j]!, dueAt: Number(members[j + 1]) });
        for (const json of endings) {
          const entry = parseHistoryEntry(json) as RecentEnding;
          ended.push(entry);
        }
      }
    }
  } catch (err) {
    throw wrapRedisError(err);
  }
  ended.sort((a, b) => b.endedAt - a.endedAt);
  return { live, ended };
}
