import { randomBytes } from 'node:crypto';
import type { Context } from '../context.js';
import { InvalidArgumentError, ScriptCode, replyCode, unexpectedReply } from '../errors.js';
import { parseEventId } from '../events/codec.js';
import type { SessionEventType } from '../events/session-event.js';
import { WEBHOOK_DISPATCH_LEASE } from '../keys.js';
import type { Lease } from '../liveness/lease.js';
import { wrapRedisError } from '../redis-errors.js';

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

/** What {@link WebhookStore.setCursor} did with the cursor. */
export type CursorMove = 'moved' | 'lease_lost' | 'not_forward';

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
   * Keeps a new endpoint; answers it with its new id and its creation time, Redis TIME, so it does not
   * depend on the API processes' clocks. A webhook receives the events stamped at or after it. On one
   * Redis that is the same clock as the events', so exactly the events from its creation on; on a
   * cluster the time is the `{webhooks}` slot's master's and each event's is its own slot's master's,
   * so an event within those masters' clock difference of the creation may fall on either side. One script.
   */
  async create(input: Omit<Webhook, 'id' | 'createdAt'>): Promise<Webhook> {
    const keys = this.#context.keys.webhooks();
    // The shape the API's routes take (`WEBHOOK_ID_PATTERN` of @cq/contract): wh_ and 24 hex digits.
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

  /**
   * Moves the dispatch cursor forward to `eventId`, for the holder of the dispatch lease
   * ({@link WEBHOOK_DISPATCH_LEASE}) only: one script checks the lease's fence and compares the ids in
   * Redis, so a dispatcher that lost its lease (even one that does not know it yet) cannot write, and
   * the cursor never moves back. `moved`; `lease_lost` when the lease is not held with `lease.fence`;
   * `not_forward` when the cursor is already at or past `eventId` (it stays there).
   */
  async setCursor(eventId: string, lease: Lease): Promise<CursorMove> {
    if (lease.resource !== WEBHOOK_DISPATCH_LEASE)
      throw new InvalidArgumentError(
        `the cursor moves under the ${WEBHOOK_DISPATCH_LEASE} lease, not ${lease.resource}`,
      );
    if (parseEventId(eventId) === undefined)
      throw new InvalidArgumentError(`the cursor must be an event id (<ms>-<seq>-<slot>), not ${eventId}`);
    const reply = await this.#context.scripts.run(
      'moveWebhookCursor',
      [this.#context.keys.lease(WEBHOOK_DISPATCH_LEASE).lease, this.#context.keys.webhooks().cursor],
      [lease.fence, eventId],
    );
    switch (replyCode(reply)) {
      case ScriptCode.Ok:
        return 'moved';
      case ScriptCode.LeaseLost:
        return 'lease_lost';
      case ScriptCode.Stale:
        return 'not_forward';
      default:
        throw unexpectedReply('moveWebhookCursor', reply);
    }
  }
}
