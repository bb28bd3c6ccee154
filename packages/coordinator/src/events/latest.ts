import { fanOut, type Command } from '../fan-out.js';
import type { Keys } from '../keys.js';
import { wrapRedisError, type RedisClient } from '../redis-errors.js';
import { SLOT_COUNT } from '../slots.js';
import { comparePositions, decodeEntries, entryIdOf } from './codec.js';
import type { SessionEvent } from './session-event.js';

/** Slots whose newest events are asked for at once. */
const BATCH = 2048;

/**
 * The newest `count` events the slots' streams keep at or before `throughMs`, oldest first, in two
 * rounds whose cost does not grow with the number of events kept: each slot's newest event (16,384
 * `XREVRANGE … COUNT 1`, pipelined in batches), then at most `count` events of each of the `count`
 * slots whose newest events are the newest (at most `count` commands). No other slot can hold one of
 * the newest `count`: each of those slots has a newer event than anything in the others. A replay from
 * an old position would instead read every event after it. Throws {@link UnavailableError} when Redis
 * cannot answer.
 */
export async function latestEvents(
  reader: RedisClient,
  keys: Keys,
  count: number,
  throughMs: number,
): Promise<SessionEvent[]> {
  if (count <= 0) return [];
  const through = String(throughMs);
  try {
    const heads: SessionEvent[] = [];
    for (let first = 0; first < SLOT_COUNT; first += BATCH) {
      const slots = Array.from({ length: Math.min(BATCH, SLOT_COUNT - first) }, (_, i) => first + i);
      const pages = await fanOut(
        reader,
        slots.map((slot): Command => ['xrevrange', keys.events(slot), through, '-', 'COUNT', 1]),
      );
      pages.forEach((page, i) => heads.push(...decodeEntries(slots[i]!, page as Array<[string, string[]]>)));
    }
    heads.sort((a, b) => comparePositions(b.position, a.position));
    const newestSlots = heads.slice(0, count);
    if (newestSlots.length === 0) return [];
    // With `count` heads or more, the newest `count` events are all at or after the oldest of those
    // heads; with fewer, every kept event of those slots may be one of them.
    const bound = heads.length >= count ? entryIdOf(newestSlots[newestSlots.length - 1]!.position) : '-';
    const pages = await fanOut(
      reader,
      newestSlots.map((head): Command => [
        'xrevrange',
        keys.events(head.position.slot),
        through,
        bound,
        'COUNT',
        count,
      ]),
    );
    const events = pages.flatMap((page, i) =>
      decodeEntries(newestSlots[i]!.position.slot, page as Array<[string, string[]]>),
    );
    events.sort((a, b) => comparePositions(b.position, a.position));
    return events.slice(0, count).reverse();
  } catch (err) {
    throw wrapRedisError(err);
  }
}
