import { randomUUID } from 'node:crypto';
import { UnavailableError, withTimeout } from '@cq/coordinator';
import { SPAWN_JOB, spawnJobId, spawnJobOptions, type SpawnJob } from '@cq/service-kit';
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { HttpError, sendError } from '../http-errors.js';
import { FailedAttemptLimiter } from '../failed-attempts.js';
import { setRateLimitHeaders } from '../rate-limit-headers.js';
import { errorSchema, spawnAdmitted, spawnBody } from '../schemas.js';

/**
 * Every spawn is answered within this many ms of its arrival (the contract's 2 s for a 503, less a
 * margin): the enqueue and, when it fails, the rollback share what the admission left of it.
 */
const ANSWER_WITHIN_MS = 1500;

/** The least time a step after the admission gets, ms, even when the admission used up the budget. */
const STEP_MIN_MS = 100;

/** `POST /v1/spawn`: admit a spawn with a one-time token (the token is the credential). */
export const spawnRoutes: FastifyPluginAsyncZod = async (app) => {
  const { policy } = app.config;
  const quota = { name: 'spawn', limit: policy.spawnBurst, windowMs: policy.spawnIntervalMs * policy.spawnBurst };
  const failures = new FailedAttemptLimiter({ limit: app.config.spawnFailureLimit, windowMs: app.config.spawnFailureWindowMs });
  const failureQuota = { name: 'spawn-failures', limit: failures.limit, windowMs: failures.windowMs };
  app.post(
    '/v1/spawn',
    {
      schema: {
        summary: 'Admit a spawn: token valid, no live session, throttle open; then the session is queued',
        body: spawnBody,
        response: { 202: spawnAdmitted, 400: errorSchema, 403: errorSchema, 409: errorSchema, 429: errorSchema, 503: errorSchema },
      },
    },
    async (request, reply) => {
      const { token } = request.body;
      // An address that guessed wrong too often is refused without asking Redis.
      const blocked = failures.check(request.ip);
      if (blocked !== undefined) {
        setRateLimitHeaders(reply, failureQuota, { allowed: false, limit: failures.limit, remaining: 0, retryAfterMs: blocked.retryAfterMs, resetAfterMs: blocked.retryAfterMs });
        app.metrics.throttled.inc({ route: '/v1/spawn' });
        return sendError(reply, 'throttled', 'Too many invalid tokens from this address; retry later.', { retryAfterMs: blocked.retryAfterMs });
      }
      const sessionId = randomUUID();
      const deadline = performance.now() + ANSWER_WITHIN_MS;
      const left = (): number => Math.max(STEP_MIN_MS, Math.round(deadline - performance.now()));
      let outcome;
      try {
        outcome = await app.coordinator.sessions.admit(token, {}, sessionId);
      } catch (err) {
        // The admission may still run once Redis answers again: cancel it then, so the token stays valid.
        if (err instanceof UnavailableError) app.reconciler.add(token, sessionId);
        throw err;
      }
      app.metrics.admissions.inc({ outcome: outcome.outcome });
      app.stats.count(outcome.outcome);
      switch (outcome.outcome) {
        case 'token_invalid':
          failures.fail(request.ip);
          return sendError(reply, 'token_invalid');
        case 'session_exists':
          reply.header('Location', `/v1/users/${encodeURIComponent(outcome.userId)}/session`);
          return sendError(reply, 'session_exists', `User ${outcome.userId} already has a live session (${outcome.state}).`, {
            sessionId: outcome.sessionId,
          });
        case 'throttled':
          setRateLimitHeaders(reply, quota, outcome.rate);
          app.metrics.throttled.inc({ route: '/v1/spawn' });
          return sendError(reply, 'throttled', 'Spawning too often for this user.', { retryAfterMs: outcome.rate.retryAfterMs });
        case 'admitted':
          break;
      }
      const log = request.log.child({ userId: outcome.userId, sessionId: outcome.sessionId, fence: outcome.fence });
      const job: SpawnJob = { userId: outcome.userId, sessionId: outcome.sessionId, fence: outcome.fence };
      try {
        await withTimeout(
          app.spawnQueues.forUser(outcome.userId).add(SPAWN_JOB, job, { ...spawnJobOptions, jobId: spawnJobId(outcome.userId, outcome.fence) }),
          left(),
          'enqueue',
        );
      } catch (err) {
        // The session could not be handed on: roll the admission back so the token works again.
        const rollback = await withTimeout(app.coordinator.sessions.cancelAdmission(token, outcome.sessionId), left(), 'rollback').catch((cause: unknown) =>
          cause instanceof Error ? cause : new Error(String(cause)),
        );
        const enqueueError = { message: (err as Error).message };
        if (rollback instanceof Error) {
          // Redis is unreachable, or too slow to answer in time: cancel later, if the session is still pending then.
          app.reconciler.add(token, outcome.sessionId);
          log.warn({ err: enqueueError, rollback: rollback.message }, 'enqueue failed; rollback deferred');
          app.metrics.admissions.inc({ outcome: 'rolled_back' });
          throw new HttpError('unavailable', 'The spawn queue is unavailable; retry shortly with the same token (once the admission is rolled back it works again).');
        }
        if (rollback.cancelled) {
          log.warn({ err: enqueueError, rollback }, 'enqueue failed; admission rolled back');
          app.metrics.admissions.inc({ outcome: 'rolled_back' });
          throw new HttpError('unavailable', 'The spawn queue is unavailable; the token is still valid, retry shortly.');
        }
        // Not pending any more: the job did reach a worker host (only its answer was lost), or the
        // admission itself was lost in a failover. Answer what Redis holds.
        const live = await withTimeout(app.coordinator.sessions.get(outcome.userId), left(), 'session read').catch(() => undefined);
        if (live?.sessionId !== outcome.sessionId) {
          log.warn({ err: enqueueError, rollback }, 'enqueue failed and the admission is gone');
          throw new HttpError('unavailable', 'The spawn queue is unavailable and the admission could not be confirmed; look up the session, or retry with a new token.');
        }
        log.info({ err: enqueueError }, 'enqueue answer lost, but a worker host already took the session');
      }
      log.info('session admitted');
      setRateLimitHeaders(reply, quota, outcome.rate);
      return reply
        .code(202)
        .send({ sessionId: outcome.sessionId, userId: outcome.userId, fence: outcome.fence, state: 'pending' as const, lifetimeMs: outcome.lifetimeMs });
    },
  );
};
