import { comparePositions } from './codec.js';
import type { SessionEvent } from './session-event.js';

/** Options of {@link Watermark}. */
export interface WatermarkOptions {
  /** Shortest time between two rounds, ms. */
  readonly roundIntervalMs: number;
  /** A round whose marks have not all arrived by then is a possible gap, ms. */
  readonly roundTimeoutMs: number;
  /** Events that may wait for a watermark before they are let go (and read back after the gap). */
  readonly maxPending: number;
  /** Prefix of the round tags: tells this watermark's rounds from any other's. */
  readonly id: string;
}

/** What the feed does next, as the watermark sees it. */
export type WatermarkStep =
  /** Nothing waits for a watermark. */
  | { readonly kind: 'idle' }
  /** Ask again in `ms` (a round may not start yet, or the round out may still complete). */
  | { readonly kind: 'wait'; readonly ms: number }
  /** Ask every master for a mark tagged `tag`, now; then tell {@link Watermark.expect} how many. */
  | { readonly kind: 'round'; readonly tag: string }
  /** The round out did not get every mark in time: messages may have been missed; read back. */
  | { readonly kind: 'gap'; readonly reason: string };

/** What {@link Watermark.receive} did with an event. */
export type Receipt = 'held' | 'known' | 'overflow';

interface Round {
  readonly tag: string;
  readonly startedAt: number;
  expected: number;
  readonly marks: number[];
}

/**
 * The watermark of one feed: events and marks in, releases out. Pure: it sends nothing, sets no
 * timer, and reads only the clocks (`Date.now()` for Redis-time comparisons, `performance.now()`
 * for its own intervals); the feed asks {@link Watermark.next} what to do, and when.
 *
 * An event is released once no event with a smaller id can still arrive: a round asks every master
 * for a mark (its Redis TIME); a master's publications reach the subscriber in the order it ran them,
 * and it writes nothing older than its mark afterwards, so once a round's marks have all arrived every
 * event older than the smallest of them is in hand. An event of the mark's own millisecond waits for a
 * later round (another event may still share that millisecond).
 */
export class Watermark {
  readonly #options: WatermarkOptions;
  /** Events received and not yet released, by id (also drops the copy a read-back gets again). */
  readonly #pending = new Map<string, SessionEvent>();
  #at = 0;
  #round: Round | undefined;
  #lastRoundAt = Number.NEGATIVE_INFINITY;
  /** The newest entry time (epoch ms) of any event received: a round is worth starting only after it. */
  #newestMs = 0;
  #rounds = 0;

  constructor(options: WatermarkOptions) {
    this.#options = options;
  }

  /** Every event up to this time (epoch ms) has been released; none after it. */
  get at(): number {
    return this.#at;
  }

  /** Events waiting for a watermark. */
  get waiting(): number {
    return this.#pending.size;
  }

  /** Rounds started so far. */
  get rounds(): number {
    return this.#rounds;
  }

  /** Starts at `ms` (a first mark, less 1): events at or before it count as released and are dropped. */
  startAt(ms: number): void {
    this.#at = ms;
    for (const [id, event] of this.#pending) if (event.position.ms <= ms) this.#pending.delete(id);
  }

  /**
   * An event from the subscription. `overflow`: more than `maxPending` events wait (no watermark for
   * too long: a master does not answer); all are let go, and the feed reads them back after the gap.
   */
  receive(event: SessionEvent): Receipt {
    if (!this.restore(event)) return 'known';
    if (event.position.ms > this.#newestMs) this.#newestMs = event.position.ms;
    if (this.#pending.size <= this.#options.maxPending) return 'held';
    this.#pending.clear();
    return 'overflow';
  }

  /** An event read back from the streams: held like a received one, without the bound; false when known. */
  restore(event: SessionEvent): boolean {
    // At or below the watermark: already released (every such event was in hand when it was set).
    if (event.position.ms <= this.#at || this.#pending.has(event.id)) return false;
    this.#pending.set(event.id, event);
    return true;
  }

  /** Drops the round out: messages may have been missed, so its marks would prove nothing. */
  interrupt(): void {
    this.#round = undefined;
  }

  /** What to do now: call it after every change, and when a wait it asked for has passed. */
  next(): WatermarkStep {
    const now = performance.now();
    if (this.#round !== undefined) {
      const left = this.#round.startedAt + this.#options.roundTimeoutMs - now;
      if (left > 0) return { kind: 'wait', ms: left };
      return { kind: 'gap', reason: 'a watermark round got no mark from every master in time' };
    }
    if (this.#pending.size === 0) return { kind: 'idle' };
    // A mark taken in the same millisecond as an event cannot release it (a later event may share that
    // millisecond): start once this clock has left the newest event's millisecond, unless Redis's clock
    // runs ahead of ours (then at most 2 ms later, and a further round releases it).
    const wait = Math.max(
      this.#lastRoundAt + this.#options.roundIntervalMs - now,
      Math.min(2, this.#newestMs + 1 - Date.now()),
    );
    if (wait > 0) return { kind: 'wait', ms: wait };
    this.#lastRoundAt = now;
    this.#rounds++;
    const tag = `${this.#options.id}:${this.#rounds}`;
    this.#round = { tag, startedAt: now, expected: Number.POSITIVE_INFINITY, marks: [] };
    return { kind: 'round', tag };
  }

  /**
   * Round `tag` went to `masters` masters. Answers the events released, in id order, when their marks
   * are all in already (they may arrive first); undefined while the round is still out.
   */
  expect(tag: string, masters: number): SessionEvent[] | undefined {
    const round = this.#round;
    if (round?.tag !== tag) return undefined;
    round.expected = masters;
    return this.#complete(round);
  }

  /**
   * A master's mark of round `tag`, at `ms` (its Redis TIME). Answers the events released, in id order,
   * when it completes its round (maybe none); undefined otherwise.
   */
  mark(tag: string, ms: number): SessionEvent[] | undefined {
    const round = this.#round;
    if (round?.tag !== tag) return undefined;
    round.marks.push(ms);
    return this.#complete(round);
  }

  #complete(round: Round): SessionEvent[] | undefined {
    if (round.marks.length < round.expected) return undefined;
    this.#round = undefined;
    const watermark = Math.min(...round.marks) - 1;
    if (watermark <= this.#at) return [];
    const released: SessionEvent[] = [];
    for (const [id, event] of this.#pending) {
      if (event.position.ms > watermark) continue;
      released.push(event);
      this.#pending.delete(id);
    }
    this.#at = watermark;
    return released.sort((a, b) => comparePositions(a.position, b.position));
  }
}
