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
    reply.header('Content-Type', app.metrics.registry.contentType);
    return app.metrics.registry.metrics();
  });

  app.get('/openapi.json', { schema: { summary: 'This document', hide: true } }, async () => app.swagger());
};
