// The event codec: stream entry ids and SSE ids to positions and back, and events from their stream
// entries or channel messages (`lua/includes/events.lua` writes both).
import { SLOT_COUNT, slotOf } from '../slots.js';
import type { EventPosition, SessionEvent } from './session-event.js';

const EVENT_ID = /^(\d{1,15})-(\d{1,16})-(\d{1,5})$/;
const ENTRY_ID = /^(\d+)-(\d+)$/;

/** Parses an SSE event id (`Last-Event-ID`); undefined when it is not one of ours. */
export function parseEventId(id: string): EventPosition | undefined {
  const match = EVENT_ID.exec(id);
  if (match === null) return undefined;
  const position = { ms: Number(match[1]), seq: Number(match[2]), slot: Number(match[3]) };
  if (position.slot >= SLOT_COUNT || !Number.isSafeInteger(position.seq)) return undefined;
  return position;
}

/** Negative when `a` comes before `b`. */
export function comparePositions(a: EventPosition, b: EventPosition): number {
  return a.ms - b.ms || a.seq - b.seq || a.slot - b.slot;
}

/** The stream entry id of a position (`<ms>-<seq>`), for XRANGE; `exclusive` reads after it. */
export function entryIdOf(position: EventPosition, exclusive = false): string {
  return `${exclusive ? '(' : ''}${position.ms}-${position.seq}`;
}

/** The position after every event of millisecond `ms`, whatever its slot. */
export function endOfMs(ms: number): EventPosition {
  return { ms, seq: Number.MAX_SAFE_INTEGER, slot: SLOT_COUNT };
}

/**
 * Decodes one event from its stream entry id, slot and JSON; undefined for anything else. The slot
 * of an event from the channel is that of its user.
 */
export function decodeEvent(entryId: string, slot: number | undefined, json: string): SessionEvent | undefined {
  const entry = ENTRY_ID.exec(entryId);
  if (entry === null) return undefined;
  let body: Omit<SessionEvent, 'id' | 'position'>;
  try {
    body = JSON.parse(json) as Omit<SessionEvent, 'id' | 'position'>;
  } catch {
    return undefined;
  }
  if (typeof body.userId !== 'string' || typeof body.type !== 'string') return undefined;
  const position = { ms: Number(entry[1]), seq: Number(entry[2]), slot: slot ?? slotOf(`{u:${body.userId}}`) };
  return { ...body, id: `${entryId}-${position.slot}`, position };
}

/** Decodes the events of one slot's XRANGE reply (`[entryId, [field, json]]` each), skipping any that is not one. */
export function decodeEntries(slot: number, entries: ReadonlyArray<[string, string[]]>): SessionEvent[] {
  return entries.flatMap(([id, fields]) => {
    const event = decodeEvent(id, slot, fields[1] ?? '');
    return event === undefined ? [] : [event];
  });
}

/** Decodes an event channel message (`<entryId> <json>`); undefined when it is not one. */
export function decodeMessage(message: string): SessionEvent | undefined {
  const space = message.indexOf(' ');
  return decodeEvent(message.slice(0, space), undefined, message.slice(space + 1));
}

/** A watermark mark channel message (`mark <tag> <ms>`), or undefined. */
export function decodeMark(message: string): { tag: string; ms: number } | undefined {
  const [kind, tag, ms] = message.split(' ');
  if (kind !== 'mark' || tag === undefined || ms === undefined) return undefined;
  return { tag, ms: Number(ms) };
}
