import { randomBytes } from 'node:crypto';
import type { Context } from '../context.js';
import { wrapRedisError } from '../redis-errors.js';
import type { SessionEventType } from '../events/session-event.js';

/** A webhook endpoint as kept (its secret sealed: see {@link WebhookStore}). */
export interface Webhook {
  readonly id: string;
  readonly url: string;
  /** The event types it receives; every type when empty. */
  readonly events: readonly SessionEventType[];
  /** Epoch ms. */
  readonly createdAt: number;
  /** The signing secret as sealed by the API (never the secret itself). */
  readonly sealedSecret: string;
}

/** One delivery attempt, as the log keeps it. */
export interface DeliveryAttempt {
  readonly eventId: string;
  readonly type: string;
  /** 1 for the first attempt. */
  readonly attempt: number;
  /** The receiver's HTTP status, when it answered. */
  readonly status?: number;
  /** Why the attempt failed without an answer (timed out, refused address, connection error). */
  readonly error?: string;
  /** When the attempt was made, epoch ms. */
  readonly at: number;
  /** When the next attempt is due, epoch ms (absent once delivered or given up). */
  readonly nextAttemptAt?: number;
}

/** Attempts each webhook's log keeps (the contract asks for at least the last 100). */
export const DELIVERY_LOG_LENGTH = 200;

const wrap = <T>(promise: Promise<T>): Promise<T> =>
  promise.catch((err: unknown) => {
    throw wrapRedisError(err);
  });

/**
 * Webhook endpoints and their delivery logs in Redis, on the `{webhooks}` slot: a hash of endpoints,
 * a version counter bumped on every change (so dispatchers reload the endpoints only when they
 * changed), and a capped list of attempts per endpoint.
 */
export class WebhookStore {
  readonly #context: Context;

  constructor(context: Context) {
    this.#context = context;
  }

  /**
   * Keeps a new endpoint; answers it with its new id and its creation time, Redis TIME (the clock the
   * session events carry, so a webhook receives exactly the events from its creation on). One script.
   */
  async create(input: Omit<Webhook, 'id' | 'createdAt'>): Promise<Webhook> {
    const keys = this.#context.keys.webhooks();
    const id = `wh_${randomBytes(12).toString('hex')}`;
    const reply = await this.#context.scripts.run(
      'createWebhook',
      [keys.endpoints, keys.version],
      [id, JSON.stringify({ id, url: input.url, events: input.events, sealedSecret: input.sealedSecret })],
    );
    return { id, ...input, createdAt: Number(reply[1]) };
  }

  /** Every endpoint, oldest first. */
  async list(): Promise<Webhook[]> {
    const all = await wrap(this.#context.redis.hgetall(this.#context.keys.webhooks().endpoints));
    return Object.values(all)
      .map((json) => JSON.parse(json) as Webhook)
      .sort((a, b) => a.createdAt - b.createdAt || a.id.localeCompare(b.id));
  }

  /** One endpoint; undefined when there is none with that id. */
  async get(id: string): Promise<Webhook | undefined> {
    const json = await wrap(this.#context.redis.hget(this.#context.keys.webhooks().endpoints, id));
    return json === null ? undefined : (JSON.parse(json) as Webhook);
  }

  /** Removes an endpoint and its log; false when there was none. Pending deliveries to it are dropped when they come up. */
  async delete(id: string): Promise<boolean> {
    const keys = this.#context.keys.webhooks();
    const replies = await wrap(
      this.#context.redis
        .multi()
        .hdel(keys.endpoints, id)
        .del(this.#context.keys.webhookLog(id))
        .incr(keys.version)
        .exec(),
    );
    return Number(replies?.[0]?.[1]) === 1;
  }

  /** The version of the endpoints: it changes whenever one is created or deleted. */
  async version(): Promise<number> {
    return Number(await wrap(this.#context.redis.get(this.#context.keys.webhooks().version)));
  }

  /**
   * Records a delivery attempt (newest first, the last {@link DELIVERY_LOG_LENGTH} kept) while the
   * endpoint exists; false when it no longer does. One script.
   */
  async record(webhookId: string, attempt: DeliveryAttempt): Promise<boolean> {
    const keys = this.#context.keys.webhooks();
    const reply = await this.#context.scripts.run(
      'recordDelivery',
      [keys.endpoints, this.#context.keys.webhookLog(webhookId)],
      [webhookId, JSON.stringify(attempt), DELIVERY_LOG_LENGTH],
    );
    return Number(reply[1]) === 1;
  }

  /** The endpoint's attempts, newest first; undefined when there is no such endpoint. */
  async deliveries(webhookId: string): Promise<DeliveryAttempt[] | undefined> {
    const keys = this.#context.keys.webhooks();
    const replies = await wrap(
      this.#context.redis
        .multi()
        .hexists(keys.endpoints, webhookId)
        .lrange(this.#context.keys.webhookLog(webhookId), 0, -1)
        .exec(),
    );
    if (Number(replies?.[0]?.[1]) !== 1) return undefined;
    return (replies?.[1]?.[1] as string[]).map((json) => JSON.parse(json) as DeliveryAttempt);
  }

  /**
   * The newest attempt in each endpoint's log (undefined for one with none yet), in the order of
   * `webhookIds`: one round trip whatever their number (the logs share the `{webhooks}` slot).
   */
  async latestAttempts(webhookIds: readonly string[]): Promise<Array<DeliveryAttempt | undefined>> {
    if (webhookIds.length === 0) return [];
    const pipeline = this.#context.redis.pipeline();
    for (const id of webhookIds) pipeline.lindex(this.#context.keys.webhookLog(id), 0);
    const replies = await wrap(pipeline.exec());
    return webhookIds.map((_, i) => {
      const [err, json] = replies?.[i] ?? [null, null];
      if (err) throw wrapRedisError(err);
      return typeof json === 'string' ? (JSON.parse(json) as DeliveryAttempt) : undefined;
    });
  }

  /** The id of the last event handed to the delivery queue; undefined before the first. */
  async cursor(): Promise<string | undefined> {
    return (await wrap(this.#context.redis.get(this.#context.keys.webhooks().cursor))) ?? undefined;
  }

  /** Moves the dispatch cursor to `eventId`. */
  async setCursor(eventId: string): Promise<void> {
    await wrap(this.#context.redis.set(this.#context.keys.webhooks().cursor, eventId));
  }
}
