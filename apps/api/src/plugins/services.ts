import { Coordinator, type EventFeed, type EventFeedOptions, type RedisClient, type Sweeper } from '@cq/coordinator';
import { BUDGET, REQUEST_TIMEOUT_MS, createRedis, replicaWaitOf, waitUntilReady } from '@cq/service-kit';
import type { FastifyInstance } from 'fastify';
import fp from 'fastify-plugin';
import type { ApiConfig } from '../config.js';
import { SpawnQueues, SpawnService } from '@cq/spawn-handoff';
import { StatsRecorder } from '../stats.js';

declare module 'fastify' {
  interface FastifyInstance {
    config: ApiConfig;
    redis: RedisClient;
    coordinator: Coordinator;
    spawnQueues: SpawnQueues;
    sweeper: Sweeper;
    stats: StatsRecorder;
    /** The admit → enqueue → roll back → reconcile saga behind `POST /v1/spawn`. */
    spawns: SpawnService;
    /** Every session event, for the SSE routes: one subscription for all of this process's readers. */
    events: EventFeed;
  }
}

/** Options of the services plugin. */
export interface ServicesOptions {
  config: ApiConfig;
  /** Start the sweeper (ends overdue sessions as `lost`). @defaultValue true */
  sweep?: boolean;
  /** Options of the event feed. */
  eventFeed?: EventFeedOptions;
}

/**
 * How long past its pending deadline an admitted session's slot stays held unless a host renews it: time
 * for the host that claims it at the last moment to publish its heartbeat. It also bounds how long an API
 * that dies between holding a slot and handing the session on keeps that slot: PENDING_TIMEOUT_MS + this.
 */
export const HOLD_MARGIN_MS = 5000;

async function closeClient(client: RedisClient): Promise<void> {
  if (client.status === 'ready') await client.quit().catch(() => client.disconnect());
  else client.disconnect();
}

/**
 * The API's connections: a Redis client for the coordinator (no offline queue, bounded command time,
 * so an outage answers 503 fast), the spawn queue's shards on a client of its own, and the sweeper. All of them
 * close in `onClose`.
 */
export const servicesPlugin = fp(
  async (app: FastifyInstance, options: ServicesOptions) => {
    const { config } = options;
    const redis = createRedis(config, 'requests', { logger: app.log, name: 'cq-api' });
    const queueRedis = createRedis(config, 'requests', { logger: app.log, name: 'cq-api-queue' });
    const statsRedis = createRedis(config, 'requests', { name: 'cq-api-stats' });
    const replicaWait = replicaWaitOf(config, app.log, (script) => app.metrics.replicaWaitShortfalls.inc({ script }));
    const coordinator = new Coordinator({
      redis,
      keyPrefix: config.keyPrefix,
      policy: config.policy,
      timeoutMs: REQUEST_TIMEOUT_MS,
      ...(replicaWait === undefined ? {} : { replicaWait }),
    });
    const stats = new StatsRecorder(statsRedis, coordinator.keys);
    const spawnQueues = new SpawnQueues(queueRedis, config.keyPrefix, config.spawnQueueShards, (err) =>
      app.log.debug({ err }, 'spawn queue error'),
    );
    const sweeper = coordinator.sweeper({
      intervalMs: config.sweepIntervalMs,
      onError: (err) => app.log.debug({ err }, 'sweep failed; retrying at the next interval'),
      onSwept: (result) => app.log.info(result, 'sessions ended as lost'),
    });
    app.decorate('config', config);
    app.decorate<RedisClient>('redis', redis);
    app.decorate('coordinator', coordinator);
    app.decorate('spawnQueues', spawnQueues);
    app.decorate('sweeper', sweeper);
    app.decorate('stats', stats);
    const spawns = new SpawnService({
      sessions: coordinator.sessions,
      producer: spawnQueues,
      log: app.log,
      answerWithinMs: BUDGET.commandMs,
      // With the check off, admissions hold no slot (and cost what they did before it); hosts still
      // hold one for each session they run, so free slots stay right for an autoscaler.
      ...(config.capacityCheck
        ? { capacity: { workers: coordinator.workers, holdMs: config.policy.pendingTimeoutMs + HOLD_MARGIN_MS } }
        : {}),
    });
    app.decorate('spawns', spawns);
    const events = coordinator.eventFeed({
      ...options.eventFeed,
      onError: (err) => app.log.warn({ err }, 'event feed: recovering'),
    });
    app.decorate('events', events);
    // Event streams never finish on their own: end them before Fastify waits for in-flight requests.
    app.addHook('preClose', async () => {
      await events.close();
    });
    app.addHook('onReady', async () => {
      // Serve at once even when Redis is down (answering 503 until it is back), but give a healthy
      // Redis the moment it needs to connect, so the first requests do not fail for nothing.
      await Promise.all([waitUntilReady(redis), waitUntilReady(queueRedis)]).catch((err: Error) =>
        app.log.warn({ err }, 'Redis is not reachable yet; answering 503 until it is'),
      );
      // Worker hosts compare their SPAWN_QUEUE_SHARDS with this at start-up (best effort: Redis may be down).
      await redis.set(coordinator.keys.queueShards(), String(config.spawnQueueShards)).catch(() => {});
      if (options.sweep !== false) sweeper.start();
      stats.start();
    });
    app.addHook('onClose', async () => {
      await sweeper.stop();
      await stats.stop();
      await spawns.close();
      await spawnQueues.close();
      await coordinator.close();
      await Promise.all([closeClient(redis), closeClient(queueRedis), closeClient(statsRedis)]);
    });
  },
  { name: 'services', fastify: '5.x' },
);
