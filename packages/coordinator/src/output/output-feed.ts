import type { Context } from '../context.js';
import { wrapRedisError } from '../redis-errors.js';
import { ChannelSubscriber, reopen } from '../events/channel-subscriber.js';
import type { EventFeed } from '../events/event-feed.js';
import type { EventSubscription } from '../events/event-subscription.js';
import { finalEventTypes } from '../events/session-event.js';
import { compareLineIds, type OutputLine, type OutputStore } from './output-store.js';

/** Options of {@link OutputFeed}. */
export interface OutputFeedOptions {
  /**
   * Lines a follower may leave unread before the feed stops holding them for it; it then reads them
   * back from Redis itself when it catches up, so a slow reader costs memory only up to this.
   * @defaultValue 2000
   */
  maxQueued?: number;
  /** Client name of the feed's subscription (CLIENT LIST). @defaultValue `cq-output` */
  name?: string;
  /** Told of failures the feed recovers from by itself (a subscription lost). */
  onError?: (err: unknown) => void;
}

/**
 * One session's output as this process follows it: subscribed to the session's output channel once,
 * however many readers follow the session here, and reading each batch of new lines once for all of them.
 */
class Tail {
  readonly followers = new Set<OutputFollower>();
  /** Settles once the tail is subscribed and anchored: a follower joins, and reads its first page, only then. */
  readonly ready: Promise<void>;
  /** The id of the newest line read (and handed to the followers); undefined until anchored. */
  #lastId: string | undefined;
  #reading = false;
  #again = false;

  /** `anchoring` resolves, once subscribed, with the newest line's id: every line after it reaches the followers. */
  constructor(
    readonly userId: string,
    readonly sessionId: string,
    readonly channel: string,
    readonly store: OutputStore,
    readonly onError: (err: unknown) => void,
    anchoring: Promise<string>,
  ) {
    this.ready = anchoring.then((id) => {
      this.#lastId = id;
      if (this.#again) this.poke();
    });
  }

  /** New lines were announced (or may have been missed): read what came after the last one read. */
  poke(): void {
    if (this.#reading || this.#lastId === undefined) {
      this.#again = true;
      return;
    }
    this.#reading = true;
    void this.#read().finally(() => (this.#reading = false));
  }

  async #read(): Promise<void> {
    do {
      this.#again = false;
      try {
        for (;;) {
          const page = await this.store.read(this.userId, this.sessionId, { after: this.#lastId });
          if (page === undefined || page.lines.length === 0) break;
          this.#lastId = page.lines.at(-1)!.id;
          for (const follower of this.followers) follower.deliver(page.lines);
          if (!page.more) break;
        }
      } catch (err) {
        // The next announcement (or the reopened subscription) reads again from the same line.
        this.onError(err);
      }
    } while (this.#again && this.followers.size > 0);
  }
}

/**
 * Sessions' output as it comes, for every reader of one process: one subscription (a channel per
 * followed session, added while someone here follows it) and one read per batch of new lines per
 * session, however many readers follow it. A follower first reads what it missed (from its
 * `Last-Event-ID`) on its own, then takes the shared batches; it learns of the session's end from the
 * event feed, reads what is left and ends.
 */
export class OutputFeed {
  readonly #context: Context;
  readonly #store: OutputStore;
  readonly #events: EventFeed;
  readonly #options: Required<Omit<OutputFeedOptions, 'onError'>> & Pick<OutputFeedOptions, 'onError'>;
  readonly #subscriber: ChannelSubscriber;
  readonly #tails = new Map<string, Tail>();
  readonly #closing = new AbortController();
  #opening: Promise<void> | undefined;
  #reopening = false;

  constructor(context: Context, store: OutputStore, events: EventFeed, options: OutputFeedOptions = {}) {
    this.#context = context;
    this.#store = store;
    this.#events = events;
    this.#options = { maxQueued: 2000, name: 'cq-output', ...options };
    this.#subscriber = new ChannelSubscriber(context.redis, {
      channels: [],
      name: this.#options.name,
      onMessage: (channel) => this.#tails.get(channel)?.poke(),
      onLost: () => this.#lost(),
      onError: (err) => this.#options.onError?.(err),
    });
  }

  /** Sessions followed by at least one reader of this process. */
  get sessions(): number {
    return this.#tails.size;
  }

  /**
   * Follows a session's output from after the line `after` (from the oldest kept without it): what is
   * kept, then each new line, ending once the session has ended and every line was handed on.
   * Undefined when neither the session's output nor the live session is kept. Rejects with
   * {@link UnavailableError} while Redis cannot be reached.
   */
  async follow(userId: string, sessionId: string, after?: string): Promise<OutputFollower | undefined> {
    if (this.#closing.signal.aborted) throw new Error('the output feed is closed');
    // The user's events first, so the session's ending cannot fall between a read and the subscription.
    const events = await this.#events.subscribe({ userId });
    let follower: OutputFollower | undefined;
    try {
      const tail = this.#tail(userId, sessionId);
      // Join and read once the tail is anchored: the batches it hands on from then continue what this read sees.
      await tail.ready;
      follower = new OutputFollower(this.#store, userId, sessionId, after, this.#options.maxQueued, () =>
        this.#leave(tail, follower!, events),
      );
      tail.followers.add(follower);
      follower.watch(events);
      if (!(await follower.begin())) {
        follower.close();
        return undefined;
      }
      return follower;
    } catch (err) {
      if (follower !== undefined) follower.close();
      else events.close();
      throw err;
    }
  }

  /** Ends every follower and closes the subscription. */
  close(): void {
    this.#closing.abort();
    for (const tail of this.#tails.values()) for (const follower of tail.followers) follower.close();
    this.#subscriber.drop();
  }

  /** The session's tail, set up once however many followers join it meanwhile (they wait for `ready`). */
  #tail(userId: string, sessionId: string): Tail {
    const { channel, lines } = this.#context.keys.output(userId, sessionId);
    const known = this.#tails.get(channel);
    if (known !== undefined) return known;
    const onError = (err: unknown): void => this.#options.onError?.(err);
    const tail = new Tail(userId, sessionId, channel, this.#store, onError, this.#subscribe(channel, lines));
    this.#tails.set(channel, tail);
    tail.ready.catch(() => this.#drop(tail));
    return tail;
  }

  /** Subscribes to a session's channel; resolves with its newest line's id then (every later line is announced). */
  async #subscribe(channel: string, lines: string): Promise<string> {
    await this.#open();
    await this.#subscriber.add(channel);
    const newest = await this.#context.redis.xrevrange(lines, '+', '-', 'COUNT', 1).catch((err: unknown) => {
      throw wrapRedisError(err);
    });
    return newest[0]?.[0] ?? '0-0';
  }

  #open(): Promise<void> {
    if (this.#subscriber.isOpen && this.#opening === undefined) return Promise.resolve();
    this.#opening ??= this.#subscriber
      .open()
      .catch((err: unknown) => {
        throw wrapRedisError(err);
      })
      .finally(() => (this.#opening = undefined));
    return this.#opening;
  }

  #leave(tail: Tail, follower: OutputFollower, events: EventSubscription): void {
    events.close();
    tail.followers.delete(follower);
    if (tail.followers.size === 0) this.#drop(tail);
  }

  #drop(tail: Tail): void {
    if (this.#tails.get(tail.channel) !== tail) return;
    this.#tails.delete(tail.channel);
    this.#subscriber.remove(tail.channel);
  }

  /** The subscription was lost: reopen it, then read what every tail may have missed. */
  #lost(): void {
    if (this.#closing.signal.aborted || this.#reopening) return;
    this.#reopening = true;
    void reopen(
      () => this.#open(),
      this.#closing.signal,
      (err) => this.#options.onError?.(err),
    ).finally(() => {
      this.#reopening = false;
      for (const tail of this.#tails.values()) tail.poke();
    });
  }
}

/**
 * One reader following one session's output: an async iterable of lines, oldest first, each once,
 * that ends after the session has ended and its last line was handed on. Created by
 * {@link OutputFeed.follow}; close it when the reader goes away.
 */
export class OutputFollower implements AsyncIterable<OutputLine> {
  readonly #store: OutputStore;
  readonly #userId: string;
  readonly #sessionId: string;
  readonly #maxQueued: number;
  readonly #onClose: () => void;
  /** The id of the last line handed on ('' before the first). */
  #cursor: string;
  #queue: OutputLine[] = [];
  /** Lines were let go while the reader was behind: it reads them back from Redis. */
  #behind = false;
  #first: { lines: readonly OutputLine[]; more: boolean } | undefined;
  #ended = false;
  #finished = false;
  #closed = false;
  #wake: (() => void) | undefined;

  /** @internal */
  constructor(
    store: OutputStore,
    userId: string,
    sessionId: string,
    after: string | undefined,
    maxQueued: number,
    onClose: () => void,
  ) {
    this.#store = store;
    this.#userId = userId;
    this.#sessionId = sessionId;
    this.#cursor = after ?? '';
    this.#maxQueued = maxQueued;
    this.#onClose = onClose;
  }

  /** Bytes the session's host dropped, as of the first read. */
  droppedBytes = 0;

  /** @internal Reads the first page; false when the session's output is not kept. */
  async begin(): Promise<boolean> {
    const page = await this.#store.read(this.#userId, this.#sessionId, {
      after: this.#cursor === '' ? undefined : this.#cursor,
    });
    if (page === undefined) return false;
    this.droppedBytes = page.droppedBytes;
    this.#first = page;
    if (!page.live) this.#end();
    return true;
  }

  /** @internal Ends the follower once the session's terminal event arrives. */
  watch(events: EventSubscription): void {
    void (async () => {
      for await (const event of events)
        if (event.sessionId === this.#sessionId && finalEventTypes.has(event.type)) return this.#end();
      // The event feed closed (the process is stopping): the reader cannot learn of the end here.
      this.close();
    })().catch(() => this.close());
  }

  /** @internal A batch of new lines, in order. */
  deliver(lines: readonly OutputLine[]): void {
    if (this.#closed || this.#behind) return;
    if (this.#queue.length + lines.length > this.#maxQueued) {
      this.#queue = [];
      this.#behind = true;
    } else this.#queue.push(...lines);
    this.#wake?.();
  }

  /** True once every line was handed on after the session ended (not when the follower was closed). */
  get finished(): boolean {
    return this.#finished;
  }

  /** Stops following; the iterator ends. */
  close(): void {
    if (this.#closed) return;
    this.#closed = true;
    this.#queue = [];
    this.#wake?.();
    this.#onClose();
  }

  #end(): void {
    this.#ended = true;
    this.#wake?.();
  }

  /** Every kept line after the cursor, page by page, from Redis. */
  async *#readBack(): AsyncGenerator<OutputLine> {
    for (;;) {
      const after = this.#cursor === '' ? undefined : this.#cursor;
      const page = await this.#store.read(this.#userId, this.#sessionId, { after });
      if (page === undefined) return;
      for (const line of page.lines) yield line;
      if (!page.more || page.lines.length === 0) return;
    }
  }

  #isNew(line: OutputLine): boolean {
    return this.#cursor === '' || compareLineIds(line.id, this.#cursor) > 0;
  }

  async *[Symbol.asyncIterator](): AsyncGenerator<OutputLine> {
    try {
      const first = this.#first;
      this.#first = undefined;
      if (first !== undefined) {
        for (const line of first.lines) {
          if (this.#closed) return;
          this.#cursor = line.id;
          yield line;
        }
        if (first.more) yield* this.#catchUp();
      }
      while (!this.#closed) {
        if (this.#behind) {
          this.#behind = false;
          yield* this.#catchUp();
          continue;
        }
        const line = this.#queue.shift();
        if (line !== undefined) {
          if (!this.#isNew(line)) continue;
          this.#cursor = line.id;
          yield line;
          continue;
        }
        if (this.#ended) {
          // Whatever the host appended before the session ended, whether or not announced here yet.
          yield* this.#catchUp();
          this.#finished = !this.#closed;
          return;
        }
        await new Promise<void>((resolve) => (this.#wake = resolve));
        this.#wake = undefined;
      }
    } finally {
      this.close();
    }
  }

  async *#catchUp(): AsyncGenerator<OutputLine> {
    for await (const line of this.#readBack()) {
      if (this.#closed) return;
      if (!this.#isNew(line)) continue;
      this.#cursor = line.id;
      yield line;
    }
  }
}
