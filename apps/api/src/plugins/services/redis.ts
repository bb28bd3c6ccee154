import { closeRedis, type RedisClient } from '@cq/coordinator';
import { RedisSetup, createRedis } from '@cq/service-kit';
import type { FastifyInstance } from 'fastify';
import fp from 'fastify-plugin';

declare module 'fastify' {
  interface FastifyInstance {
    /** The coordinator's connection: no offline queue and a bounded command time, so an outage answers 503 fast. */
    redis: RedisClient;
    /** The checks of the Redis behind `redis`, at start and after each reconnect: its `problem` makes `/readyz` 503. */
    redisSetup: RedisSetup;
  }
}

/**
 * The API's request connection to Redis (`redis`) and the checks of that Redis (`redisSetup`); closes in
 * `onClose`. Readiness fails (a one-line `ConfigError`) when Redis refuses the credentials or is set up
 * to lose writes, unless `REDIS_ACCEPT_RISKS` accepts it.
 */
export const redisPlugin = fp(
  async (app: FastifyInstance) => {
    const redis = createRedis(app.config, 'requests', { logger: app.log, name: 'cq-api' });
    app.decorate<RedisClient>('redis', redis);
    const setup = new RedisSetup({
      client: redis,
      keyPrefix: app.config.keyPrefix,
      accept: app.config.redisAcceptRisks,
      logger: app.log,
    });
    app.decorate('redisSetup', setup);
    // Serve at once even when Redis is down (answering 503 until it is back, and checking it when it
    // comes), but give a healthy Redis the moment it needs to connect, so the first requests do not fail
    // for nothing. The wait starts now, so it runs alongside the other connections' (onReady hooks run
    // one after another).
    const started = setup.start().then(
      () => {
        if (redis.status !== 'ready') app.log.warn('Redis is not reachable yet; answering 503 until it is');
        return undefined;
      },
      (err: unknown) => err,
    );
    app.addHook('onReady', async () => {
      const err = await started;
      if (err !== undefined) throw err;
    });
    app.addHook('onClose', async () => {
      setup.close();
      await closeRedis(redis);
    });
  },
  { name: 'redis', fastify: '5.x', dependencies: ['config'] },
);
