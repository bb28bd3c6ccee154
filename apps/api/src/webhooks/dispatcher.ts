import { setTimeout as sleep } from 'node:timers/promises';
import {
  EVENT_RETENTION_MS,
  WEBHOOK_DISPATCH_LEASE,
  parseEventId,
  type Coordinator,
  type EventFeed,
  type EventSubscription,
  type Lease,
  type SessionEvent,
  type Webhook,
} from '@cq/coordinator';
import type { Queue } from 'bullmq';
import type { FastifyBaseLogger as Logger } from 'fastify';
import { wire } from '../event-wire.js';
import { DELIVERY_ATTEMPTS, FIRST_RETRY_MS, deliveryJobId, type DeliveryJob } from './delivery-job.js';

/** Events handed to the queue in one round trip at most. */
const BATCH = 500;

/** Options of {@link WebhookDispatcher}. */
export interface DispatcherOptions {
  readonly coordinator: Coordinator;
  readonly events: EventFeed;
  readonly queue: Queue<DeliveryJob>;
  readonly log: Logger;
  /** The dispatch lease's time to live, ms: another process takes over within about this long. @defaultValue 5000 */
  readonly leaseMs?: number;
  /**
   * How often a process without a webhook looks for one, ms (one GET each); the process that creates a
   * webhook looks at once ({@link WebhookDispatcher.nudge}). @defaultValue 10000
   */
  readonly pollMs?: number;
  /** Told each time webhooks are found to exist (the process then starts delivering). */
  readonly onWebhooks?: () => void;
  /** Told of each batch queued: events, deliveries. */
  readonly onQueued?: (events: number, deliveries: number) => void;
}

/**
 * Turns session events into webhook deliveries. While at least one webhook exists, one API process at a time holds the dispatch lease
 * (fenced, renewed while it lives); it follows the event feed from the dispatch cursor kept in Redis,
 * adds one job per event and matching webhook to the delivery queue (job id `<webhook>_<event>`, so an
 * event queued twice, as after a takeover, is still delivered once), then moves the cursor. A process
 * that starts after the others died resumes from the cursor, or, when the cursor is older than the
 * streams keep (EVENT_RETENTION_MS, 15 minutes), from the oldest event they still hold: of a longer
 * outage the last 15 minutes are delivered, and it logs how long the gap before them was.
 */
export class WebhookDispatcher {
  readonly #options: DispatcherOptions;
  readonly #closing = new AbortController();
  #running: Promise<void> | undefined;
  #hooks: Webhook[] = [];
  #version = -1;
  /** Aborted by {@link WebhookDispatcher.nudge}: ends the wait for a webhook. */
  #wake = new AbortController();

  constructor(options: DispatcherOptions) {
    this.#options = options;
  }

  /** Starts competing for the lease, and dispatching while it is held. */
  start(): void {
    this.#running ??= this.#loop();
  }

  /** Looks for webhooks now rather than at the next poll (a webhook was just created here). */
  nudge(): void {
    this.#wake.abort();
  }

  /** Stops dispatching and gives the lease back. */
  async close(): Promise<void> {
    this.#closing.abort();
    await this.#running;
  }

  async #loop(): Promise<void> {
    const { coordinator, log } = this.#options;
    const leaseMs = this.#options.leaseMs ?? 5000;
    const signal = this.#closing.signal;
    while (!signal.aborted) {
      try {
        // Without a webhook there is nothing to dispatch: look again at the next poll (one GET per
        // process), or at once when this process creates one. A webhook created meanwhile misses
        // nothing: the dispatcher starts from its cursor, or without one from the oldest event kept,
        // and sends a webhook only what came after it.
        if (!(await this.#anyWebhook())) {
          const wake = this.#wake.signal;
          await sleep(this.#options.pollMs ?? 10_000, undefined, { signal: AbortSignal.any([signal, wake]) }).catch(
            () => {},
          );
          if (wake.aborted) this.#wake = new AbortController();
          continue;
        }
        this.#options.onWebhooks?.();
        const outcome = await coordinator.leases.acquire(WEBHOOK_DISPATCH_LEASE, { leaseMs, maxLifetimeMs: 3_600_000 });
        if (!outcome.acquired) {
          await sleep(Math.min(leaseMs, Math.max(100, outcome.retryAfterMs)), undefined, { signal }).catch(() => {});
          continue;
        }
        const keepalive = coordinator.leases.keepalive(outcome.lease, {
          onError: (err) => log.warn({ err }, 'webhook dispatch lease renewal failed; retrying'),
        });
        const held = AbortSignal.any([keepalive.signal, signal]);
        log.info({ fence: outcome.lease.fence }, 'dispatching webhook deliveries');
        try {
          await this.#dispatch(held, outcome.lease);
        } finally {
          keepalive.stop();
          await coordinator.leases.release(outcome.lease).catch(() => false);
        }
        if (!signal.aborted) log.info('webhook dispatch lease lost; another API process takes over');
      } catch (err) {
        if (signal.aborted) break;
        log.warn({ err }, 'webhook dispatch interrupted; retrying');
        await sleep(1000, undefined, { signal }).catch(() => {});
      }
    }
  }

  /** True when at least one webhook exists (the endpoints are read again only when their version moved). */
  async #anyWebhook(): Promise<boolean> {
    const { coordinator } = this.#options;
    const version = await coordinator.webhooks.version();
    if (version !== this.#version) {
      this.#hooks = await coordinator.webhooks.list();
      this.#version = version;
    }
    return this.#hooks.length > 0;
  }

  /**
   * Follows the feed from the cursor while `held`, queueing each batch's deliveries, then moving the
   * cursor: a script that checks `lease`'s fence, so a process that lost the lease without noticing yet
   * (a pause longer than the lease) cannot move it, and never back.
   */
  async #dispatch(held: AbortSignal, lease: Lease): Promise<void> {
    const { coordinator, events, log } = this.#options;
    const cursor = await coordinator.webhooks.cursor();
    const saved = cursor === undefined ? undefined : parseEventId(cursor);
    // No cursor yet, or one older than the streams keep: start from the oldest event still kept (less a
    // margin for the time the replay takes), so nothing the streams hold is skipped; what was queued
    // before is not delivered twice (job ids), and what came before a webhook is not sent to it.
    const oldest = { ms: Date.now() - EVENT_RETENTION_MS + 30_000, seq: 0, slot: 0 };
    const after = saved === undefined || saved.ms < oldest.ms ? oldest : saved;
    if (saved !== undefined && saved.ms < oldest.ms)
      log.warn(
        { cursor, gapMinutes: Math.round((oldest.ms - saved.ms) / 60_000) },
        'webhook dispatch resumes from the oldest event the streams keep: events before it were not delivered',
      );
    // Subscribing waits for the feed to start (its subscription and a mark from every master), which
    // can outlast a shutdown: `close()` must not wait for it (it once held an API's close for 10 s,
    // until Fastify gave up on the preClose hook; the feed itself closes only after that hook).
    const subscription = await settledUnlessAborted(events.subscribe({ after }), held);
    if (subscription === undefined) return;
    const stop = (): void => subscription.close();
    held.addEventListener('abort', stop, { once: true });
    try {
      for (;;) {
        const first = await subscription.next();
        if (first === undefined || held.aborted) return;
        const batch = [first];
        while (subscription.queued > 0 && batch.length < BATCH) {
          const next = await subscription.next();
          if (next === undefined) break;
          batch.push(next);
        }
        await this.#queue(batch);
        if (held.aborted) return;
        const last = batch.at(-1)!.id;
        const moved = await coordinator.webhooks.setCursor(last, lease);
        // Queued, but the lease is another's now: its holder moves the cursor (the jobs' ids dedupe).
        if (moved === 'lease_lost') return;
        if (moved === 'not_forward') log.warn({ eventId: last }, 'webhook dispatch cursor is already past this batch');
      }
    } finally {
      held.removeEventListener('abort', stop);
      subscription.close();
    }
  }

  async #queue(batch: readonly SessionEvent[]): Promise<void> {
    const { queue } = this.#options;
    await this.#anyWebhook();
    const jobs = [];
    for (const event of batch)
      for (const hook of this.#hooks) {
        if (hook.events.length > 0 && !hook.events.includes(event.type)) continue;
        // A webhook receives the events from its creation on only: both times are Redis TIME, of one
        // clock on one Redis, of two masters' on a cluster (see WebhookStore.create).
        if (event.at < hook.createdAt) continue;
        jobs.push({
          name: event.type,
          data: { webhookId: hook.id, eventId: event.id, type: event.type, body: wire(event) },
          opts: {
            jobId: deliveryJobId(hook.id, event.id),
            attempts: DELIVERY_ATTEMPTS,
            backoff: { type: 'exponential', delay: FIRST_RETRY_MS },
            // Kept an hour once delivered: an event queued again meanwhile (a takeover) is not sent again.
            removeOnComplete: { age: 3600, count: 100_000 },
            removeOnFail: { age: 7 * 24 * 3600 },
          },
        });
      }
    if (jobs.length > 0) await queue.addBulk(jobs);
    this.#options.onQueued?.(batch.length, jobs.length);
  }
}

/**
 * `subscribing`'s subscription, or undefined as soon as `signal` aborts: a subscription that arrives
 * after that is closed at once.
 */
async function settledUnlessAborted(
  subscribing: Promise<EventSubscription>,
  signal: AbortSignal,
): Promise<EventSubscription | undefined> {
  if (signal.aborted) {
    void subscribing.then((s) => s.close()).catch(() => {});
    return undefined;
  }
  let onAbort: (() => void) | undefined;
  const aborted = new Promise<undefined>((resolve) => {
    onAbort = () => resolve(undefined);
    signal.addEventListener('abort', onAbort, { once: true });
  });
  try {
    const first = await Promise.race([subscribing, aborted]);
    if (first === undefined) void subscribing.then((s) => s.close()).catch(() => {});
    return first;
  } finally {
    signal.removeEventListener('abort', onAbort!);
  }
}
