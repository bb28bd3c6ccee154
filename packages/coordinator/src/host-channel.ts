import { ChannelSubscriber, reopen } from './events/channel-subscriber.js';
import type { Keys } from './keys.js';
import type { RedisClient } from './redis-errors.js';

/** Options of {@link HostChannel}. */
export interface HostChannelOptions {
  /** Something this host must act on changed for the user's session: renew it now to learn what. */
  readonly onNudge: (userId: string) => void;
  /**
   * The subscription was opened (the first time, or again after it was lost): nudges may have been
   * missed before, so every session should be renewed now.
   */
  readonly onSubscribed: () => void;
  /** Told of the subscription's errors (each failed attempt to reopen it included). */
  readonly onError: (err: unknown) => void;
}

/**
 * A worker host's own channel (`<prefix>:host:<workerId>`): a stop asked for or a lifetime moved
 * through the API reaches the host at once, without waiting for the session's next renewal, which
 * stays the source of truth (a nudge carries only the user's id). A lost subscription is reopened by
 * itself (50 ms, backing off to 2 s); each time it opens, every session is renewed, for what it may have
 * missed.
 */
export class HostChannel {
  readonly #subscriber: ChannelSubscriber;
  readonly #closed = new AbortController();
  readonly #options: HostChannelOptions;

  constructor(redis: RedisClient, keys: Keys, workerId: string, options: HostChannelOptions) {
    this.#options = options;
    this.#subscriber = new ChannelSubscriber(redis, {
      channels: [keys.hostChannel(workerId)],
      name: `cq-host:${workerId}`,
      onMessage: (_channel, userId) => options.onNudge(userId),
      onLost: () => void this.#open(),
      onError: options.onError,
    });
  }

  /**
   * Subscribes, trying again until it is (or until {@link close}), in the background: the host starts
   * whether Redis answers or not. `onSubscribed` is called each time the subscription opens.
   */
  open(): void {
    void this.#open();
  }

  async #open(): Promise<void> {
    await reopen(() => this.#subscriber.open(), this.#closed.signal, this.#options.onError);
    if (!this.#closed.signal.aborted) this.#options.onSubscribed();
  }

  /** Closes the subscription for good. */
  close(): void {
    this.#closed.abort();
    this.#subscriber.drop();
  }
}
