import type { Context } from '../context.js';
import { fanOut, type Command } from '../fan-out.js';
import { wrapRedisError } from '../redis-errors.js';
import { SLOT_COUNT } from '../slots.js';

/** What reading some slots' live indexes found. */
export interface SlotReading {
  readonly due: string[];
  /** Slots whose index was empty when read. */
  readonly empty: number[];
  /** Slots whose index held a session. */
  readonly live: number[];
  /** The first (smallest) due time of each slot of `live`, epoch ms, in the same order. */
  readonly firsts: number[];
}

/** How the live indexes are read. */
export interface SlotReadOptions {
  /** Live indexes read per pipelined batch. */
  readonly batchSize: number;
  /** Due users taken from one slot's live index per read (the rest wait for the next). */
  readonly perSlot: number;
}

/** Redis's clock, epoch ms. */
export async function redisNow(context: Context): Promise<number> {
  try {
    const [seconds, micros] = await context.redis.time();
    return Number(seconds) * 1000 + Math.floor(Number(micros) / 1000);
  } catch (err) {
    throw wrapRedisError(err);
  }
}

/**
 * Reads the given slots' live indexes: the first entry of each, then the due users of those with any
 * due at `at` (Redis's clock, read here when not given).
 */
export async function readSlots(
  context: Context,
  slots: readonly number[],
  options: SlotReadOptions,
  at?: number,
): Promise<SlotReading> {
  const { redis, keys } = context;
  const { batchSize, perSlot } = options;
  const due: string[] = [];
  const empty: number[] = [];
  const live: number[] = [];
  const firsts: number[] = [];
  const now = at ?? (await redisNow(context));
  try {
    for (let i = 0; i < slots.length; i += batchSize) {
      const batch = slots.slice(i, i + batchSize);
      const heads = await fanOut(
        redis,
        batch.map((slot): Command => ['zrange', keys.liveIndex(slot), 0, 0, 'WITHSCORES']),
      );
      const dueSlots: number[] = [];
      heads.forEach((reply, j) => {
        const [, score] = reply as string[];
        if (score === undefined) return empty.push(batch[j]!);
        live.push(batch[j]!);
        firsts.push(Number(score));
        if (Number(score) <= now) dueSlots.push(batch[j]!);
      });
      if (dueSlots.length === 0) continue;
      const replies = await fanOut(
        redis,
        dueSlots.map((slot): Command => ['zrangebyscore', keys.liveIndex(slot), '-inf', now, 'LIMIT', 0, perSlot]),
      );
      for (const users of replies) due.push(...(users as string[]));
    }
  } catch (err) {
    throw wrapRedisError(err);
  }
  return { due, empty, live, firsts };
}

let every: number[] | undefined;

/** Every cluster slot, 0 to 16383. */
export function allSlots(): readonly number[] {
  return (every ??= Array.from({ length: SLOT_COUNT }, (_, i) => i));
}
