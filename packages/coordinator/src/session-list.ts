// The live sessions of every user, listed: the session list's directory, a page of it, and a session by
// its id. Every live session is in its slot's live-session index (a sorted set per cluster slot); the
// directory (one sorted set on a slot of its own) holds the slots that may hold one, so a page reads
// the slots it lists and not 16384 of them.
//
// Why a session live for a whole walk appears exactly once. The walk goes through the pairs (slot, user
// id) in one total order (slots by number, users by id within a slot), each page starting after the last
// pair the previous one examined; a user has at most one live session. A live session's user is in its
// slot's index from its admission to its end, and its slot is in the directory all that while: admit-13
// admits nothing in a slot whose `listed` key is missing, the key is set only after the slot is entered
// in the directory (enterDirectory-3), and it is deleted only while the slot has no live session
// (unlistSlot-2), before the directory entry of its generation is dropped (dropDirectory-2). So every
// such pair is in the order for the whole walk, and is examined once. Sessions that start or end
// meanwhile may appear or not; none appears twice.
import { randomBytes } from 'node:crypto';
import type { Context } from './context.js';
import { ScriptCode, replyCode, unexpectedReply } from './errors.js';
import { fanOut, type Command } from './fan-out.js';
import { parseHistoryEntry } from './records.js';
import { wrapRedisError } from './redis-errors.js';
import type { HistoryEntry, LiveState, SessionView } from './session-types.js';
import { SLOT_COUNT } from './slots.js';
import { assertInteger } from './validate.js';

/** What {@link SessionStore.list} keeps: every given filter must match. */
export interface SessionFilter {
  readonly state?: LiveState;
  readonly pool?: string;
  readonly workerId?: string;
  readonly userId?: string;
  /** Labels the session must carry, each with this value. */
  readonly labels?: Readonly<Record<string, string>>;
}

/** Where a walk goes on from: after user `after` of slot `slot` ('' for the slot's start). */
export interface ListPosition {
  readonly slot: number;
  readonly after: string;
}

export interface ListOptions {
  /** Sessions a page holds at most (1 to 1000). @defaultValue 100 */
  readonly limit?: number;
  /**
   * Live sessions the page reads at most (at least 1): with selective filters a page ends here, short
   * of `limit`, with a `next`. @defaultValue 4 × `limit`
   */
  readonly maxExamined?: number;
  /** The previous page's `next`; absent: from the start. */
  readonly from?: ListPosition;
}

/** One page: its sessions, and where the next begins (absent on the last page). */
export interface SessionPage {
  readonly sessions: SessionView[];
  readonly next?: ListPosition;
  /** Sessions read to fill the page (the filters are applied to what is read). */
  readonly examined: number;
}

/** A session found by its id: live, or ended and still in its user's history. */
export type SessionById =
  | { readonly live: true; readonly session: SessionView }
  | { readonly live: false; readonly userId: string; readonly entry: HistoryEntry };

/** What reads a user's live session (settling an overdue one first): {@link SessionStore.settleAndRead}. */
export interface LiveSessionReader {
  settleAndRead(userId: string): Promise<SessionView | undefined>;
}

/** Directory slots fetched at a time. */
const DIRECTORY_BATCH = 64;

/**
 * A random session id (a UUID of RFC 9562's layout, version 4) whose last four hex digits are `slot`
 * (14 bits, below 0x4000): {@link slotOfSessionId} reads it back.
 */
export function sessionIdInSlot(slot: number): string {
  const bytes = randomBytes(16);
  bytes[6] = (bytes[6]! & 0x0f) | 0x40;
  bytes[8] = (bytes[8]! & 0x3f) | 0x80;
  bytes[14] = (slot >> 8) & 0x3f;
  bytes[15] = slot & 0xff;
  const hex = bytes.toString('hex');
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`;
}

/** The cluster slot a session id from {@link sessionIdInSlot} carries. */
export function slotOfSessionId(sessionId: string): number {
  return Number.parseInt(sessionId.slice(-4), 16) & 0x3fff;
}

/**
 * Enters `slot` in the session list's directory and sets its `listed` key, so that it admits again
 * (admit-13 answers `unlisted` until then).
 */
export async function enterSlot(context: Context, slot: number): Promise<void> {
  const directory = context.keys.directory();
  const reply = await context.scripts.run(
    'enterDirectory',
    [directory.slots, directory.generations, directory.counter],
    [slot],
  );
  if (replyCode(reply) !== ScriptCode.Ok) throw unexpectedReply('enterDirectory', reply);
  try {
    await context.redis.set(context.keys.listed(slot), String(reply[1]));
  } catch (err) {
    throw wrapRedisError(err);
  }
}

/**
 * Takes `slot` out of the directory when it has no live session and its `listed` key still holds
 * `generation`; nothing otherwise (a slot admitting again meanwhile stays).
 */
async function unlist(context: Context, slot: number, generation: string): Promise<void> {
  const unlisted = await context.scripts.run(
    'unlistSlot',
    [context.keys.liveIndex(slot), context.keys.listed(slot)],
    [generation],
  );
  if (replyCode(unlisted) !== ScriptCode.Ok) return;
  const directory = context.keys.directory();
  await context.scripts.run('dropDirectory', [directory.slots, directory.generations], [slot, generation]);
}

/** Whether `session` matches every filter given. */
function matches(session: SessionView, filter: SessionFilter): boolean {
  if (filter.state !== undefined && session.state !== filter.state) return false;
  if (filter.pool !== undefined && session.pool !== filter.pool) return false;
  if (filter.workerId !== undefined && session.workerId !== filter.workerId) return false;
  if (filter.userId !== undefined && session.userId !== filter.userId) return false;
  for (const [key, value] of Object.entries(filter.labels ?? {})) if (session.labels[key] !== value) return false;
  return true;
}

/**
 * One page of the live sessions of every user that match `filter`, in the walk's order (slots by number,
 * users by id within a slot), from `options.from` on. Exactly-once for a session live for the whole
 * walk (see the top of this file). What a page costs Redis: the directory entries and slot indexes it
 * reads (at most about `2 × limit + 64` slots) and one read of each session it examines (at most
 * `options.maxExamined`, `4 × limit` by default): in proportion to `limit`, whatever the number of
 * users, sessions or slots. With selective filters a page may hold fewer than `limit` sessions and still
 * have a `next`.
 * Slots it finds empty leave the directory.
 */
export async function listSessions(
  context: Context,
  reader: LiveSessionReader,
  filter: SessionFilter,
  options: ListOptions = {},
): Promise<SessionPage> {
  const limit = options.limit ?? 100;
  if (filter.userId !== undefined) {
    // At most one live session: no walk. A second page (a cursor) is empty.
    if (options.from !== undefined) return { sessions: [], examined: 0 };
    const session = await reader.settleAndRead(filter.userId);
    return { sessions: session !== undefined && matches(session, filter) ? [session] : [], examined: 1 };
  }
  if (options.maxExamined !== undefined) assertInteger(options.maxExamined, 'maxExamined', 1);
  const maxExamined = options.maxExamined ?? 4 * limit;
  const maxSlots = 2 * limit + DIRECTORY_BATCH;
  const { slots: directoryKey } = context.keys.directory();
  const sessions: SessionView[] = [];
  let position: ListPosition = options.from ?? { slot: -1, after: '' };
  let examined = 0;
  let slotsRead = 0;
  try {
    while (sessions.length < limit && examined < maxExamined && slotsRead < maxSlots) {
      // The next directory slots: from the position's slot when part of it is left, else after it.
      const min = position.after === '' ? `(${position.slot}` : String(position.slot);
      const batch = (await context.redis.zrangebyscore(directoryKey, min, '+inf', 'LIMIT', 0, DIRECTORY_BATCH)).map(
        Number,
      );
      if (batch.length === 0) return { sessions, examined };
      const replies = await fanOut(
        context.redis,
        batch.flatMap((slot): Command[] => [
          ['zrange', context.keys.liveIndex(slot), 0, -1],
          ['get', context.keys.listed(slot)],
        ]),
      );
      const empty: Array<{ slot: number; generation: string }> = [];
      for (let i = 0; i < batch.length; i++) {
        const slot = batch[i]!;
        slotsRead++;
        const users = (replies[2 * i] as string[]).sort();
        const generation = replies[2 * i + 1] as string | null;
        if (users.length === 0 && generation !== null) empty.push({ slot, generation });
        const left = slot === position.slot ? users.filter((u) => u > position.after) : users;
        // Read this slot's users, no more than the page and the budget still take.
        for (let from = 0; from < left.length;) {
          const room = Math.min(limit - sessions.length, maxExamined - examined);
          if (room <= 0) break;
          const chunk = left.slice(from, from + room);
          const views = await Promise.all(chunk.map((userId) => reader.settleAndRead(userId)));
          for (let j = 0; j < chunk.length; j++) {
            examined++;
            position = { slot, after: chunk[j]! };
            const view = views[j];
            if (view !== undefined && matches(view, filter)) sessions.push(view);
          }
          from += chunk.length;
        }
        if (sessions.length >= limit || examined >= maxExamined) break;
        // The whole slot examined: the walk goes on after it.
        position = { slot, after: '' };
        if (slotsRead >= maxSlots) break;
      }
      await Promise.all(empty.map(({ slot, generation }) => unlist(context, slot, generation)));
      if (batch.length < DIRECTORY_BATCH && position.after === '' && position.slot >= batch[batch.length - 1]!)
        return { sessions, examined };
    }
  } catch (err) {
    throw wrapRedisError(err);
  }
  return { sessions, next: position, examined };
}

/** See {@link SessionStore.byId}. */
export async function sessionById(
  context: Context,
  reader: LiveSessionReader,
  sessionId: string,
): Promise<SessionById | undefined> {
  const slot = slotOfSessionId(sessionId);
  if (!(slot >= 0 && slot < SLOT_COUNT)) return undefined;
  let userId: string | null;
  try {
    userId = await context.redis.hget(context.keys.sessionIds(slot), sessionId);
  } catch (err) {
    throw wrapRedisError(err);
  }
  if (userId === null) return undefined;
  const live = await reader.settleAndRead(userId);
  if (live?.sessionId === sessionId) return { live: true, session: live };
  let history: string[];
  try {
    history = await context.redis.lrange(context.keys.user(userId).history, 0, -1);
  } catch (err) {
    throw wrapRedisError(err);
  }
  const needle = `"sessionId":${JSON.stringify(sessionId)}`;
  const found = history.find((json) => json.includes(needle));
  return found === undefined ? undefined : { live: false, userId, entry: parseHistoryEntry(found) };
}

/** What {@link stopMatching} did. */
export interface BulkStop {
  /** Live sessions that matched. */
  readonly matched: number;
  /** Of those, how many are now stopping or stopped (the others ended or changed meanwhile). */
  readonly stopping: number;
  /** True when more may match: call again. */
  readonly more: boolean;
}

/** What stops a user's session, as `DELETE` does: {@link SessionStore.requestStop}. */
export interface SessionStopper extends LiveSessionReader {
  requestStop(userId: string, match: { sessionId?: string }): Promise<{ outcome: string }>;
}

/**
 * Stops every live session matching `filter` (at least one filter), as `DELETE` does, each only while it
 * is the session found (its id named; a pending one gives its worker slot back at once, as
 * {@link SessionStopper.requestStop} does), at most `max` per call: walks the list from its start and stops
 * what each page holds, 100 at a time. `more` when the walk did not reach its end within `max` matches
 * or `maxExamined` sessions read.
 */
export async function stopMatching(
  context: Context,
  store: SessionStopper,
  filter: SessionFilter,
  options: { max?: number; maxExamined?: number } = {},
): Promise<BulkStop> {
  const max = options.max ?? 1000;
  const maxExamined = options.maxExamined ?? 20 * max;
  let matched = 0;
  let stopping = 0;
  let examined = 0;
  let from: ListPosition | undefined;
  for (;;) {
    const page = await listSessions(context, store, filter, {
      limit: Math.min(100, max - matched),
      ...(from === undefined ? {} : { from }),
    });
    examined += page.examined;
    matched += page.sessions.length;
    const outcomes = await Promise.all(
      page.sessions.map((s) => store.requestStop(s.userId, { sessionId: s.sessionId })),
    );
    stopping += outcomes.filter((o) => o.outcome === 'stopped' || o.outcome === 'stopping').length;
    if (page.next === undefined) return { matched, stopping, more: false };
    if (matched >= max || examined >= maxExamined) return { matched, stopping, more: true };
    from = page.next;
  }
}

/**
 * The secret that signs the list's cursors, the same for every API process of the deployment: made once
 * (32 random bytes, SET NX), read after. A cursor is signed so that a client cannot hand one back that
 * no page gave it, nor one of another filter.
 */
export async function listCursorSecret(context: Context): Promise<Buffer> {
  const key = `${context.keys.directory().slots}:cursor-secret`;
  try {
    await context.redis.set(key, randomBytes(32).toString('base64'), 'NX');
    const secret = await context.redis.get(key);
    if (secret === null) throw new Error('the cursor secret vanished');
    return Buffer.from(secret, 'base64');
  } catch (err) {
    throw wrapRedisError(err);
  }
}

/**
 * Enters in the directory those of `slots` (slots found to hold live sessions) whose `listed` key is
 * missing: the slots of sessions admitted before the session list existed (an upgrade), which would be
 * missing from the list until they end. One EXISTS per slot given, then one entry per slot missing.
 * The sweeper's list upgrade (`sweeper/list-upgrade.ts`) calls it after each of its full reads, and again
 * for slots whose check failed. Answers how many slots it entered.
 */
export async function enterUnlisted(context: Context, slots: readonly number[]): Promise<number> {
  if (slots.length === 0) return 0;
  let listed: unknown[];
  try {
    listed = await fanOut(
      context.redis,
      slots.map((slot): Command => ['exists', context.keys.listed(slot)]),
    );
  } catch (err) {
    throw wrapRedisError(err);
  }
  const missing = slots.filter((_, i) => Number(listed[i]) === 0);
  for (const slot of missing) await enterSlot(context, slot);
  return missing.length;
}
