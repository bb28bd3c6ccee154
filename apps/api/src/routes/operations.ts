import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { errorBody } from '../http-errors.js';

/** How long `/readyz` waits for Redis's PONG, ms. */
const READY_TIMEOUT_MS = 1000;

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
    let timer: NodeJS.Timeout | undefined;
    try {
      await Promise.race([
        app.redis.ping(),
        new Promise((_, reject) => {
          timer = setTimeout(() => reject(new Error('timeout')), READY_TIMEOUT_MS);
        }),
      ]);
      return reply.send({ status: 'ready' });
    } catch {
      return reply.code(503).send(errorBody('unavailable', 'Redis does not answer.'));
    } finally {
      clearTimeout(timer);
    }
  });

  app.get('/metrics', { schema: { summary: 'Prometheus metrics', hide: true } }, async (_request, reply) => {
    reply.header('Content-Type', app.metrics.registry.contentType);
    return app.metrics.registry.metrics();
  });

  app.get('/openapi.json', { schema: { summary: 'This document', hide: true } }, async () => app.swagger());
};
