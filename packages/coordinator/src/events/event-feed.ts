import { randomUUID } from 'node:crypto';
import type { Context } from '../context.js';
import { UnavailableError } from '../errors.js';
import { wrapRedisError, type RedisClient } from '../redis-errors.js';
import type { SessionStore } from '../sessions.js';
import { ChannelSubscriber, reopen } from './channel-subscriber.js';
import { decodeMark, decodeMessage, endOfMs } from './codec.js';
import { EventSubscription, type SubscribeOptions, type SubscriptionSource } from './event-subscription.js';
import { latestEvents } from './latest.js';
import { replay, replayUser } from './replay.js';
import type { EventPosition, SessionEvent } from './session-event.js';
import { UserStream } from './user-stream.js';
import { Watermark } from './watermark.js';

/** Options of {@link EventFeed}. */
export interface EventFeedOptions {
  /** Shortest time between two watermark rounds, ms: bounds the feed's commands while events flow. @defaultValue 2 */
  roundIntervalMs?: number;
  /**
   * A round whose marks have not all arrived by then is taken for a possible gap (a master or a link
   * lost messages): the subscription is reopened and the streams read back. @defaultValue 1000
   */
  roundTimeoutMs?: number;
  /** Events a subscription may hold unread before it ends with {@link SlowReaderError}. @defaultValue 10000 */
  maxQueued?: number;
  /** Events waiting for a watermark the feed holds before it drops them and reads them back later. @defaultValue 100000 */
  maxPending?: number;
  /** Most events read per slot and command while replaying or reading back (pages grow to it). @defaultValue 500 */
  pageSize?: number;
  /** Client name of the feed's own connections (CLIENT LIST). @defaultValue `cq-events` */
  name?: string;
  /** Told of failures the feed recovers from by itself (Redis unreachable, a connection lost). */
  onError?: (err: unknown) => void;
}

const defaults = {
  roundIntervalMs: 2,
  roundTimeoutMs: 1000,
  maxQueued: 10_000,
  maxPending: 100_000,
  pageSize: 500,
  name: 'cq-events',
} as const satisfies EventFeedOptions;

/**
 * The session events of every slot, merged into one order, for every reader of one process.
 *
 * Each script that changes a session appends an event to its slot's stream and publishes it on the
 * event channel (`lua/includes/events.lua`). The feed holds one subscription to that channel
 * ({@link ChannelSubscriber}), however many readers it serves, and hands events on in the order of
 * their ids (`<ms>-<seq>-<slot>`), which every process computes alike, once its {@link Watermark} says
 * no smaller id can still arrive: the feed asks every master to publish its Redis TIME on the feed's
 * own mark channel (`publishEventMark`). Rounds run only while events wait, at most one per
 * `roundIntervalMs`.
 *
 * Whenever messages may have been missed (the subscription (re)opens, or a round's marks do not all
 * arrive), the feed reads the streams back from its watermark ({@link replay}) before it hands
 * anything else on. A reader resuming from an id gets the streams' events after it up to the
 * watermark at which it joined, then the live ones after both ({@link EventSubscription}).
 */
export class EventFeed implements SubscriptionSource {
  readonly #context: Context;
  readonly #sessions: SessionStore;
  readonly #options: Required<Omit<EventFeedOptions, 'onError'>> & Pick<EventFeedOptions, 'onError'>;
  readonly #channel: string;
  /** This feed's own mark channel: marks go to this process only, not to every API process. */
  readonly #markChannel: string;
  readonly #feedId = randomUUID().slice(0, 8);
  readonly #watermark: Watermark;
  readonly #subscriber: ChannelSubscriber;
  /** Subscriptions to every event, and those to one user's, by user. */
  readonly #everyone = new Set<EventSubscription>();
  readonly #byUser = new Map<string, Set<EventSubscription>>();
  #subscriptionCount = 0;
  /** Bumped whenever messages may have been missed: an opening that saw it change proves nothing. */
  #epoch = 0;
  /** Reads the streams (read-backs, replays) on connections of its own: requests never queue behind them. */
  #reader: RedisClient | undefined;
  #live = false;
  /** True once the feed has been live: a lost subscription is then reopened by the feed itself. */
  #everLive = false;
  /** True while the one loop that reopens the subscription runs. */
  #reopening = false;
  /** The wait the watermark asked for. */
  #timer: NodeJS.Timeout | undefined;
  #started: Promise<void> | undefined;
  readonly #closing = new AbortController();

  /** @internal Made by {@link Coordinator.eventFeed}. */
  constructor(context: Context, sessions: SessionStore, options: EventFeedOptions = {}) {
    this.#context = context;
    this.#sessions = sessions;
    this.#channel = context.keys.eventChannel();
    this.#markChannel = `${this.#channel}:mark:${this.#feedId}`;
    const { onError, ...rest } = options;
    this.#options = { ...defaults, ...stripUndefined(rest), onError };
    this.#watermark = new Watermark({ ...this.#options, id: this.#feedId });
    this.#subscriber = new ChannelSubscriber(context.redis, {
      channels: [this.#channel, this.#markChannel],
      name: this.#options.name,
      onMessage: (channel, message) => this.#onMessage(channel, message),
      onLost: () => {
        if (!this.#closed) this.#gap(new UnavailableError(new Error('the event subscription was lost; reopening it')));
      },
      onError: (err) => this.#options.onError?.(err),
    });
  }

  get #closed(): boolean {
    return this.#closing.signal.aborted;
  }

  /** Readers currently subscribed. */
  get subscribers(): number {
    return this.#subscriptionCount;
  }

  /** Watermark rounds run so far (each costs one command per master). */
  get rounds(): number {
    return this.#watermark.rounds;
  }

  /** Times the feed took messages for possibly missed and read the streams back (after the first start). */
  get readBacks(): number {
    return this.#epoch;
  }

  /**
   * Subscribes to the feed and waits until it is live: it has its first watermark. Called by
   * {@link EventFeed.subscribe} too; rejects with {@link UnavailableError} while Redis cannot be reached.
   */
  start(): Promise<void> {
    if (this.#closed) return Promise.reject(new Error('the event feed is closed'));
    this.#started ??= this.#open().catch((err: unknown) => {
      this.#started = undefined;
      this.#subscriber.drop();
      throw wrapRedisError(err);
    });
    return this.#started;
  }

  /**
   * A reader's subscription: the events from now on (after a replay from `after`), in id order.
   * Its iterator ends when {@link EventSubscription.close} is called or the feed closes, and throws
   * {@link SlowReaderError} when the reader leaves more than `maxQueued` events unread.
   */
  async subscribe(options: SubscribeOptions = {}): Promise<EventSubscription> {
    await this.start();
    if (this.#closed) throw new Error('the event feed is closed');
    const subscription = new EventSubscription(this, options, this.#watermark.at, this.#options.maxQueued);
    if (options.userId === undefined) this.#everyone.add(subscription);
    else {
      let set = this.#byUser.get(options.userId);
      if (set === undefined) this.#byUser.set(options.userId, (set = new Set()));
      set.add(subscription);
    }
    this.#subscriptionCount++;
    return subscription;
  }

  /**
   * One user's current or next session: its current state first (nothing while the user has none),
   * then each change, ending after a final event (a `withdrawn` admission waits for the next session).
   * Rejects, subscribing nothing, when the state cannot be read. With `after` (a resuming reader's
   * `Last-Event-ID`, an id this stream gave), the user's events after it instead, from the user's slot's
   * stream, then each change: no current state first.
   */
  async followUser(userId: string, options: { after?: EventPosition } = {}): Promise<UserStream> {
    if (options.after !== undefined)
      return new UserStream(await this.subscribe({ userId, after: options.after }), undefined, true);
    // Subscribe before reading, so nothing between the read and the first event is missed.
    const subscription = await this.subscribe({ userId });
    try {
      return new UserStream(subscription, await this.#sessions.settleAndRead(userId));
    } catch (err) {
      subscription.close();
      throw err;
    }
  }

  /** Stops the feed: every subscription ends, its connections close. */
  async close(): Promise<void> {
    this.#closing.abort();
    this.#live = false;
    this.#clearTimer();
    this.#watermark.interrupt();
    for (const subscription of [...this.#everyone, ...[...this.#byUser.values()].flatMap((set) => [...set])])
      subscription.close();
    this.#subscriber.drop();
    this.#reader?.disconnect();
  }

  /** @internal */
  unsubscribe(subscription: EventSubscription): void {
    const { userId } = subscription;
    const set = userId === undefined ? this.#everyone : this.#byUser.get(userId);
    if (set?.delete(subscription) !== true) return;
    this.#subscriptionCount--;
    if (userId !== undefined && set.size === 0) this.#byUser.delete(userId);
  }

  /**
   * The newest `count` events kept at or before `throughMs` (epoch ms), oldest first: with a
   * subscription's {@link EventSubscription.joinedAt}, the events just before its first live one. Costs
   * 16,384 cheap commands plus at most `count` (see {@link latestEvents}), however many events are kept.
   */
  latest(count: number, throughMs: number): Promise<SessionEvent[]> {
    return latestEvents(this.#readerClient(), this.#context.keys, count, throughMs);
  }

  /**
   * @internal The streams' events after `after` up to `throughMs` (inclusive), in id order; with
   * `userId`, that user's only, read from the user's slot alone.
   */
  replay(after: EventPosition, throughMs: number, userId?: string): AsyncGenerator<SessionEvent> {
    return userId === undefined
      ? replay(this.#readerClient(), this.#context.keys, after, throughMs, this.#options.pageSize)
      : replayUser(this.#readerClient(), this.#context.keys, userId, after, throughMs, this.#options.pageSize);
  }

  /**
   * Opens the subscription, then reads back from the streams whatever it may have missed: everything
   * after the watermark, or, the first time, after the masters' time before subscribing.
   */
  async #open(): Promise<void> {
    const epoch = this.#epoch;
    const first = !this.#everLive;
    const since = first ? Math.min(...(await this.#markAll(`${this.#feedId}:start`))) - 1 : this.#watermark.at;
    await this.#subscriber.open();
    if (this.#closed) throw new Error('the event feed closed while it was subscribing');
    for await (const event of this.replay(endOfMs(since), 9e15)) this.#watermark.restore(event);
    if (epoch !== this.#epoch || this.#closed)
      throw new Error('the event subscription was lost while it was being opened');
    // Nothing before `since` is handed on live: a reader that wants older events resumes by replay.
    if (first) this.#watermark.startAt(since);
    this.#live = true;
    this.#everLive = true;
    this.#drive();
  }

  #readerClient(): RedisClient {
    if (this.#reader === undefined) {
      const { redis } = this.#context;
      // Queued while it connects (the client it copies may answer at once instead, for fast 503s).
      this.#reader =
        'nodes' in redis
          ? redis.duplicate(undefined, { enableOfflineQueue: true })
          : redis.duplicate({ enableOfflineQueue: true, connectionName: `${this.#options.name}-reader` });
      this.#reader.on('error', () => {}); // a failed read is reported by the read itself
    }
    return this.#reader;
  }

  /**
   * Messages may have been missed: nothing more is handed on until the subscription is open again and
   * the streams are read back from the watermark. One loop does it, whatever happens meanwhile.
   */
  #gap(reason: Error): void {
    this.#epoch++;
    this.#live = false;
    this.#subscriber.drop();
    this.#watermark.interrupt();
    this.#clearTimer();
    if (!this.#everLive || this.#reopening || this.#closed) return; // still opening: start() fails, or the loop goes on
    this.#options.onError?.(reason);
    this.#reopening = true;
    const open = (): Promise<void> =>
      this.#open().catch((err: unknown) => {
        this.#subscriber.drop();
        throw err;
      });
    void reopen(open, this.#closing.signal, (err) => this.#options.onError?.(err)).finally(
      () => (this.#reopening = false),
    );
  }

  #onMessage(channel: string, message: string): void {
    if (channel === this.#markChannel) {
      const mark = decodeMark(message);
      if (mark !== undefined) this.#release(this.#watermark.mark(mark.tag, mark.ms));
      return;
    }
    const event = decodeMessage(message);
    if (event === undefined) return;
    if (this.#watermark.receive(event) === 'overflow') {
      // No watermark for too long (a master does not answer): the read-back after the gap gets them again.
      this.#gap(new UnavailableError(new Error(`more than ${this.#options.maxPending} events wait for a watermark`)));
      return;
    }
    this.#drive();
  }

  /** Does what the watermark asks for next, unless a wait it asked for is still running. */
  #drive(): void {
    if (this.#closed || !this.#live || this.#timer !== undefined) return;
    const step = this.#watermark.next();
    switch (step.kind) {
      case 'idle':
        return;
      case 'wait':
        this.#timer = setTimeout(() => {
          this.#timer = undefined;
          this.#drive();
        }, step.ms);
        return;
      case 'gap':
        this.#gap(new UnavailableError(new Error(step.reason)));
        return;
      case 'round': {
        const { tag } = step;
        this.#markAll(tag).then(
          (times) => this.#release(this.#watermark.expect(tag, times.length)),
          // Left to the round's timeout: no tight loop while a master cannot be reached.
          (err: unknown) => this.#options.onError?.(err),
        );
        this.#drive(); // waits for the round's timeout
        return;
      }
    }
  }

  /** Hands a released batch on to the subscriptions that want it, then goes on with the next round. */
  #release(ready: SessionEvent[] | undefined): void {
    if (ready === undefined) return; // the round is still out
    this.#clearTimer();
    if (this.#live && ready.length > 0) {
      for (const subscription of this.#everyone) subscription.deliver(ready);
      if (this.#byUser.size > 0) {
        const perUser = new Map<string, SessionEvent[]>();
        for (const event of ready) {
          if (!this.#byUser.has(event.userId)) continue;
          const list = perUser.get(event.userId);
          if (list === undefined) perUser.set(event.userId, [event]);
          else list.push(event);
        }
        for (const [userId, events] of perUser)
          for (const subscription of this.#byUser.get(userId) ?? []) subscription.deliver(events);
      }
    }
    this.#drive();
  }

  #clearTimer(): void {
    clearTimeout(this.#timer);
    this.#timer = undefined;
  }

  /** Asks every master to publish a mark tagged `tag` on this feed's mark channel; resolves with their times. */
  async #markAll(tag: string): Promise<number[]> {
    const replies = await this.#context.scripts.runOnMasters('publishEventMark', [this.#markChannel, tag]);
    return replies.map((reply) => Number(reply[1]));
  }
}

function stripUndefined<T extends object>(options: T): Partial<T> {
  return Object.fromEntries(Object.entries(options).filter(([, value]) => value !== undefined)) as Partial<T>;
}
