import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { HttpError } from '../http-errors.js';
import { requireServiceKey } from '../plugins/auth.js';
import type { SessionMismatch, SessionView } from '@cq/coordinator';
import {
  emptyBody,
  errorSchema,
  historyView,
  noQuery,
  sessionMatchQuery,
  sessionView,
  setLifetimeBody,
  stopAccepted,
  userParams,
  type LiveSession,
} from '@cq/contract';
import { iso } from '../iso.js';
import { z } from 'zod';

/** Converts an optional epoch-ms field to ISO-8601, leaving it out when absent. */
function isoField<K extends string>(name: K, value: number | undefined): Partial<Record<K, string>> {
  return value === undefined ? {} : ({ [name]: iso(value) } as Record<K, string>);
}

/** The answer of `GET` (and `PATCH`) session: the live session as the contract shows it. */
function liveSession(session: SessionView): LiveSession {
  return {
    sessionId: session.sessionId,
    userId: session.userId,
    fence: session.fence,
    state: session.state,
    ready: session.ready,
    ...(session.endpoint === undefined ? {} : { endpoint: session.endpoint }),
    ...(session.workerId === undefined ? {} : { workerId: session.workerId }),
    ...isoField('startedAt', session.startedAt),
    ...isoField('leaseExpiresAt', session.leaseExpiresAt),
    ...isoField('deadline', session.deadline),
    ...(session.idleTimeoutMs === undefined ? {} : { idleTimeoutMs: session.idleTimeoutMs }),
    ...isoField('lastActivityAt', session.lastActivityAt),
  };
}

/** The 409 of a change whose `?sessionId=` is not the user's live session: nothing was changed. */
function sessionMismatch(userId: string, mismatch: SessionMismatch): HttpError {
  const live =
    mismatch.liveSessionId === undefined ? 'the user has no live session' : "the user's live session is another one";
  return new HttpError(
    'session_mismatch',
    `The request names session ${mismatch.sessionId} of user ${userId}, but ${live}; nothing was changed.`,
  );
}

/** The user's session (`GET`, `PATCH`, `DELETE`) and history (service key). */
export const sessionRoutes: FastifyPluginAsyncZod = async (app) => {
  const auth = requireServiceKey(app.config.apiKeys);

  app.get(
    '/v1/users/:userId/session',
    {
      onRequest: auth,
      schema: {
        summary: "The user's live (non-terminal) session",
        security: [{ serviceKey: [] }],
        params: userParams,
        querystring: noQuery,
        response: { 200: sessionView, 400: errorSchema, 401: errorSchema, 404: errorSchema, 503: errorSchema },
      },
    },
    async (request) => {
      const session = await app.coordinator.sessions.settleAndRead(request.params.userId);
      if (session === undefined)
        throw new HttpError('no_session', `User ${request.params.userId} has no live session.`);
      return liveSession(session);
    },
  );

  app.patch(
    '/v1/users/:userId/session',
    {
      onRequest: auth,
      schema: {
        summary: "Change the user's session's lifetime",
        description:
          'A running session now ends at now + lifetimeMs (sooner or later than before), never after its ' +
          'start + MAX_LIFETIME_MS; its worker host learns of it at its next lease renewal (about a second). ' +
          'A pending session gets lifetimeMs as the lifetime it will have once started. ' +
          '409 session_stopping while a stop is under way; 409 session_mismatch when sessionId names another ' +
          'session than the live one (nothing changes).',
        security: [{ serviceKey: [] }],
        params: userParams,
        querystring: sessionMatchQuery,
        body: setLifetimeBody,
        response: {
          200: sessionView,
          400: errorSchema,
          401: errorSchema,
          404: errorSchema,
          409: errorSchema,
          503: errorSchema,
        },
      },
    },
    async (request) => {
      const { userId } = request.params;
      const { lifetimeMs } = request.body;
      const { maxLifetimeMs } = app.config.policy;
      const outcome = await app.coordinator.sessions.setLifetime(userId, lifetimeMs, maxLifetimeMs, request.query);
      switch (outcome.outcome) {
        case 'no_session':
          throw new HttpError('no_session', `User ${userId} has no live session.`);
        case 'session_mismatch':
          throw sessionMismatch(userId, outcome);
        case 'lifetime_too_long':
          throw new HttpError(
            'lifetime_too_long',
            `lifetimeMs may be at most ${outcome.largestLifetimeMs} for this session now: ` +
              `it may not end after its start + MAX_LIFETIME_MS (${maxLifetimeMs} ms).`,
            { largestLifetimeMs: outcome.largestLifetimeMs },
          );
        case 'stopping':
          throw new HttpError(
            'session_stopping',
            `The session ${outcome.sessionId} of user ${userId} is stopping; its lifetime can no longer change.`,
            { sessionId: outcome.sessionId },
          );
        case 'changed': {
          const { session } = outcome;
          request.log.info(
            { userId, sessionId: session.sessionId, fence: session.fence, state: session.state, lifetimeMs },
            'session lifetime changed',
          );
          return liveSession(session);
        }
      }
    },
  );

  app.delete(
    '/v1/users/:userId/session',
    {
      onRequest: auth,
      schema: {
        summary: "Stop the user's live session (it ends as stopped)",
        description: '409 session_mismatch when sessionId names another session than the live one (nothing changes).',
        security: [{ serviceKey: [] }],
        params: userParams,
        querystring: sessionMatchQuery,
        body: emptyBody,
        response: {
          202: stopAccepted,
          400: errorSchema,
          401: errorSchema,
          404: errorSchema,
          409: errorSchema,
          503: errorSchema,
        },
      },
    },
    async (request, reply) => {
      const { userId } = request.params;
      const outcome = await app.coordinator.sessions.requestStop(userId, request.query);
      if (outcome.outcome === 'no_session') throw new HttpError('no_session', `User ${userId} has no live session.`);
      if (outcome.outcome === 'session_mismatch') throw sessionMismatch(userId, outcome);
      // A pending session stopped here gives its worker slot back now (a running one, through its host).
      if (outcome.outcome === 'stopped')
        await app.coordinator.workers
          .release([outcome.sessionId])
          .catch((err: unknown) => request.log.debug({ err }, 'slot not given back; its hold runs out'));
      request.log.info({ userId, sessionId: outcome.sessionId, state: outcome.outcome }, 'stop requested');
      return reply.code(202).send({ sessionId: outcome.sessionId, userId, state: outcome.outcome });
    },
  );

  app.post(
    '/v1/users/:userId/session/activity',
    {
      onRequest: auth,
      schema: {
        summary: "Record activity of the user's running session",
        description:
          'The service saw the session in use (e.g. its user working): its idle clock starts again, so a ' +
          "session with an idle timeout (the token's idleTimeoutMs, else IDLE_TIMEOUT_MS) is stopped only " +
          'that long after its last activity. Its worker host learns of it at its next lease renewal. ' +
          '204 for any live session (only a running one has an idle clock); 404 no_session without one; ' +
          '409 session_mismatch when sessionId names another session than the live one (nothing changes).',
        security: [{ serviceKey: [] }],
        params: userParams,
        querystring: sessionMatchQuery,
        body: emptyBody,
        response: {
          204: z.null().describe('Recorded'),
          400: errorSchema,
          401: errorSchema,
          404: errorSchema,
          409: errorSchema,
          503: errorSchema,
        },
      },
    },
    async (request, reply) => {
      const { userId } = request.params;
      const outcome = await app.coordinator.sessions.recordActivity(userId, request.query);
      if (outcome.outcome === 'no_session') throw new HttpError('no_session', `User ${userId} has no live session.`);
      if (outcome.outcome === 'session_mismatch') throw sessionMismatch(userId, outcome);
      request.log.debug({ userId, sessionId: outcome.sessionId, state: outcome.state }, 'activity recorded');
      return reply.code(204).send(null);
    },
  );

  app.get(
    '/v1/users/:userId/history',
    {
      onRequest: auth,
      schema: {
        summary: "The user's ended sessions, newest first",
        security: [{ serviceKey: [] }],
        params: userParams,
        querystring: noQuery,
        response: { 200: historyView, 400: errorSchema, 401: errorSchema, 503: errorSchema },
      },
    },
    async (request) => {
      const entries = await app.coordinator.sessions.history(request.params.userId);
      return {
        sessions: entries.map((entry) => ({
          sessionId: entry.sessionId,
          fence: entry.fence,
          state: entry.state,
          ...(entry.workerId === undefined ? {} : { workerId: entry.workerId }),
          ...isoField('startedAt', entry.startedAt),
          endedAt: iso(entry.endedAt),
          ...(entry.exitCode === undefined ? {} : { exitCode: entry.exitCode }),
          ...(entry.reason === undefined ? {} : { reason: entry.reason }),
        })),
      };
    },
  );
};
