import { Coordinator } from '@cq/coordinator';
import { REQUEST_TIMEOUT_MS, replicaWaitOf } from '@cq/service-kit';
import type { FastifyInstance } from 'fastify';
import fp from 'fastify-plugin';

declare module 'fastify' {
  interface FastifyInstance {
    coordinator: Coordinator;
  }
}

/**
 * The coordinator on the API's request connection, with the replica wait the configuration asks for
 * (its shortfalls counted in the metrics); closes in `onClose` (the connection stays the redis plugin's).
 */
export const coordinatorPlugin = fp(
  async (app: FastifyInstance) => {
    const { config } = app;
    const replicaWait = replicaWaitOf(config, app.log, (script) => app.metrics.replicaWaitShortfalls.inc({ script }));
    const coordinator = new Coordinator({
      redis: app.redis,
      keyPrefix: config.keyPrefix,
      policy: config.policy,
      timeoutMs: REQUEST_TIMEOUT_MS,
      ...(replicaWait === undefined ? {} : { replicaWait }),
    });
    app.decorate('coordinator', coordinator);
    app.addHook('onClose', async () => coordinator.close());
  },
  { name: 'coordinator', fastify: '5.x', dependencies: ['config', 'metrics', 'redis'] },
);
