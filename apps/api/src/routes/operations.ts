import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { BUDGET, settleWithin } from '@cq/service-kit';
import { errorBody } from '../http-errors.js';

/** `/healthz`, `/readyz`, `/metrics`, `/openapi.json`. */
export const operationRoutes: FastifyPluginAsyncZod = async (app) => {
  app.get(
    '/healthz',
    { schema: { summary: 'The process runs', response: { 200: z.object({ status: z.literal('ok') }) } } },
    async () => ({
      status: 'ok' as const,
    }),
  );

  app.get('/readyz', { schema: { summary: 'Redis answers' } }, async (_request, reply) => {
    // A PING that is not answered within the time counts as not answered.
    const pong = app.redis.ping().then(
      () => true,
      () => false,
    );
    if ((await settleWithin(pong, BUDGET.readyMs)) && (await pong)) return reply.send({ status: 'ready' });
    return reply.code(503).send(errorBody('unavailable', 'Redis does not answer.'));
  });

  app.get('/metrics', { schema: { summary: 'Prometheus metrics', hide: true } }, async (_request, reply) => {
    // Capacity and hosts are read at the scrape; with Redis away they keep their last values.
    const { workers } = app.coordinator;
    const read = Promise.all([workers.capacity(), workers.list()]).catch(() => undefined);
    const seen = (await settleWithin(read, BUDGET.readyMs)) ? await read : undefined;
    if (seen !== undefined) {
      const [capacity, hosts] = seen;
      for (const kind of ['free', 'total', 'held'] as const) app.metrics.slots.set({ kind }, capacity[kind]);
      for (const state of ['active', 'draining'] as const)
        app.metrics.hosts.set({ state }, hosts.filter((h) => h.state === state).length);
    }
    reply.header('Content-Type', app.metrics.registry.contentType);
    return app.metrics.registry.metrics();
  });

  app.get('/openapi.json', { schema: { summary: 'This document', hide: true } }, async () => app.swagger());
};
