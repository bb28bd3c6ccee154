import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { BUDGET, settleWithin } from '@cq/service-kit';
import { DEFAULT_POOL } from '@cq/coordinator';
import { errorSchema } from '@cq/contract';
import { errorBody } from '../http-errors.js';

/** What `GET /` points to: where to go from the API's root. */
export const rootLinks = {
  service: 'worker-coordinator',
  dashboard: '/dashboard',
  openapi: '/openapi.json',
  docs: 'docs/http-api.md in the repository',
  health: '/healthz',
} as const;

/** `GET /` for a browser: the same links, as a page with no script. */
const rootHtml = `<!doctype html>
<html lang="en">
<head><meta charset="utf-8"><title>worker-coordinator</title></head>
<body>
<h1>worker-coordinator</h1>
<ul>
<li><a href="${rootLinks.dashboard}">the dashboard</a> (any user name, a service key as password)</li>
<li><a href="${rootLinks.openapi}">the OpenAPI document</a></li>
<li>the HTTP API's guide: <code>docs/http-api.md</code> in the repository</li>
</ul>
</body>
</html>
`;

/** `/`, `/healthz`, `/readyz`, `/metrics`, `/openapi.json`. */
export const operationRoutes: FastifyPluginAsyncZod = async (app) => {
  // A pointer for whoever opens the API's address: JSON, or a page when the client prefers HTML.
  app.get(
    '/',
    {
      schema: {
        summary:
          'Where to go from here: {service, dashboard, openapi, docs, health}, or a page of links when the client accepts text/html',
        response: {
          200: {
            description: 'The links, as JSON or as a page',
            content: {
              'application/json': {
                schema: z.object({
                  service: z.string(),
                  dashboard: z.string(),
                  openapi: z.string(),
                  docs: z.string(),
                  health: z.string(),
                }),
              },
              'text/html': { schema: z.string() },
            },
          },
        },
      },
    },
    async (request, reply) => {
      if ((request.headers.accept ?? '').includes('text/html'))
        return reply
          .header('Content-Security-Policy', "default-src 'none'; frame-ancestors 'none'")
          .type('text/html; charset=utf-8')
          .send(rootHtml);
      return rootLinks;
    },
  );

  app.get(
    '/healthz',
    { schema: { summary: 'The process runs', response: { 200: z.object({ status: z.literal('ok') }) } } },
    async () => ({
      status: 'ok' as const,
    }),
  );

  app.get(
    '/readyz',
    {
      schema: {
        summary: 'Redis answers, and was last found set up to keep what the coordinator writes',
        response: { 200: z.object({ status: z.literal('ready') }), 503: errorSchema },
      },
    },
    async (_request, reply) => {
      // A PING that is not answered within the time counts as not answered.
      const pong = app.redis.ping().then(
        () => true,
        () => false,
      );
      if (!((await settleWithin(pong, BUDGET.readyMs)) && (await pong)))
        return reply.code(503).send(errorBody('unavailable', app.redisSetup.problem ?? 'Redis does not answer.'));
      // Redis answers, but a reconnect found it set up to lose writes (or refusing our credentials).
      const problem = app.redisSetup.problem;
      if (problem !== undefined) return reply.code(503).send(errorBody('unavailable', problem));
      return reply.send({ status: 'ready' });
    },
  );

  // The slot and host gauges: read with the other Redis-backed gauges (app.metrics.redisGauges), at most
  // once per interval however often and by however many the endpoint is scraped (it takes no key); with
  // Redis away they keep their last values.
  const { workers } = app.coordinator;
  app.metrics.redisGauges.add('slots and hosts', async () => {
    const [pools, hosts] = await Promise.all([workers.pools([DEFAULT_POOL]), workers.list()]);
    // A pool that went away keeps no stale gauge.
    app.metrics.slots.reset();
    for (const p of pools) {
      app.metrics.slots.set({ pool: p.pool, kind: 'free' }, p.free);
      app.metrics.slots.set({ pool: p.pool, kind: 'total' }, p.slots);
      app.metrics.slots.set({ pool: p.pool, kind: 'held' }, p.held);
    }
    for (const state of ['active', 'draining'] as const)
      app.metrics.hosts.set({ state }, hosts.filter((h) => h.state === state).length);
  });
  app.get('/metrics', { schema: { summary: 'Prometheus metrics', hide: true } }, async (_request, reply) => {
    await app.metrics.redisGauges.refresh();
    reply.header('Content-Type', app.metrics.registry.contentType);
    return app.metrics.registry.metrics();
  });

  app.get('/openapi.json', { schema: { summary: 'This document', hide: true } }, async () => app.swagger());
};
