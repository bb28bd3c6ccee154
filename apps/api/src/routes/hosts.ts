import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import type { WorkerRecord } from '@cq/coordinator';
import { emptyBody, errorSchema, hostView, hostsView, noQuery, workerParams, type Host } from '@cq/contract';
import { HttpError } from '../http-errors.js';
import { requireServiceKey } from '../plugins/auth.js';
import { iso } from '../iso.js';

/** A host as the API shows it (the contract's shape). */
function hostOf(w: WorkerRecord): Host {
  return {
    workerId: w.workerId,
    state: w.state,
    slots: w.slots,
    busy: w.busy,
    heartbeatAt: iso(w.seenAt),
    startedAt: iso(w.startedAt),
    containment: w.containment,
  };
}

/** The worker hosts (`GET /v1/hosts`) and draining one (`POST /v1/hosts/{workerId}/drain`); service key. */
export const hostRoutes: FastifyPluginAsyncZod = async (app) => {
  const auth = requireServiceKey(app.config.apiKeys);
  const { workers } = app.coordinator;

  app.get(
    '/v1/hosts',
    {
      onRequest: auth,
      schema: {
        summary: 'The live worker hosts and the free slots',
        security: [{ serviceKey: [] }],
        querystring: noQuery,
        response: { 200: hostsView, 401: errorSchema, 503: errorSchema },
      },
    },
    async () => {
      // The capacity first: it lets hosts whose heartbeat ran out go, so the list agrees with it.
      const capacity = await workers.capacity();
      const hosts = await workers.list();
      return { hosts: hosts.map(hostOf), freeSlots: capacity.free };
    },
  );

  app.post(
    '/v1/hosts/:workerId/drain',
    {
      onRequest: auth,
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
      request.log.info({ workerId, busy: host.busy }, 'host asked to drain');
      return reply.code(202).send(hostOf(host));
    },
  );
};
