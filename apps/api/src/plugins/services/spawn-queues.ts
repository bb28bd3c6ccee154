import { closeRedis } from '@cq/coordinator';
import { createRedis, waitUntilReady } from '@cq/service-kit';
import { SpawnQueues } from '@cq/spawn-handoff';
import type { FastifyInstance } from 'fastify';
import fp from 'fastify-plugin';

declare module 'fastify' {
  interface FastifyInstance {
    spawnQueues: SpawnQueues;
  }
}

/**
 * The spawn queue's shards (BullMQ) on a connection of their own; publishes SPAWN_QUEUE_SHARDS for the
 * worker hosts to compare with theirs. The queues and their connection close in `onClose`.
 */
export const spawnQueuesPlugin = fp(
  async (app: FastifyInstance) => {
    const { config, coordinator } = app;
    const queueRedis = createRedis(config, 'requests', { logger: app.log, name: 'cq-api-queue' });
    const spawnQueues = new SpawnQueues(queueRedis, config.keyPrefix, config.spawnQueueShards, (err) =>
      app.log.debug({ err }, 'spawn queue error'),
    );
    app.decorate('spawnQueues', spawnQueues);
    // Started now, alongside the request connection's wait (see the redis plugin).
    const ready = waitUntilReady(queueRedis).catch((err: Error) =>
      app.log.warn({ err }, 'Redis is not reachable yet for the spawn queue; answering 503 until it is'),
    );
    app.addHook('onReady', async () => {
      await ready;
      // Worker hosts compare their SPAWN_QUEUE_SHARDS with this at start-up (best effort: Redis may be down).
      await app.redis.set(coordinator.keys.queueShards(), String(config.spawnQueueShards)).catch(() => {});
    });
    app.addHook('onClose', async () => {
      await spawnQueues.close();
      await closeRedis(queueRedis);
    });
  },
  { name: 'spawn-queues', fastify: '5.x', dependencies: ['config', 'redis', 'coordinator'] },
);
