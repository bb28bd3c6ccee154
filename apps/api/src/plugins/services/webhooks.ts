import { setTimeout as sleep } from 'node:timers/promises';
import { closeRedis } from '@cq/coordinator';
import { createRedis } from '@cq/service-kit';
import { Queue, Worker } from 'bullmq';
import type { FastifyInstance } from 'fastify';
import fp from 'fastify-plugin';
import { Counter, Gauge } from 'prom-client';
import { deliver, type DeliveryOutcome } from '../../webhooks/deliverer.js';
import { DELIVERY_ATTEMPTS, DELIVERY_QUEUE, type DeliveryJob } from '../../webhooks/delivery-job.js';
import { WebhookDispatcher } from '../../webhooks/dispatcher.js';
import type { ApiConfig } from '../../config.js';
import { SecretBox } from '../../webhooks/secret-box.js';
import type { Resolver } from '../../webhooks/address-guard.js';
import { resolveHost } from '../../webhooks/host-resolver.js';

/** The webhooks of this process: the secret sealing, the delivery queue, its worker and the dispatcher. */
export interface WebhookService {
  readonly secrets: SecretBox;
  readonly queue: Queue<DeliveryJob>;
  /** How webhook hosts are resolved, at creation and at each delivery attempt. */
  readonly resolve: Resolver;
  /** Tells this process a webhook was just created: it starts dispatching and delivering at once. */
  created(): void;
}

/** Options of {@link webhooksPlugin}. */
export interface WebhooksPluginOptions {
  /** Name resolution of webhook hosts. @defaultValue {@link resolveHost} (c-ares, bounded in time) */
  resolve?: Resolver;
}

declare module 'fastify' {
  interface FastifyInstance {
    webhooks: WebhookService;
  }
}

/** Deliveries one API process makes at once. */
const DELIVERY_CONCURRENCY = 50;

/**
 * Webhooks: every API process that has seen a webhook delivers (a BullMQ worker on the delivery queue,
 * 50 at once) and competes for the dispatch lease (one process turns events into deliveries). Metrics: deliveries by outcome,
 * the queue's depth and the age of its oldest undelivered event.
 */
/**
 * What webhook secrets are sealed under without WEBHOOK_SECRET_KEY: API_KEYS' keys in order, then
 * API_KEYS_FILE's keys (as their SHA-256, the one form the file always has) in order. Sealed under the
 * first, opened under any: see {@link SecretBox}.
 */
function sealingMaterials(config: ApiConfig): string[] {
  return [...config.apiKeys, ...config.keys.slice(config.apiKeys.length).map((k) => k.sha256.toString('hex'))];
}

export const webhooksPlugin = fp(
  async (app: FastifyInstance, options: WebhooksPluginOptions) => {
    const { config, coordinator } = app;
    const resolve = options.resolve ?? resolveHost;
    const secrets = new SecretBox(
      config.webhookSecretKey === undefined ? sealingMaterials(config) : [config.webhookSecretKey],
    );
    const prefix = coordinator.keys.webhooks().queuePrefix;
    const queueRedis = createRedis(config, 'blocking', { logger: app.log, name: 'cq-api-webhooks' });
    const queue = new Queue<DeliveryJob>(DELIVERY_QUEUE, { connection: queueRedis, prefix });
    queue.on('error', (err) => app.log.debug({ err }, 'webhook queue error'));
    const outcomes = new Counter({
      name: 'cq_webhook_deliveries_total',
      help: 'Webhook delivery attempts by outcome: delivered, retrying (failed, to be retried), gave_up, dropped (webhook deleted)',
      labelNames: ['outcome'],
      registers: [app.metrics.registry],
    });
    const count = (outcome: DeliveryOutcome): void => outcomes.inc({ outcome });
    const queueJobs = new Gauge({
      name: 'cq_webhook_queue_jobs',
      help: 'Webhook deliveries in the queue by state (waiting, delayed for a retry, active)',
      labelNames: ['state'],
      registers: [app.metrics.registry],
    });
    const oldestUndelivered = new Gauge({
      name: 'cq_webhook_oldest_undelivered_seconds',
      help: 'Age of the oldest webhook delivery not yet made (waiting or delayed for a retry); 0 when none',
      registers: [app.metrics.registry],
    });
    // Read with the other Redis-backed gauges, at most once per interval however often /metrics is
    // scraped; a scrape never waits on Redis for long (the queue's connection holds commands while Redis
    // is away): a read not answered within the scrape's budget leaves the last values.
    app.metrics.redisGauges.add('webhook queue', async () => {
      const [counts, jobs] = await Promise.all([
        queue.getJobCounts('waiting', 'delayed', 'active'),
        queue.getJobs(['waiting', 'delayed'], 0, 99, true),
      ]);
      for (const [state, n] of Object.entries(counts)) queueJobs.set({ state }, n);
      const oldest = Math.min(...jobs.map((job) => job.timestamp));
      oldestUndelivered.set(Number.isFinite(oldest) ? Math.max(0, (Date.now() - oldest) / 1000) : 0);
    });
    const workerRedis = createRedis(config, 'blocking', { logger: app.log, name: 'cq-api-webhook-worker' });
    const log = app.log.child({ component: 'webhooks' });
    const worker = new Worker<DeliveryJob>(
      DELIVERY_QUEUE,
      (job) =>
        deliver(job, {
          coordinator,
          secrets,
          allowPrivate: config.webhookAllowPrivate,
          resolve,
          log,
          onOutcome: count,
        }),
      {
        connection: workerRedis,
        prefix,
        concurrency: DELIVERY_CONCURRENCY,
        autorun: false,
        runRetryDelay: 1000,
        // An idle worker waits 30 s per blocking poll (a new job wakes it at once), so idle API
        // processes cost Redis next to nothing (BullMQ's default, 5 s, is a command per 5 s each).
        drainDelay: 30,
        // An attempt in a process that died is retried, however often that happens (BullMQ's default
        // of one would fail the delivery after a second crash, unlogged).
        maxStalledCount: DELIVERY_ATTEMPTS,
        // An attempt takes at most 10 s: a lock of 20 s (renewed every 10 s) outlives it, and a process
        // that died is noticed within 20 + 10 s instead of BullMQ's 30 + 30 s, so its deliveries in
        // flight are made again about half a minute sooner.
        lockDuration: 20_000,
        stalledInterval: 10_000,
      },
    );
    worker.on('error', (err) => log.debug({ err }, 'webhook worker error'));
    // The worker runs from the first time this process sees a webhook: a deployment without webhooks
    // pays Redis nothing for the delivery queue (its blocking polls and stalled-job checks).
    let delivering = false;
    const startDelivering = (): void => {
      if (delivering) return;
      delivering = true;
      void worker.run().catch((err: unknown) => log.error({ err }, 'webhook worker stopped'));
    };
    const dispatcher = new WebhookDispatcher({
      coordinator,
      events: app.events,
      queue,
      log,
      onWebhooks: startDelivering,
    });
    app.decorate('webhooks', { secrets, queue, resolve, created: () => dispatcher.nudge() });
    app.addHook('onReady', async () => {
      dispatcher.start();
    });
    app.addHook('preClose', async () => {
      await dispatcher.close();
    });
    app.addHook('onClose', async () => {
      // Attempts in flight get 3 s to finish; any still running then is left to its lock: another
      // process retries it once the lock runs out (at least once, so it may arrive twice).
      const closed = worker.close();
      if ((await Promise.race([closed.then(() => true), sleep(3000).then(() => false)])) === false)
        await worker.close(true);
      await queue.close();
      await closeRedis(workerRedis);
      await closeRedis(queueRedis);
    });
  },
  { name: 'webhooks', fastify: '5.x', dependencies: ['config', 'coordinator', 'event-feed', 'metrics'] },
);
