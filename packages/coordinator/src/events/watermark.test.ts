import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import type { SessionEvent } from './session-event.js';
import { Watermark, type WatermarkOptions } from './watermark.js';

const T0 = 1_700_000_000_000;

/** An event written at `ms` (Redis time) with sequence `seq`, in slot `slot`. */
function event(ms: number, seq = 0, slot = 1): SessionEvent {
  return {
    id: `${ms}-${seq}-${slot}`,
    position: { ms, seq, slot },
    type: 'pending',
    sessionId: `s-${ms}-${seq}-${slot}`,
    userId: 'u',
    fence: 1,
    at: ms,
  };
}

function watermark(options: Partial<WatermarkOptions> = {}): Watermark {
  return new Watermark({ roundIntervalMs: 2, roundTimeoutMs: 1000, maxPending: 100_000, id: 'w', ...options });
}

/** Starts the round the watermark asks for now; fails when it asks for anything else. */
function startRound(w: Watermark): string {
  const step = w.next();
  if (step.kind !== 'round') throw new Error(`expected a round, the watermark asked for ${JSON.stringify(step)}`);
  return step.tag;
}

describe('Watermark (fake clocks, no Redis)', () => {
  beforeEach(() => {
    vi.useFakeTimers({ toFake: ['Date', 'performance'] });
    vi.setSystemTime(T0);
  });
  afterEach(() => vi.useRealTimers());

  it('asks for nothing while no event waits', () => {
    const w = watermark();
    expect(w.next()).toEqual({ kind: 'idle' });
    w.startAt(T0 - 1);
    expect(w.next()).toEqual({ kind: 'idle' });
  });

  it('releases nothing until a mark from every master is in, then every event older than the smallest, in id order', () => {
    const w = watermark();
    w.startAt(T0 - 100);
    for (const e of [event(T0 - 10, 0, 7), event(T0 - 20, 1, 3), event(T0 - 20, 0, 9), event(T0 - 5)])
      expect(w.receive(e)).toBe('held');
    const tag = startRound(w);
    expect(w.mark(tag, T0 + 1)).toBeUndefined(); // marks may arrive before the feed knows how many
    expect(w.expect(tag, 3)).toBeUndefined();
    expect(w.mark(tag, T0 - 9)).toBeUndefined();
    const released = w.mark(tag, T0 + 3);
    // The slowest master's mark (T0 - 9) bounds it: the event of T0 - 5 waits.
    expect(released?.map((e) => e.id)).toEqual([`${T0 - 20}-0-9`, `${T0 - 20}-1-3`, `${T0 - 10}-0-7`]);
    expect(w.at).toBe(T0 - 10);
    expect(w.waiting).toBe(1);
  });

  it('completes a round whose marks all arrived before the feed learnt how many masters there are', () => {
    const w = watermark();
    w.startAt(T0 - 100);
    w.receive(event(T0 - 50));
    const tag = startRound(w);
    expect(w.mark(tag, T0)).toBeUndefined();
    expect(w.mark(tag, T0)).toBeUndefined();
    expect(w.expect(tag, 2)?.map((e) => e.position.ms)).toEqual([T0 - 50]);
  });

  it("keeps an event of the mark's own millisecond for a later round (another may still share it)", () => {
    const w = watermark();
    w.startAt(T0 - 100);
    w.receive(event(T0 - 10));
    const first = startRound(w);
    w.expect(first, 1);
    expect(w.mark(first, T0 - 10)).toEqual([]);
    expect(w.waiting).toBe(1);
    vi.advanceTimersByTime(2);
    const second = startRound(w);
    w.expect(second, 1);
    expect(w.mark(second, T0 - 9)?.map((e) => e.id)).toEqual([`${T0 - 10}-0-1`]);
  });

  it("starts no round before this clock has left the newest event's millisecond", () => {
    const w = watermark();
    w.startAt(T0 - 100);
    w.receive(event(T0)); // written this very millisecond
    expect(w.next()).toEqual({ kind: 'wait', ms: 1 });
    vi.advanceTimersByTime(1);
    expect(w.next().kind).toBe('round');
  });

  it('waits at most 2 ms for an event stamped ahead of this clock (Redis runs ahead)', () => {
    const w = watermark();
    w.startAt(T0 - 100);
    w.receive(event(T0 + 500));
    expect(w.next()).toEqual({ kind: 'wait', ms: 2 });
  });

  it('starts rounds at most once per roundIntervalMs while events wait', () => {
    const w = watermark({ roundIntervalMs: 50 });
    w.startAt(T0 - 100);
    w.receive(event(T0 - 20));
    const tag = startRound(w);
    w.expect(tag, 1);
    w.mark(tag, T0 - 30);
    w.receive(event(T0 - 10));
    expect(w.next()).toEqual({ kind: 'wait', ms: 50 });
    vi.advanceTimersByTime(49);
    expect(w.next()).toEqual({ kind: 'wait', ms: 1 });
    vi.advanceTimersByTime(1);
    expect(w.next().kind).toBe('round');
    expect(w.rounds).toBe(2);
  });

  it('a round whose marks do not all arrive is a gap after roundTimeoutMs; once interrupted, its late marks prove nothing', () => {
    const w = watermark({ roundTimeoutMs: 1000 });
    w.startAt(T0 - 100);
    w.receive(event(T0 - 10));
    const tag = startRound(w);
    w.expect(tag, 2);
    w.mark(tag, T0);
    expect(w.next()).toEqual({ kind: 'wait', ms: 1000 });
    vi.advanceTimersByTime(999);
    expect(w.next()).toEqual({ kind: 'wait', ms: 1 });
    vi.advanceTimersByTime(1);
    expect(w.next()).toEqual({ kind: 'gap', reason: 'a watermark round got no mark from every master in time' });
    w.interrupt();
    expect(w.mark(tag, T0)).toBeUndefined();
    expect(w.at).toBe(T0 - 100);
    // The read-back holds the event again (once), and the next round releases it.
    expect(w.restore(event(T0 - 10))).toBe(false);
    expect(w.restore(event(T0 - 8))).toBe(true);
    const again = startRound(w);
    w.expect(again, 1);
    expect(w.mark(again, T0 + 1)?.map((e) => e.position.ms)).toEqual([T0 - 10, T0 - 8]);
  });

  it('holds each event once and drops those at or below the watermark (already released)', () => {
    const w = watermark();
    w.startAt(T0 - 100);
    expect(w.receive(event(T0 - 100))).toBe('known');
    expect(w.receive(event(T0 - 50))).toBe('held');
    expect(w.receive(event(T0 - 50))).toBe('known');
    expect(w.waiting).toBe(1);
  });

  it('starting at a time drops the events a first read-back got at or before it', () => {
    const w = watermark();
    w.restore(event(T0 - 20));
    w.restore(event(T0 - 10));
    w.startAt(T0 - 15);
    expect(w.waiting).toBe(1);
    expect(w.at).toBe(T0 - 15);
  });

  it('lets every waiting event go once more than 100,000 wait (read back after the gap), and holds again after', () => {
    const w = watermark();
    w.startAt(T0 - 200_000);
    const receipts = new Set(Array.from({ length: 100_000 }, (_, i) => w.receive(event(T0 - 150_000 + i))));
    expect(receipts).toEqual(new Set(['held']));
    expect(w.waiting).toBe(100_000);
    expect(w.receive(event(T0 - 1))).toBe('overflow');
    expect(w.waiting).toBe(0);
    expect(w.at).toBe(T0 - 200_000);
    expect(w.receive(event(T0 - 1))).toBe('held');
  });

  it('a read-back is not bounded: it holds whatever the streams hold', () => {
    const w = watermark({ maxPending: 2 });
    for (let i = 0; i < 5; i++) expect(w.restore(event(T0 - 10 + i))).toBe(true);
    expect(w.waiting).toBe(5);
  });
});
