import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { HttpError } from '../http-errors.js';
import type { HistoryEntry, SessionMismatch } from '@cq/coordinator';
import {
  bulkStopAccepted,
  bulkStopBody,
  emptyBody,
  errorSchema,
  historyView,
  listSessionsQuery,
  noQuery,
  sessionByIdView,
  sessionIdParams,
  sessionMatchQuery,
  sessionView,
  sessionsPage,
  setLifetimeBody,
  stopAccepted,
  userParams,
  type EndedSession,
} from '@cq/contract';
import { iso, isoField } from '../iso.js';
import { filterOf, liveSession, type SessionListReader } from '../session-list.js';
import { z } from 'zod';
import { audit } from '../plugins/auth.js';

/** A history entry as the contract shows it. */
function endedSession(entry: HistoryEntry): EndedSession {
  return {
    sessionId: entry.sessionId,
    fence: entry.fence,
    state: entry.state,
    ...(entry.workerId === undefined ? {} : { workerId: entry.workerId }),
    ...isoField('startedAt', entry.startedAt),
    endedAt: iso(entry.endedAt),
    ...(entry.exitCode === undefined ? {} : { exitCode: entry.exitCode }),
    ...(entry.reason === undefined ? {} : { reason: entry.reason }),
    pool: entry.pool,
    labels: { ...entry.labels },
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

/** A label change as its audit line says it: the labels set, with their values, and those removed. */
function labelChange(change: Readonly<Record<string, string | null>>): {
  labelsSet?: Record<string, string>;
  labelsRemoved?: string[];
} {
  const set = Object.entries(change).filter((pair): pair is [string, string] => pair[1] !== null);
  const removed = Object.keys(change).filter((key) => change[key] === null);
  return {
    ...(set.length === 0 ? {} : { labelsSet: Object.fromEntries(set) }),
    ...(removed.length === 0 ? {} : { labelsRemoved: removed }),
  };
}

/** Options of {@link sessionRoutes}. */
export interface SessionRoutesOptions {
  /** Reads the session list's pages: the same reader serves the dashboard. */
  sessionList: SessionListReader;
}

/** The user's session (`GET`, `PATCH`, `DELETE`) and history, the session list, by id and bulk stop (service key). */
export const sessionRoutes: FastifyPluginAsyncZod<SessionRoutesOptions> = async (app, { sessionList }) => {
  app.get(
    '/v1/sessions',
    {
      config: { scope: 'sessions:read' },
      schema: {
        summary: 'Live sessions of every user, filtered and paged',
        description:
          'Pending, running and stopping sessions, in one fixed order (not by time), a page at a time: follow ' +
          '`next` until it is absent. A session that stays live for the whole walk appears exactly once, ' +
          'whatever starts or ends meanwhile; one that starts or ends during it may appear or not. Every ' +
          'filter given must match (label: each key=value). A page costs Redis work in proportion to its ' +
          'limit; with selective filters it may hold fewer sessions than limit, even none, and still have a next.',
        security: [{ serviceKey: [] }],
        querystring: listSessionsQuery,
        response: { 200: sessionsPage, 400: errorSchema, 401: errorSchema, 503: errorSchema },
      },
    },
    async (request) => {
      const page = await sessionList.page(request.query);
      return {
        sessions: page.sessions.map(liveSession),
        ...(page.next === undefined ? {} : { next: page.next }),
      };
    },
  );

  app.get(
    '/v1/sessions/:sessionId',
    {
      config: { scope: 'sessions:read' },
      schema: {
        summary: "A session by its id: live, or ended while it is in its user's history",
        security: [{ serviceKey: [] }],
        params: sessionIdParams,
        querystring: noQuery,
        response: { 200: sessionByIdView, 400: errorSchema, 401: errorSchema, 404: errorSchema, 503: errorSchema },
      },
    },
    async (request) => {
      const { sessionId } = request.params;
      const found = await app.coordinator.sessions.byId(sessionId);
      if (found === undefined)
        throw new HttpError('no_session', `No session ${sessionId} is live or in its user's history.`);
      return found.live ? liveSession(found.session) : { ...endedSession(found.entry), userId: found.userId };
    },
  );

  app.post(
    '/v1/sessions/stop',
    {
      config: { scope: 'sessions:write' },
      schema: {
        summary: 'Stop every live session a filter matches',
        description:
          'Each matching session is stopped as DELETE /v1/users/{userId}/session stops it (a pending one ends ' +
          'at once as stopped, a running one is stopping), at most 1,000 per call: call again while `more` is true.',
        security: [{ serviceKey: [] }],
        querystring: noQuery,
        body: bulkStopBody,
        response: { 202: bulkStopAccepted, 400: errorSchema, 401: errorSchema, 503: errorSchema },
      },
    },
    async (request, reply) => {
      const filter = filterOf(request.body);
      // The pending ones it ends give their worker slots back at once (the coordinator's stop does).
      const outcome = await app.coordinator.sessions.stopMatching(filter, { max: 1000 });
      audit(request, 'sessions.stop', JSON.stringify(filter), { filter, ...outcome });
      return reply.code(202).send(outcome);
    },
  );

  app.get(
    '/v1/users/:userId/session',
    {
      config: { scope: 'sessions:read' },
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
      config: { scope: 'sessions:write' },
      schema: {
        summary: "Change the user's session: its labels, its lifetime, or both",
        description:
          "labels are merged into the session's (null removes a key; at most 16 after the merge, else 400). " +
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
      const { lifetimeMs, labels } = request.body;
      const { maxLifetimeMs } = app.config.policy;
      const outcome = await app.coordinator.sessions.update(
        userId,
        {
          ...(lifetimeMs === undefined ? {} : { lifetimeMs }),
          ...(labels === undefined ? {} : { labels }),
        },
        maxLifetimeMs,
        request.query,
      );
      switch (outcome.outcome) {
        case 'too_many_labels':
          throw new HttpError(
            'invalid_request',
            `labels: the session would have ${outcome.count} labels after this change; at most 16. Remove some (null) in the same request.`,
            { field: 'labels' },
          );
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
          audit(request, 'session.update', userId, {
            userId,
            sessionId: session.sessionId,
            fence: session.fence,
            state: session.state,
            ...(lifetimeMs === undefined ? {} : { lifetimeMs }),
            ...(labels === undefined ? {} : labelChange(labels)),
          });
          return liveSession(session);
        }
      }
    },
  );

  app.delete(
    '/v1/users/:userId/session',
    {
      config: { scope: 'sessions:write' },
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
      audit(request, 'session.stop', userId, { userId, sessionId: outcome.sessionId, state: outcome.outcome });
      return reply.code(202).send({ sessionId: outcome.sessionId, userId, state: outcome.outcome });
    },
  );

  app.post(
    '/v1/users/:userId/session/activity',
    {
      config: { scope: 'sessions:write' },
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
      audit(request, 'session.activity', userId, { userId, sessionId: outcome.sessionId, state: outcome.state });
      return reply.code(204).send(null);
    },
  );

  app.get(
    '/v1/users/:userId/history',
    {
      config: { scope: 'sessions:read' },
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
      return { sessions: entries.map(endedSession) };
    },
  );
};
