import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import type { WorkerRecord } from '@cq/coordinator';
import {
  emptyBody,
  errorSchema,
  hostView,
  hostsQuery,
  hostsView,
  noQuery,
  poolsView,
  workerParams,
  type Host,
} from '@cq/contract';
import { HttpError } from '../http-errors.js';
import { iso } from '../iso.js';
import { audit } from '../plugins/auth.js';
import { poolsWithPending } from '../pools.js';

/** A host as the API shows it (the contract's shape). */
function hostOf(w: WorkerRecord): Host {
  return {
    workerId: w.workerId,
    pool: w.pool,
    state: w.state,
    slots: w.slots,
    busy: w.busy,
    heartbeatAt: iso(w.seenAt),
    startedAt: iso(w.startedAt),
    containment: w.containment,
    isolation: { network: w.isolation.network, filesystem: w.isolation.filesystem, cpus: w.isolation.cpus },
  };
}

/** The worker hosts (`GET /v1/hosts`) and draining one (`POST /v1/hosts/{workerId}/drain`); service key. */
export const hostRoutes: FastifyPluginAsyncZod = async (app) => {
  const { workers } = app.coordinator;

  app.get(
    '/v1/hosts',
    {
      config: { scope: 'hosts:read' },
      schema: {
        summary: 'The live worker hosts and the free slots (of one pool, with ?pool=)',
        security: [{ serviceKey: [] }],
        querystring: hostsQuery,
        response: { 200: hostsView, 400: errorSchema, 401: errorSchema, 503: errorSchema },
      },
    },
    async (request) => {
      const { pool } = request.query;
      // The pools first: their capacity reads let hosts whose heartbeat ran out go, so the list agrees.
      const pools = await workers.pools(pool === undefined ? [] : [pool]);
      const hosts = await workers.list();
      const shown = pool === undefined ? pools : pools.filter((p) => p.pool === pool);
      return {
        hosts: hosts.filter((h) => pool === undefined || h.pool === pool).map(hostOf),
        freeSlots: shown.reduce((n, p) => n + p.free, 0),
      };
    },
  );

  app.get(
    '/v1/pools',
    {
      config: { scope: 'hosts:read' },
      schema: {
        summary: 'Every pool with a live host or a session waiting: its hosts, slots, busy, free and pending',
        security: [{ serviceKey: [] }],
        querystring: noQuery,
        response: { 200: poolsView, 401: errorSchema, 503: errorSchema },
      },
    },
    async () => ({ pools: await poolsWithPending(workers, app.spawnQueues) }),
  );

  app.post(
    '/v1/hosts/:workerId/drain',
    {
      config: { scope: 'hosts:write' },
      schema: {
        summary: 'Drain a worker host: it takes no new sessions, lets its running ones end on their own, then exits 0',
        security: [{ serviceKey: [] }],
        params: workerParams,
        querystring: noQuery,
        body: emptyBody,
        response: { 202: hostView, 400: errorSchema, 401: errorSchema, 404: errorSchema, 503: errorSchema },
      },
    },
    async (request, reply) => {
      const { workerId } = request.params;
      const host = await workers.drain(workerId);
      if (host === undefined) throw new HttpError('no_host', `No live worker host has the id ${workerId}.`);
      audit(request, 'host.drain', workerId, { workerId, busy: host.busy });
      return reply.code(202).send(hostOf(host));
    },
  );
};
