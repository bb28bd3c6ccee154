import { comparePositions } from './codec.js';
import { EVENT_RETENTION_MS, type EventPosition, type SessionEvent } from './session-event.js';

/** Thrown by a subscription whose reader fell too far behind; it may resume with its last event's id. */
export class SlowReaderError extends Error {
  override name = 'SlowReaderError';
}

/** Options of {@link EventFeed.subscribe}. */
export interface SubscribeOptions {
  /** Only this user's events. */
  userId?: string;
  /** Replay every event after this position first (a reconnecting reader's `Last-Event-ID`). */
  after?: EventPosition;
}

/** What a subscription needs of its feed. @internal */
export interface SubscriptionSource {
  /** The streams' events after `after` up to `throughMs`, in id order (only `userId`'s, when given). */
  replay(after: EventPosition, throughMs: number, userId?: string): AsyncGenerator<SessionEvent>;
  /** The subscription ended: deliver it nothing more. */
  unsubscribe(subscription: EventSubscription): void;
}

/**
 * One reader's view of the feed: an async iterable of events in id order (a replay first, when it
 * resumes), with a bounded queue. Created by {@link EventFeed.subscribe}.
 */
export class EventSubscription implements AsyncIterable<SessionEvent> {
  readonly #source: SubscriptionSource;
  readonly #maxQueued: number;
  #queue: SessionEvent[] = [];
  #wake: (() => void) | undefined;
  #closed = false;
  #failure: Error | undefined;
  /**
   * The feed's watermark when this subscription joined, epoch ms: every event at or before it had been
   * handed on already (it comes only from a replay); the live ones are after it.
   */
  readonly joinedAt: number;
  /** The reader has every event up to this one already (its Last-Event-ID). */
  readonly #after: EventPosition | undefined;
  #replay: AsyncGenerator<SessionEvent> | undefined;
  readonly #onEnd: Array<(failure: Error | undefined) => void> = [];
  /** Only this user's events, when set. */
  readonly userId: string | undefined;
  /** True when `after` is older than the retention: the replay could not be whole and was skipped. */
  readonly expired: boolean;

  /** @internal */
  constructor(source: SubscriptionSource, options: SubscribeOptions, joinedAt: number, maxQueued: number) {
    this.#source = source;
    this.userId = options.userId;
    this.#maxQueued = maxQueued;
    this.joinedAt = joinedAt;
    this.#after = options.after;
    this.expired = options.after !== undefined && options.after.ms < joinedAt - EVENT_RETENTION_MS;
    if (options.after !== undefined && !this.expired)
      this.#replay = source.replay(options.after, joinedAt, options.userId);
  }

  /** @internal Called by the feed with each released batch. */
  deliver(events: readonly SessionEvent[]): void {
    if (this.#closed) return;
    for (const event of events) {
      if (this.userId !== undefined && event.userId !== this.userId) continue;
      if (event.position.ms <= this.joinedAt) continue;
      // Resumed on a process whose watermark was behind the reader's id: it has these already.
      if (this.#after !== undefined && comparePositions(event.position, this.#after) <= 0) continue;
      if (this.#queue.length >= this.#maxQueued) {
        this.#failure = new SlowReaderError(
          `the reader left more than ${this.#maxQueued} events unread; resume from the last event's id`,
        );
        this.#queue = [];
        this.close();
        return;
      }
      this.#queue.push(event);
    }
    this.#wake?.();
  }

  /** Events waiting to be read. */
  get queued(): number {
    return this.#queue.length;
  }

  /** The next event; undefined once the subscription is closed. */
  async next(): Promise<SessionEvent | undefined> {
    if (this.#replay !== undefined) {
      const replayed = await this.#replay.next();
      if (!replayed.done) return replayed.value;
      this.#replay = undefined;
    }
    for (;;) {
      const event = this.#queue.shift();
      if (event !== undefined) return event;
      if (this.#failure !== undefined) throw this.#failure;
      if (this.#closed) return undefined;
      await new Promise<void>((resolve) => (this.#wake = resolve));
      this.#wake = undefined;
    }
  }

  /**
   * Calls `callback` once the subscription ends, with the {@link SlowReaderError} when it ended because
   * its reader fell behind (a reader stuck writing to a full socket learns of it only this way).
   */
  onEnd(callback: (failure: Error | undefined) => void): void {
    if (this.#closed) callback(this.#failure);
    else this.#onEnd.push(callback);
  }

  /** Ends the subscription: a waiting {@link EventSubscription.next} resolves with undefined. */
  close(): void {
    if (this.#closed) return;
    this.#closed = true;
    this.#source.unsubscribe(this);
    void this.#replay?.return(undefined);
    this.#wake?.();
    for (const callback of this.#onEnd.splice(0)) callback(this.#failure);
  }

  async *[Symbol.asyncIterator](): AsyncGenerator<SessionEvent> {
    try {
      for (;;) {
        const event = await this.next();
        if (event === undefined) return;
        yield event;
      }
    } finally {
      this.close();
    }
  }
}
