import { randomUUID } from 'node:crypto';
import type { Redis } from 'ioredis';
import type { Context } from './context.js';
import type { TerminalReason } from './session-types.js';
import { UnavailableError } from './errors.js';
import { wrapRedisError, type RedisClient } from './redis-errors.js';
import { SLOT_COUNT, slotOf } from './slots.js';

/**
 * How long every event is kept in its slot's stream, ms: the Lua side trims older entries and lets an
 * idle stream expire after this (`EVENT_RETENTION_MS` in `lua/includes/events.lua`; a test checks the
 * two agree). A reader may resume from any event younger than this.
 */
export const EVENT_RETENTION_MS = 15 * 60_000;

/** The type of a session event: one per state change, `withdrawn` for an admission rolled back. */
export type SessionEventType =
  'pending' | 'running' | 'ready' | 'stopping' | 'completed' | 'failed' | 'expired' | 'stopped' | 'lost' | 'withdrawn';

/** Event types after which a session has ended (`withdrawn`: it never was). */
export const finalEventTypes: ReadonlySet<SessionEventType> = new Set([
  'completed',
  'failed',
  'expired',
  'stopped',
  'lost',
  'withdrawn',
]);

/** Where an event stands in the one order every reader sees: its stream entry id, then its slot. */
export interface EventPosition {
  readonly ms: number;
  readonly seq: number;
  readonly slot: number;
}

/** One state change of one session, as the script that made it recorded it. */
export interface SessionEvent {
  /** `<ms>-<seq>-<slot>`: the entry id in its slot's stream, and the slot. Orders all events. */
  readonly id: string;
  readonly position: EventPosition;
  readonly type: SessionEventType;
  readonly sessionId: string;
  readonly userId: string;
  readonly fence: number;
  /** When the change happened (Redis TIME), epoch ms. */
  readonly at: number;
  /** `running`, `ready`, `stopping` and endings of a claimed session: the host that runs it. */
  readonly workerId?: string;
  /** `ready`: where the session can be reached, when it said. */
  readonly endpoint?: string;
  /** `running`: when the lifetime cap runs out, epoch ms. */
  readonly deadline?: number;
  /** `pending`: the lifetime it will have once started, ms. */
  readonly lifetimeMs?: number;
  /** Endings: the process's exit code, when there is one. */
  readonly exitCode?: number;
  /** Endings: why, where known (`lost`: `host_lost` or `not_claimed`; `failed`: `out_of_memory`). */
  readonly reason?: TerminalReason;
}

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

/** Decodes one event from its stream entry id, slot and JSON; undefined for anything else. */
function decodeEvent(entryId: string, slot: number | undefined, json: string): SessionEvent | undefined {
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

/** Thrown by a subscription whose reader fell too far behind; it may resume with its last event's id. */
export class SlowReaderError extends Error {
  override name = 'SlowReaderError';
}

/** One watermark round: the marks of every master, tagged alike. */
interface Round {
  readonly tag: string;
  /** The subscription's epoch when the round began: a round that outlived its connection proves nothing. */
  readonly epoch: number;
  expected: number;
  readonly marks: number[];
  readonly timer: NodeJS.Timeout;
}

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

/** Options of {@link EventFeed.subscribe}. */
export interface SubscribeOptions {
  /** Only this user's events. */
  userId?: string;
  /** Replay every event after this position first (a reconnecting reader's `Last-Event-ID`). */
  after?: EventPosition;
}

/** The first page read of a slot, events: small, so a replay over 16,384 slots starts small. */
const FIRST_PAGE = 4;

/**
 * The session events of every slot, merged into one order, for every reader of one process.
 *
 * Each script that changes a session appends an event to its slot's stream and publishes it on the
 * event channel (`lua/includes/events.lua`). The feed holds one subscription to that channel, however
 * many readers it serves, and hands events on in the order of their ids (`<ms>-<seq>-<slot>`), which
 * every process computes alike. An event is handed on once no event with a smaller id can still
 * arrive: the feed asks every master to publish its Redis TIME on the feed's own mark channel (a
 * mark, `publishEventMark`); a master's publications reach the subscriber in the order the master ran
 * them, and a master writes nothing older than its mark afterwards, so when a round's marks have all
 * arrived every event older than the smallest of them is in hand (the watermark). Rounds run only
 * while events wait, at most one per `roundIntervalMs`.
 *
 * Whenever messages may have been missed (the subscription (re)opens, or a round's marks do not all
 * arrive), the feed reads the streams back from its watermark (one command per slot) before it hands
 * anything else on. A reader resuming from an id gets the streams' events after it up to the
 * watermark at which it joined, then the live ones after both.
 */
export class EventFeed {
  readonly #context: Context;
  readonly #options: Required<Omit<EventFeedOptions, 'onError'>> & Pick<EventFeedOptions, 'onError'>;
  readonly #channel: string;
  /** This feed's own mark channel: marks go to this process only, not to every API process. */
  readonly #markChannel: string;
  /** Subscriptions to every event, and those to one user's, by user. */
  readonly #everyone = new Set<EventSubscription>();
  readonly #byUser = new Map<string, Set<EventSubscription>>();
  #subscriptionCount = 0;
  /** Events received and not yet handed on, by id (also drops the copy a read-back gets again). */
  #pending = new Map<string, SessionEvent>();
  /** Every event up to this time (epoch ms) has been handed on; none after it. */
  #watermark = 0;
  /** Bumped whenever messages may have been missed: a round that saw it change proves nothing. */
  #epoch = 0;
  #subscriber: Redis | undefined;
  /** Reads the streams (read-backs, replays) on connections of its own: requests never queue behind them. */
  #reader: RedisClient | undefined;
  #live = false;
  #round: Round | undefined;
  /** True once the feed has been live: a lost subscription is then reopened by the feed itself. */
  #everLive = false;
  /** True while the one loop that reopens the subscription runs. */
  #reopening = false;
  #roundTimer: NodeJS.Timeout | undefined;
  #lastRoundAt = 0;
  /** The newest entry time (epoch ms) of any event received: a round is worth starting only after it. */
  #newestMs = 0;
  #rounds = 0;
  #started: Promise<void> | undefined;
  #closed = false;
  #markSha: string | undefined;
  readonly #feedId = randomUUID().slice(0, 8);

  constructor(context: Context, options: EventFeedOptions = {}) {
    this.#context = context;
    this.#channel = context.keys.eventChannel();
    this.#markChannel = `${this.#channel}:mark:${this.#feedId}`;
    this.#options = {
      roundIntervalMs: options.roundIntervalMs ?? 2,
      roundTimeoutMs: options.roundTimeoutMs ?? 1000,
      maxQueued: options.maxQueued ?? 10_000,
      maxPending: options.maxPending ?? 100_000,
      pageSize: options.pageSize ?? 500,
      name: options.name ?? 'cq-events',
      onError: options.onError,
    };
  }

  /** Readers currently subscribed. */
  get subscribers(): number {
    return this.#subscriptionCount;
  }

  /** Watermark rounds run so far (each costs one command per master). */
  get rounds(): number {
    return this.#rounds;
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
      this.#dropSubscriber();
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
    const subscription = new EventSubscription(this, options, this.#watermark, this.#options.maxQueued);
    if (options.userId === undefined) this.#everyone.add(subscription);
    else {
      let set = this.#byUser.get(options.userId);
      if (set === undefined) this.#byUser.set(options.userId, (set = new Set()));
      set.add(subscription);
    }
    this.#subscriptionCount++;
    return subscription;
  }

  /** Stops the feed: every subscription ends, its connections close. */
  async close(): Promise<void> {
    this.#closed = true;
    this.#live = false;
    clearTimeout(this.#roundTimer);
    if (this.#round !== undefined) clearTimeout(this.#round.timer);
    for (const subscription of [...this.#everyone, ...[...this.#byUser.values()].flatMap((set) => [...set])])
      subscription.close();
    this.#dropSubscriber();
    this.#reader?.disconnect();
  }

  /** @internal */
  unsubscribe(subscription: EventSubscription, userId: string | undefined): void {
    const set = userId === undefined ? this.#everyone : this.#byUser.get(userId);
    if (set?.delete(subscription) !== true) return;
    this.#subscriptionCount--;
    if (userId !== undefined && set.size === 0) this.#byUser.delete(userId);
  }

  /**
   * The events after `after` and up to `throughMs` (inclusive) from the slots' streams, in id order:
   * a k-way merge holding at most one page per slot; a slot's first page is small and its pages grow
   * as it is read, so a replay over many slots starts with little in hand.
   * @internal
   */
  async *read(after: EventPosition, throughMs: number): AsyncGenerator<SessionEvent> {
    const { keys } = this.#context;
    const start = `${after.ms}-${after.seq}`;
    const reader = this.#readerClient();
    const decode = (slot: number, entries: Array<[string, string[]]>): SessionEvent[] =>
      entries.flatMap(([id, fields]) => {
        const event = decodeEvent(id, slot, fields[1] ?? '');
        return event === undefined ? [] : [event];
      });
    const fetch = async (slot: number, from: string, count: number): Promise<SessionEvent[]> =>
      decode(slot, await reader.xrange(keys.events(slot), from, String(throughMs), 'COUNT', count));
    /** The first page of every slot of a batch: one pipeline (standalone), or one command each (Cluster). */
    const fetchBatch = async (slots: number[]): Promise<SessionEvent[][]> => {
      if ('nodes' in reader) return Promise.all(slots.map((slot) => fetch(slot, start, FIRST_PAGE)));
      const pipeline = reader.pipeline();
      for (const slot of slots) pipeline.xrange(keys.events(slot), start, String(throughMs), 'COUNT', FIRST_PAGE);
      const results = (await pipeline.exec()) ?? [];
      return slots.map((slot, i) => {
        const [err, entries] = results[i] ?? [new Error('pipeline answered short')];
        if (err) throw err;
        return decode(slot, entries as Array<[string, string[]]>);
      });
    };
    const heap: HeapCursor[] = [];
    try {
      for (let first = 0; first < SLOT_COUNT; first += 2048) {
        const slots = Array.from({ length: Math.min(2048, SLOT_COUNT - first) }, (_, i) => first + i);
        const pages = await fetchBatch(slots);
        pages.forEach((events, i) => {
          const cursor = { slot: slots[i]!, events, index: 0, count: FIRST_PAGE, full: events.length === FIRST_PAGE };
          // The first page starts at `after`'s entry id, shared by other slots: skip what is not after it.
          while (cursor.index < events.length && comparePositions(events[cursor.index]!.position, after) <= 0)
            cursor.index++;
          if (cursor.index < events.length || cursor.full) heapPush(heap, cursor);
        });
      }
      while (heap.length > 0) {
        const cursor = heap[0]!;
        if (cursor.index === cursor.events.length) {
          // This slot's page is used up but was full: read its next, larger page before comparing again.
          const last = cursor.events[cursor.events.length - 1]!;
          cursor.count = Math.min(this.#options.pageSize, cursor.count * 4);
          cursor.events = await fetch(cursor.slot, `(${last.position.ms}-${last.position.seq}`, cursor.count);
          cursor.index = 0;
          cursor.full = cursor.events.length === cursor.count;
          heapPop(heap);
          if (cursor.events.length > 0) heapPush(heap, cursor);
          continue;
        }
        yield cursor.events[cursor.index++]!;
        heapPop(heap);
        if (cursor.index < cursor.events.length || cursor.full) heapPush(heap, cursor);
      }
    } catch (err) {
      throw wrapRedisError(err);
    }
  }

  /**
   * Opens the subscription, then reads back from the streams whatever it may have missed: everything
   * after the watermark, or, the first time, after the masters' time before subscribing.
   */
  async #open(): Promise<void> {
    const epoch = this.#epoch;
    const first = !this.#everLive;
    const since = first ? Math.min(...(await this.#markAll(`${this.#feedId}:start`))) - 1 : this.#watermark;
    await this.#subscribe();
    const after = { ms: since, seq: Number.MAX_SAFE_INTEGER, slot: SLOT_COUNT };
    for await (const event of this.read(after, 9e15))
      if (!this.#pending.has(event.id)) this.#pending.set(event.id, event);
    if (epoch !== this.#epoch || this.#closed)
      throw new Error('the event subscription was lost while it was being opened');
    if (first) {
      // Nothing before `since` is handed on live: a reader that wants older events resumes by replay.
      this.#watermark = since;
      for (const [id, event] of this.#pending) if (event.position.ms <= since) this.#pending.delete(id);
    }
    this.#live = true;
    this.#everLive = true;
    this.#schedule();
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

  /** Opens a subscriber connection of its own and resolves once both channels are subscribed. */
  async #subscribe(): Promise<void> {
    const { redis } = this.#context;
    const nodes = 'nodes' in redis ? redis.nodes('all') : [redis];
    if (nodes.length === 0) throw new UnavailableError(new Error('no Redis Cluster node is known yet'));
    const base = nodes[Math.floor(Math.random() * nodes.length)]!;
    // Never reconnected behind our back: a lost connection is a new epoch, followed by a read-back.
    const subscriber = base.duplicate({
      lazyConnect: true,
      retryStrategy: () => null,
      autoResubscribe: false,
      enableOfflineQueue: true,
      maxRetriesPerRequest: null,
      connectionName: this.#options.name,
    });
    subscriber.on('error', (err: unknown) => this.#options.onError?.(err));
    subscriber.on('message', (channel: string, message: string) => this.#onMessage(channel, message));
    this.#dropSubscriber();
    this.#subscriber = subscriber;
    await subscriber.connect();
    await subscriber.subscribe(this.#channel, this.#markChannel);
    if (this.#closed || this.#subscriber !== subscriber) {
      subscriber.disconnect();
      throw new Error('the event feed closed while it was subscribing');
    }
    subscriber.once('close', () => this.#onSubscriberLost(subscriber));
    if (subscriber.status !== 'ready') this.#onSubscriberLost(subscriber);
  }

  #dropSubscriber(): void {
    const subscriber = this.#subscriber;
    this.#subscriber = undefined;
    subscriber?.removeAllListeners('close');
    subscriber?.disconnect();
  }

  #onSubscriberLost(subscriber: Redis): void {
    if (this.#subscriber !== subscriber || this.#closed) return;
    this.#gap(new UnavailableError(new Error('the event subscription was lost; reopening it')));
  }

  /**
   * Messages may have been missed: nothing more is handed on until the subscription is open again and
   * the streams are read back from the watermark. One loop does it, whatever happens meanwhile.
   */
  #gap(reason: Error): void {
    this.#epoch++;
    this.#live = false;
    this.#dropSubscriber();
    if (this.#round !== undefined) {
      clearTimeout(this.#round.timer);
      this.#round = undefined;
    }
    if (!this.#everLive || this.#reopening || this.#closed) return; // still opening: start() fails, or the loop goes on
    this.#options.onError?.(reason);
    this.#reopening = true;
    void (async () => {
      for (let delayMs = 50; !this.#closed && !this.#live; delayMs = Math.min(2000, delayMs * 2)) {
        await new Promise((resolve) => setTimeout(resolve, delayMs).unref());
        if (this.#closed) break;
        try {
          await this.#open();
        } catch (err) {
          this.#options.onError?.(err);
          this.#dropSubscriber();
        }
      }
      this.#reopening = false;
    })();
  }

  #onMessage(channel: string, message: string): void {
    if (channel === this.#markChannel) {
      const [, tag, time] = message.split(' ');
      const round = this.#round;
      if (round === undefined || round.tag !== tag) return;
      round.marks.push(Number(time));
      if (round.marks.length === round.expected) this.#finishRound(round);
      return;
    }
    const space = message.indexOf(' ');
    const event = decodeEvent(message.slice(0, space), undefined, message.slice(space + 1));
    if (event === undefined) return;
    // At or below the watermark: already handed on (every such event was in hand when it was set).
    if (event.position.ms <= this.#watermark) return;
    if (!this.#pending.has(event.id)) this.#pending.set(event.id, event);
    if (event.position.ms > this.#newestMs) this.#newestMs = event.position.ms;
    if (this.#pending.size > this.#options.maxPending) {
      // No watermark for too long (a master does not answer): let go of them; the read-back after
      // the gap gets them again once the masters answer.
      this.#pending.clear();
      this.#gap(new UnavailableError(new Error(`more than ${this.#options.maxPending} events wait for a watermark`)));
      return;
    }
    this.#schedule();
  }

  /** Starts a round as soon as one may run, if events wait. */
  #schedule(): void {
    if (this.#closed || !this.#live || this.#round !== undefined || this.#roundTimer !== undefined) return;
    if (this.#pending.size === 0) return;
    // A mark taken in the same millisecond as an event cannot release it (a later event may share that
    // millisecond): start once this clock has left the newest event's millisecond, unless Redis's clock
    // runs ahead of ours (then at most 2 ms later, and a further round releases it).
    const wait = Math.max(
      this.#lastRoundAt + this.#options.roundIntervalMs - performance.now(),
      Math.min(2, this.#newestMs + 1 - Date.now()),
    );
    if (wait > 0) {
      this.#roundTimer = setTimeout(() => {
        this.#roundTimer = undefined;
        this.#schedule();
      }, wait);
      return;
    }
    this.#startRound();
  }

  #startRound(): void {
    this.#lastRoundAt = performance.now();
    this.#rounds++;
    const tag = `${this.#feedId}:${this.#rounds}`;
    // Marks that do not all arrive: a master is down, or a link dropped messages (its mark among
    // them, and maybe events before it). Either way, read back rather than guess.
    const timer = setTimeout(() => {
      if (this.#round?.tag !== tag) return;
      this.#gap(new UnavailableError(new Error(`a watermark round got no mark from every master in time`)));
    }, this.#options.roundTimeoutMs);
    const round = { tag, epoch: this.#epoch, expected: Number.POSITIVE_INFINITY, marks: [] as number[], timer };
    this.#round = round;
    this.#markAll(tag).then(
      (times) => {
        round.expected = times.length;
        if (round.marks.length === round.expected && this.#round === round) this.#finishRound(round);
      },
      // Left to the round's timeout: no tight loop while a master cannot be reached.
      (err: unknown) => this.#options.onError?.(err),
    );
  }

  #finishRound(round: Round): void {
    clearTimeout(round.timer);
    this.#round = undefined;
    if (round.epoch === this.#epoch && this.#live) {
      const watermark = Math.min(...round.marks) - 1;
      if (watermark > this.#watermark) this.#release(watermark);
    }
    this.#schedule();
  }

  /** Hands on every waiting event up to `watermark`, in id order, to the subscriptions that want it. */
  #release(watermark: number): void {
    const ready: SessionEvent[] = [];
    for (const [id, event] of this.#pending) {
      if (event.position.ms > watermark) continue;
      ready.push(event);
      this.#pending.delete(id);
    }
    this.#watermark = watermark;
    if (ready.length === 0) return;
    ready.sort((a, b) => comparePositions(a.position, b.position));
    for (const subscription of this.#everyone) subscription.deliver(ready);
    if (this.#byUser.size === 0) return;
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

  /** Asks every master to publish a mark tagged `tag` on this feed's mark channel; resolves with their times. */
  async #markAll(tag: string): Promise<number[]> {
    const { redis, scripts } = this.#context;
    const masters = 'nodes' in redis ? redis.nodes('master') : [redis];
    if (masters.length === 0) throw new UnavailableError(new Error('no Redis Cluster master is known yet'));
    const lua = scripts.source('publishEventMark');
    const run = async (node: Redis): Promise<number> => {
      try {
        if (this.#markSha !== undefined)
          return ((await node.evalsha(this.#markSha, 0, this.#markChannel, tag)) as number[])[1]!;
      } catch (err) {
        if (!(err instanceof Error) || !err.message.startsWith('NOSCRIPT')) throw err;
      }
      this.#markSha = (await node.script('LOAD', lua)) as string;
      return ((await node.evalsha(this.#markSha, 0, this.#markChannel, tag)) as number[])[1]!;
    };
    return Promise.all(masters.map(run));
  }
}

/**
 * One reader's view of the feed: an async iterable of events in id order, with a bounded queue.
 * Created by {@link EventFeed.subscribe}.
 */
export class EventSubscription implements AsyncIterable<SessionEvent> {
  readonly #feed: EventFeed;
  readonly #userId: string | undefined;
  readonly #maxQueued: number;
  #queue: SessionEvent[] = [];
  #wake: (() => void) | undefined;
  #closed = false;
  #failure: Error | undefined;
  /** Events up to this time come from the replay; the live ones after it. */
  readonly #joinedAt: number;
  /** The reader has every event up to this one already (its Last-Event-ID). */
  readonly #after: EventPosition | undefined;
  #replay: AsyncGenerator<SessionEvent> | undefined;
  readonly #onEnd: Array<(failure: Error | undefined) => void> = [];
  /** True when `after` is older than the retention: the replay could not be whole and was skipped. */
  readonly expired: boolean;

  /** @internal */
  constructor(feed: EventFeed, options: SubscribeOptions, joinedAt: number, maxQueued: number) {
    this.#feed = feed;
    this.#userId = options.userId;
    this.#maxQueued = maxQueued;
    this.#joinedAt = joinedAt;
    this.#after = options.after;
    this.expired = options.after !== undefined && options.after.ms < joinedAt - EVENT_RETENTION_MS;
    if (options.after !== undefined && !this.expired) this.#replay = feed.read(options.after, joinedAt);
  }

  /** @internal Called by the feed with each released batch. */
  deliver(events: readonly SessionEvent[]): void {
    if (this.#closed) return;
    for (const event of events) {
      if (this.#userId !== undefined && event.userId !== this.#userId) continue;
      if (event.position.ms <= this.#joinedAt) continue;
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
    this.#feed.unsubscribe(this, this.#userId);
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

type HeapCursor = { events: SessionEvent[]; index: number; slot: number; count: number; full: boolean };

function headOf(cursor: HeapCursor): EventPosition {
  // A used-up cursor (waiting for its next page) sorts by its last event: nothing it reads can come earlier.
  const event = cursor.events[Math.min(cursor.index, cursor.events.length - 1)];
  return event?.position ?? { ms: 0, seq: 0, slot: cursor.slot };
}

function less(a: HeapCursor, b: HeapCursor): boolean {
  return comparePositions(headOf(a), headOf(b)) < 0;
}

function heapPush<T extends HeapCursor>(heap: T[], item: T): void {
  heap.push(item);
  let i = heap.length - 1;
  while (i > 0) {
    const parent = (i - 1) >> 1;
    if (!less(heap[i]!, heap[parent]!)) break;
    [heap[i], heap[parent]] = [heap[parent]!, heap[i]!];
    i = parent;
  }
}

function heapPop<T extends HeapCursor>(heap: T[]): void {
  const last = heap.pop()!;
  if (heap.length === 0) return;
  heap[0] = last;
  let i = 0;
  for (;;) {
    const left = 2 * i + 1;
    const right = left + 1;
    let smallest = i;
    if (left < heap.length && less(heap[left]!, heap[smallest]!)) smallest = left;
    if (right < heap.length && less(heap[right]!, heap[smallest]!)) smallest = right;
    if (smallest === i) break;
    [heap[i], heap[smallest]] = [heap[smallest]!, heap[i]!];
    i = smallest;
  }
}
