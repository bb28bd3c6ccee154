import {
  comparePositions,
  finalEventTypes,
  type EventFeed,
  type EventPosition,
  type EventSubscription,
  type SessionEvent,
} from '@cq/coordinator';
import type { FastifyBaseLogger } from 'fastify';

/** Events the dashboard shows when a page opens. */
export const RECENT_EVENTS = 50;

/** What {@link RecentEvents.open} gives a page: the newest events so far, then a subscription to the rest. */
export interface RecentAndLive {
  /** Oldest first; nothing at or before the page's own `Last-Event-ID`. */
  recent: SessionEvent[];
  /** The events after the last of `recent` (and after every event before it), as they happen. */
  live: EventSubscription;
}

/**
 * The newest session events, kept in this process for every dashboard page: one subscription to the
 * feed, started by the first page, seeded once with the feed's newest kept events (16,384 commands
 * plus at most {@link RECENT_EVENTS}; see `EventFeed.latest`), then kept up to date from that
 * subscription at no further cost. A page opening costs Redis nothing more. Were the ring to end (the
 * feed closed, its reader fell behind), the next page starts it again.
 */
export class RecentEvents {
  readonly #feed: EventFeed;
  readonly #log: FastifyBaseLogger;
  readonly #size: number;
  #ring: SessionEvent[] = [];
  /** The newest endings (terminal events), kept apart: a burst of other events does not push them out. */
  #endings: SessionEvent[] = [];
  /** Resolves once the ring holds every event handed on so far (its seed, then what came meanwhile). */
  #ready: Promise<void> | undefined;
  #subscription: EventSubscription | undefined;
  #closed = false;

  constructor(feed: EventFeed, log: FastifyBaseLogger, size = RECENT_EVENTS) {
    this.#feed = feed;
    this.#log = log;
    this.#size = size;
  }

  /**
   * The newest events (those after `after` only, when given) and a subscription whose first event
   * follows them: nothing missed, nothing twice. Without the ring (its seed failed) the page still
   * goes on live, with no history. Rejects only when the feed cannot subscribe.
   */
  async open(after?: EventPosition): Promise<RecentAndLive> {
    let ring = true;
    try {
      await this.#start();
    } catch (err) {
      ring = false;
      this.#log.warn({ err }, 'dashboard: the newest events could not be read; the page starts with none');
    }
    // Nothing runs between the ring being up to date and the subscription joining: every event the feed
    // hands on arrives in a task of its own, and only promise continuations run from here to there.
    const live = await this.#feed.subscribe();
    const recent = !ring
      ? []
      : this.#ring.filter((e) => after === undefined || comparePositions(e.position, after) > 0);
    return { recent, live };
  }

  /**
   * The newest sessions that ended (their terminal events), newest first, at most the ring's size:
   * what the ring has seen (seeded from the newest kept events). Costs Redis nothing once the ring is up.
   */
  async endings(): Promise<SessionEvent[]> {
    await this.#start();
    return [...this.#endings].reverse();
  }

  /** Ends the ring's subscription. */
  close(): void {
    this.#closed = true;
    this.#subscription?.close();
  }

  #start(): Promise<void> {
    if (this.#closed) return Promise.reject(new Error('the dashboard is closing'));
    this.#ready ??= this.#seed().catch((err: unknown) => {
      this.#ready = undefined;
      throw err;
    });
    return this.#ready;
  }

  /** Subscribes, reads the newest events before the subscription's first, then keeps the ring from it. */
  async #seed(): Promise<void> {
    const subscription = await this.#feed.subscribe();
    try {
      this.#ring = await this.#feed.latest(this.#size, subscription.joinedAt);
      this.#endings = this.#ring.filter((e) => e.type !== 'withdrawn' && finalEventTypes.has(e.type));
    } catch (err) {
      subscription.close();
      throw err;
    }
    this.#subscription = subscription;
    let caughtUp!: () => void;
    const ready = new Promise<void>((resolve) => (caughtUp = resolve));
    void this.#follow(subscription, caughtUp);
    await ready;
  }

  /** Adds each event of `subscription` to the ring; `caughtUp` once none is left waiting. */
  async #follow(subscription: EventSubscription, caughtUp: () => void): Promise<void> {
    try {
      for (;;) {
        if (subscription.queued === 0) caughtUp();
        const event = await subscription.next();
        if (event === undefined) break;
        this.#ring.push(event);
        if (this.#ring.length > this.#size) this.#ring.shift();
        if (event.type !== 'withdrawn' && finalEventTypes.has(event.type)) {
          this.#endings.push(event);
          if (this.#endings.length > this.#size) this.#endings.shift();
        }
      }
    } catch (err) {
      this.#log.warn({ err }, 'dashboard: the newest events stopped; the next page reads them again');
    } finally {
      subscription.close();
      if (this.#subscription === subscription) {
        this.#subscription = undefined;
        this.#ready = undefined;
        this.#ring = [];
        this.#endings = [];
      }
      caughtUp();
    }
  }
}
