import TinyQueue from 'tinyqueue';
import { fanOut, type Command } from '../fan-out.js';
import type { Keys } from '../keys.js';
import { wrapRedisError, type RedisClient } from '../redis-errors.js';
import { SLOT_COUNT, slotOf } from '../slots.js';
import { comparePositions, decodeEntries, entryIdOf } from './codec.js';
import type { EventPosition, SessionEvent } from './session-event.js';

/** The first page read of a slot, events: small, so a replay over 16,384 slots starts small. */
const FIRST_PAGE = 4;
/** Slots whose first pages are asked for at once. */
const BATCH = 2048;

/** One slot's place in the merge: the page in hand and how far it has been read. */
interface Cursor {
  readonly slot: number;
  events: SessionEvent[];
  index: number;
  /** The size of the page asked for; it grows as the slot is read. */
  count: number;
  /** The page was full: the slot may hold more after it. */
  full: boolean;
}

/** Where a cursor stands: its next event, or, used up (waiting for its next page), its last one. */
function headOf(cursor: Cursor): EventPosition {
  // Nothing its next page holds can come before its last event.
  const event = cursor.events[Math.min(cursor.index, cursor.events.length - 1)];
  return event?.position ?? { ms: 0, seq: 0, slot: cursor.slot };
}

/**
 * The events after `after` and up to `throughMs` (inclusive) from the slots' streams, in id order: a
 * k-way merge over a priority queue of slot cursors, holding at most one page per slot; a slot's first
 * page is small and its pages grow (up to `pageSize`) as it is read, so a replay over many slots
 * starts with little in hand. Throws {@link UnavailableError} when Redis cannot answer.
 */
export async function* replay(
  reader: RedisClient,
  keys: Keys,
  after: EventPosition,
  throughMs: number,
  pageSize: number,
): AsyncGenerator<SessionEvent> {
  const through = String(throughMs);
  const queue = new TinyQueue<Cursor>([], (a, b) => comparePositions(headOf(a), headOf(b)));
  try {
    for (let first = 0; first < SLOT_COUNT; first += BATCH) {
      const slots = Array.from({ length: Math.min(BATCH, SLOT_COUNT - first) }, (_, i) => first + i);
      const pages = await fanOut(
        reader,
        slots.map((slot): Command => ['xrange', keys.events(slot), entryIdOf(after), through, 'COUNT', FIRST_PAGE]),
      );
      pages.forEach((page, i) => {
        const slot = slots[i]!;
        const events = decodeEntries(slot, page as Array<[string, string[]]>);
        const cursor: Cursor = { slot, events, index: 0, count: FIRST_PAGE, full: events.length === FIRST_PAGE };
        // The first page starts at `after`'s entry id, shared by other slots: skip what is not after it.
        while (cursor.index < events.length && comparePositions(events[cursor.index]!.position, after) <= 0)
          cursor.index++;
        if (cursor.index < events.length || cursor.full) queue.push(cursor);
      });
    }
    for (let cursor = queue.pop(); cursor !== undefined; cursor = queue.pop()) {
      if (cursor.index === cursor.events.length) {
        // This slot's page is used up but was full: read its next, larger page before comparing again.
        const last = cursor.events[cursor.events.length - 1]!;
        cursor.count = Math.min(pageSize, cursor.count * 4);
        const from = entryIdOf(last.position, true);
        const page = await reader.xrange(keys.events(cursor.slot), from, through, 'COUNT', cursor.count);
        cursor.events = decodeEntries(cursor.slot, page);
        cursor.index = 0;
        cursor.full = cursor.events.length === cursor.count;
        if (cursor.events.length > 0) queue.push(cursor);
        continue;
      }
      const event = cursor.events[cursor.index++]!;
      if (cursor.index < cursor.events.length || cursor.full) queue.push(cursor);
      yield event;
    }
  } catch (err) {
    throw wrapRedisError(err);
  }
}

/**
 * One user's events after `after` and up to `throughMs` (inclusive), in id order: only the user's slot's
 * stream is read (a page of `pageSize` at a time), and the events of other users of that slot skipped.
 */
export async function* replayUser(
  reader: RedisClient,
  keys: Keys,
  userId: string,
  after: EventPosition,
  throughMs: number,
  pageSize: number,
): AsyncGenerator<SessionEvent> {
  const stream = keys.user(userId).events;
  const slot = slotOf(`{u:${userId}}`);
  const through = String(throughMs);
  let from = entryIdOf(after);
  try {
    for (;;) {
      const page = await reader.xrange(stream, from, through, 'COUNT', pageSize);
      const events = decodeEntries(slot, page);
      for (const event of events)
        if (event.userId === userId && comparePositions(event.position, after) > 0) yield event;
      if (page.length < pageSize) return;
      // After the page's last entry (one that did not decode included).
      from = `(${page.at(-1)![0]}`;
    }
  } catch (err) {
    throw wrapRedisError(err);
  }
}
