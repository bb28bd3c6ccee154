import { closeRedis, type RedisClient } from '@cq/coordinator';
import { createRedis, waitUntilReady } from '@cq/service-kit';
import type { FastifyInstance } from 'fastify';
import fp from 'fastify-plugin';

declare module 'fastify' {
  interface FastifyInstance {
    /** The coordinator's connection: no offline queue and a bounded command time, so an outage answers 503 fast. */
    redis: RedisClient;
  }
}

/** The API's request connection to Redis (`redis`); closes in `onClose`. */
export const redisPlugin = fp(
  async (app: FastifyInstance) => {
    const redis = createRedis(app.config, 'requests', { logger: app.log, name: 'cq-api' });
    app.decorate<RedisClient>('redis', redis);
    // Serve at once even when Redis is down (answering 503 until it is back), but give a healthy Redis
    // the moment it needs to connect, so the first requests do not fail for nothing. The wait starts
    // now, so it runs alongside the other connections' (onReady hooks run one after another).
    const ready = waitUntilReady(redis).catch((err: Error) =>
      app.log.warn({ err }, 'Redis is not reachable yet; answering 503 until it is'),
    );
    app.addHook('onReady', async () => ready);
    app.addHook('onClose', async () => closeRedis(redis));
  },
  { name: 'redis', fastify: '5.x', dependencies: ['config'] },
);
