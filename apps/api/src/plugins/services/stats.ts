import { closeRedis } from '@cq/coordinator';
import { createRedis } from '@cq/service-kit';
import type { FastifyInstance } from 'fastify';
import fp from 'fastify-plugin';
import { StatsRecorder } from '../../stats.js';

declare module 'fastify' {
  interface FastifyInstance {
    stats: StatsRecorder;
  }
}

/** The per-minute counters of the dashboard, on a connection of their own; stop and close in `onClose`. */
export const statsPlugin = fp(
  async (app: FastifyInstance) => {
    const statsRedis = createRedis(app.config, 'requests', { name: 'cq-api-stats' });
    const stats = new StatsRecorder(statsRedis, app.coordinator.keys);
    app.decorate('stats', stats);
    app.addHook('onReady', async () => stats.start());
    app.addHook('onClose', async () => {
      await stats.stop();
      await closeRedis(statsRedis);
    });
  },
  { name: 'stats', fastify: '5.x', dependencies: ['config', 'coordinator'] },
);
