import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { HttpError, sendError } from '../http-errors.js';
import { retryAfterSeconds, setRateLimitHeaders } from '../rate-limit-headers.js';
import { errorSchema, noQuery, spawnAdmitted, spawnBody } from '@cq/contract';

/** `POST /v1/spawn`: admit a spawn with a one-time token (the token is the credential). */
export const spawnRoutes: FastifyPluginAsyncZod = async (app) => {
  const { policy } = app.config;
  const quota = { name: 'spawn', limit: policy.spawnBurst, windowMs: policy.spawnIntervalMs * policy.spawnBurst };
  app.post(
    '/v1/spawn',
    {
      config: { scope: 'public' },
      schema: {
        summary: 'Admit a spawn: token valid, no live session, throttle open; then the session is queued',
        querystring: noQuery,
        body: spawnBody,
        response: {
          202: spawnAdmitted,
          400: errorSchema,
          403: errorSchema,
          409: errorSchema,
          429: errorSchema,
          // Also `no_capacity`: no worker slot of the session's pool is free (Retry-After; error.pool names it,
          // error.reason says whether the pool is full or no host takes its sessions).
          503: errorSchema,
        },
      },
    },
    async (request, reply) => {
      const outcome = await app.spawns.spawn(request.body.token);
      // Counted as decided by the admission; a hand-off that failed afterwards counts once more.
      const admission = outcome.outcome === 'unavailable' ? 'admitted' : outcome.outcome;
      app.metrics.admissions.inc({
        outcome: admission,
        pool: outcome.outcome === 'admitted' || outcome.outcome === 'no_capacity' ? outcome.pool : '',
      });
      // The dashboard's chart counts decisions; a wait after Redis lost writes is the Redis outage's, as a 503 is.
      if (admission !== 'state_uncertain') app.stats.count(admission);
      if (outcome.outcome === 'unavailable' && outcome.why !== 'unconfirmed')
        app.metrics.admissions.inc({ outcome: 'rolled_back' });
      switch (outcome.outcome) {
        case 'token_invalid':
          return outcome.issuedBeforeLoss === true
            ? sendError(
                reply,
                'token_invalid',
                'The token was issued before Redis restarted or failed over, and may have been spent in the writes ' +
                  'Redis lost then; issue a new token.',
              )
            : sendError(reply, 'token_invalid');
        case 'state_uncertain':
          reply.header('Retry-After', String(retryAfterSeconds(outcome.retryAfterMs)));
          return sendError(
            reply,
            'unavailable',
            `Redis restarted or failed over at ${new Date(outcome.since).toISOString()} and may have lost its last ` +
              'writes: sessions admitted before may still run until their leases run out, so no session of a user ' +
              `on that Redis starts before then; retry in ${retryAfterSeconds(outcome.retryAfterMs)} s.`,
            { retryAfterMs: outcome.retryAfterMs },
          );
        case 'session_exists':
          reply.header('Location', `/v1/users/${encodeURIComponent(outcome.userId)}/session`);
          return sendError(
            reply,
            'session_exists',
            `User ${outcome.userId} already has a live session (${outcome.state}).`,
            {
              sessionId: outcome.sessionId,
            },
          );
        case 'throttled':
          setRateLimitHeaders(reply, quota, outcome.rate);
          app.metrics.throttled.inc({ route: '/v1/spawn' });
          return sendError(reply, 'throttled', 'Spawning too often for this user.', {
            retryAfterMs: outcome.rate.retryAfterMs,
          });
        case 'no_capacity':
          reply.header('Retry-After', String(retryAfterSeconds(outcome.retryAfterMs)));
          // A full pool and one no host takes sessions of (a mistyped name, its hosts gone or draining) differ
          // in what to do: wait, or fix the pool or start a host.
          return outcome.served
            ? sendError(
                reply,
                'no_capacity',
                `No worker host of pool ${outcome.pool} has a free slot now; retry shortly (the token is still valid).`,
                { retryAfterMs: outcome.retryAfterMs, pool: outcome.pool, reason: 'pool_full' },
              )
            : sendError(
                reply,
                'no_capacity',
                `No live worker host takes sessions of pool ${outcome.pool} (none runs with POOL=${outcome.pool}, or ` +
                  'all of them are draining): check the pool name (GET /v1/pools lists the pools hosts serve) or ' +
                  'start a host for it (the token is still valid).',
                { retryAfterMs: outcome.retryAfterMs, pool: outcome.pool, reason: 'pool_unserved' },
              );
        case 'unavailable':
          throw new HttpError('unavailable', outcome.message);
        case 'admitted':
          request.log.info(
            { userId: outcome.userId, sessionId: outcome.sessionId, fence: outcome.fence },
            'session admitted',
          );
          setRateLimitHeaders(reply, quota, outcome.rate);
          return reply.code(202).send({
            sessionId: outcome.sessionId,
            userId: outcome.userId,
            fence: outcome.fence,
            state: 'pending' as const,
            lifetimeMs: outcome.lifetimeMs,
          });
      }
    },
  );
};
