import { setTimeout as sleep } from 'node:timers/promises';
import { ExponentialBackoff, handleAll, retry } from 'cockatiel';
import type { Redis } from 'ioredis';
import { UnavailableError } from '../errors.js';
import type { RedisClient } from '../redis-errors.js';

/** Options of {@link ChannelSubscriber}. */
export interface ChannelSubscriberOptions {
  /** The channels to subscribe to (more can be added and removed later: {@link ChannelSubscriber.add}). */
  readonly channels: readonly string[];
  /** Client name of the connection (CLIENT LIST). */
  readonly name: string;
  readonly onMessage: (channel: string, message: string) => void;
  /** The open connection was lost: messages may have been missed since. Called once per connection. */
  readonly onLost: () => void;
  /** Told of the connection's errors. */
  readonly onError: (err: unknown) => void;
}

/**
 * A subscription to a few channels on a connection of its own, to any one node (on a Cluster every
 * node forwards every publication). It is never reconnected behind the owner's back: a lost
 * connection is reported once (`onLost`), and the owner opens a new one when it has read back what
 * it may have missed.
 */
export class ChannelSubscriber {
  readonly #redis: RedisClient;
  readonly #options: ChannelSubscriberOptions;
  readonly #channels: Set<string>;
  #connection: Redis | undefined;

  constructor(redis: RedisClient, options: ChannelSubscriberOptions) {
    this.#redis = redis;
    this.#options = options;
    this.#channels = new Set(options.channels);
  }

  /** True while a connection is open (it may still be subscribing); false again once it is lost. */
  get isOpen(): boolean {
    return this.#connection !== undefined;
  }

  /**
   * Subscribes to one more channel: at once on the open connection (resolving once subscribed, or
   * once that connection is lost), and on every connection opened later.
   */
  async add(channel: string): Promise<void> {
    this.#channels.add(channel);
    const connection = this.#connection;
    // A connection lost or dropped meanwhile needs nothing more: the next one subscribes to every channel.
    await connection?.subscribe(channel).catch((err: unknown) => {
      if (this.#connection === connection) throw err;
    });
  }

  /** Unsubscribes from a channel (a connection lost meanwhile needs nothing more). */
  remove(channel: string): void {
    if (!this.#channels.delete(channel)) return;
    this.#connection?.unsubscribe(channel).catch(() => {});
  }

  /**
   * Opens a new connection (dropping any open one) and resolves once every channel is subscribed;
   * rejects, closed, when that connection fails or is lost or dropped meanwhile.
   */
  async open(): Promise<void> {
    const redis = this.#redis;
    const nodes = 'nodes' in redis ? redis.nodes('all') : [redis];
    if (nodes.length === 0) throw new UnavailableError(new Error('no Redis Cluster node is known yet'));
    const base = nodes[Math.floor(Math.random() * nodes.length)]!;
    const connection = base.duplicate({
      lazyConnect: true,
      retryStrategy: () => null,
      autoResubscribe: false,
      enableOfflineQueue: true,
      maxRetriesPerRequest: null,
      connectionName: this.#options.name,
    });
    connection.on('error', (err: unknown) => this.#options.onError(err));
    connection.on('message', (channel: string, message: string) => this.#options.onMessage(channel, message));
    this.drop();
    this.#connection = connection;
    try {
      await connection.connect();
      if (this.#channels.size > 0) await connection.subscribe(...this.#channels);
      if (this.#connection !== connection) throw new Error('the subscription was dropped while it was being opened');
      if (connection.status !== 'ready') throw new Error('the subscription was lost while it was being opened');
    } catch (err) {
      if (this.#connection === connection) this.drop();
      else connection.disconnect();
      throw err;
    }
    connection.once('close', () => this.#lost(connection));
  }

  /** Closes the connection, if one is open; that does not count as lost. */
  drop(): void {
    const connection = this.#connection;
    this.#connection = undefined;
    connection?.removeAllListeners('close');
    connection?.disconnect();
  }

  #lost(connection: Redis): void {
    if (this.#connection !== connection) return;
    // Closed from now on, so that the owner's next open opens a new connection.
    this.#connection = undefined;
    this.#options.onLost();
  }
}

/**
 * Runs `open` until it succeeds or `signal` is aborted: first after 50 ms, then backing off
 * exponentially (with jitter) up to 2 s between tries, each failure told to `onError`. Its timers do
 * not hold the process open.
 */
export async function reopen(
  open: () => Promise<void>,
  signal: AbortSignal,
  onError: (err: unknown) => void,
): Promise<void> {
  const policy = retry(handleAll, {
    maxAttempts: Number.MAX_SAFE_INTEGER,
    backoff: new ExponentialBackoff({ initialDelay: 50, maxDelay: 2000 }),
  }).dangerouslyUnref();
  policy.onFailure(({ reason }) => {
    if ('error' in reason) onError(reason.error);
  });
  // A connection lost right after it opened is not reopened in a tight loop.
  await sleep(50, undefined, { ref: false });
  await policy
    .execute(async ({ signal: aborted }) => {
      if (!aborted.aborted) await open();
    }, signal)
    .catch(() => {}); // only when aborted: the owner closed
}
