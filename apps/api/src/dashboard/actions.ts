import { sessionIdSchema, userIdSchema } from '@cq/contract';
import type { FastifyInstance } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { holds, type Caller, type Scope } from '../access.js';
import { HttpError, errorBody } from '../http-errors.js';
import { dashboardKeyOf, forgeryReason } from './auth.js';
import { forbidden } from '../plugins/auth.js';
import { openTerminal } from '../exec/plugin.js';
import { filterOf } from '../session-list.js';
import { filterQuery } from './list-query.js';

/** An answer of one of the API's routes, passed on to the page as it came. */
export interface Forwarded {
  status: number;
  body: unknown;
}

/**
 * Calls one of the API's own routes with the operator's key (in-process, no socket): its scope check,
 * validation, audit line and errors are the dashboard's too, and the page never holds a key.
 */
export async function forward(
  app: FastifyInstance,
  key: string,
  method: 'GET' | 'POST' | 'PATCH' | 'DELETE',
  url: string,
  body?: unknown,
): Promise<Forwarded> {
  const response = await app.inject({
    method,
    url,
    headers: {
      authorization: `Bearer ${key}`,
      accept: 'application/json',
      ...(body === undefined ? {} : { 'content-type': 'application/json' }),
    },
    ...(body === undefined ? {} : { payload: JSON.stringify(body) }),
  });
  if (response.body === '') return { status: response.statusCode, body: null };
  try {
    return { status: response.statusCode, body: response.json() };
  } catch {
    return {
      status: 500,
      body: errorBody('internal', `The API answered HTTP ${response.statusCode} with a body that is not JSON.`),
    };
  }
}

/**
 * Live sessions the confirmation of a bulk stop examines at most, whatever its filter matches: its cost
 * is at most this many session reads (and the directory and index reads of the pages that hold them),
 * not one read per live session. When the list goes on past them, the answer says so (`more`).
 */
export const MATCHING_MAX_EXAMINED = 10_000;

/** Options of {@link dashboardActions}. */
export interface DashboardActionsOptions {
  /** Live sessions `matching` examines at most. @defaultValue {@link MATCHING_MAX_EXAMINED} */
  readonly matchingMaxExamined?: number;
}

/** What each action needs besides `dashboard:act`: the scope of the route it goes through. */
export const ACTION_SCOPES = {
  stop: 'sessions:write',
  lifetime: 'sessions:write',
  drain: 'hosts:write',
  stopMatching: 'sessions:write',
  open: 'sessions:connect',
  terminal: 'sessions:exec',
} as const satisfies Record<string, Scope>;

/** The actions a caller may take from the dashboard (the page shows buttons for these only). */
export function actionsOf(caller: Caller): Record<keyof typeof ACTION_SCOPES, boolean> {
  const act = holds(caller, 'dashboard:act');
  return {
    stop: act && holds(caller, ACTION_SCOPES.stop),
    lifetime: act && holds(caller, ACTION_SCOPES.lifetime),
    drain: act && holds(caller, ACTION_SCOPES.drain),
    stopMatching: act && holds(caller, ACTION_SCOPES.stopMatching),
    open: act && holds(caller, ACTION_SCOPES.open),
    terminal: act && holds(caller, ACTION_SCOPES.terminal),
  };
}

/**
 * The dashboard's actions, under `/dashboard/api/`: who signed in (`me`), how many sessions a filter
 * matches (`matching`, for a bulk stop's confirmation: among at most `matchingMaxExamined` live
 * sessions), and `actions/stop`, `actions/lifetime`, `actions/drain`, `actions/stop-matching`,
 * `actions/open`, each through the API route that does it (`DELETE`/`PATCH /v1/users/{userId}/session`,
 * `POST /v1/hosts/{workerId}/drain`, `POST /v1/sessions/stop`, `POST /v1/sessions/{id}/connect`) with
 * the operator's key. The dashboard's hook has already checked
 * `dashboard:act` and that the request is the page's own (origin and anti-forgery token).
 */
export async function dashboardActions(
  app: FastifyInstance,
  antiForgery: (key: string) => string,
  options: DashboardActionsOptions = {},
): Promise<void> {
  const maxExamined = options.matchingMaxExamined ?? MATCHING_MAX_EXAMINED;
  const scope = app.withTypeProvider<ZodTypeProvider>();
  const keyOf = (request: Parameters<typeof dashboardKeyOf>[0]): string => dashboardKeyOf(request) ?? '';

  scope.get('/api/me', { schema: { hide: true } }, async (request) => {
    const caller = request.caller!;
    return {
      name: caller.name,
      scopes: caller.scopes,
      actions: actionsOf(caller),
      antiForgeryToken: antiForgery(keyOf(request)),
    };
  });

  // How many live sessions a filter matches, for the confirmation: `count` among the `examined` first
  // of the list's walk; `more` when the walk stopped early, at `maxExamined`, before the list's end, so
  // sessions it did not examine may match too.
  scope.get('/api/matching', { schema: { hide: true, querystring: filterQuery } }, async (request) => {
    const filter = filterOf(request.query);
    let count = 0;
    let examined = 0;
    let from;
    for (;;) {
      if (examined >= maxExamined) return { count, more: true, examined };
      const page = await app.coordinator.sessions.list(filter, {
        limit: 1000,
        maxExamined: maxExamined - examined,
        ...(from === undefined ? {} : { from }),
      });
      count += page.sessions.length;
      examined += page.examined;
      if (page.next === undefined) return { count, more: false, examined };
      from = page.next;
    }
  });

  const sessionTarget = z.object({ userId: userIdSchema, sessionId: sessionIdSchema }).strict();
  const sessionPath = (userId: string, sessionId: string): string =>
    `/v1/users/${encodeURIComponent(userId)}/session?sessionId=${encodeURIComponent(sessionId)}`;

  scope.post('/api/actions/stop', { schema: { hide: true, body: sessionTarget } }, async (request, reply) => {
    const { userId, sessionId } = request.body;
    const answer = await forward(app, keyOf(request), 'DELETE', sessionPath(userId, sessionId));
    return reply.code(answer.status).send(answer.body);
  });

  scope.post(
    '/api/actions/lifetime',
    {
      schema: {
        hide: true,
        body: sessionTarget.extend({ lifetimeMs: z.number().int().min(1).max(Number.MAX_SAFE_INTEGER) }).strict(),
      },
    },
    async (request, reply) => {
      const { userId, sessionId, lifetimeMs } = request.body;
      const answer = await forward(app, keyOf(request), 'PATCH', sessionPath(userId, sessionId), { lifetimeMs });
      return reply.code(answer.status).send(answer.body);
    },
  );

  scope.post(
    '/api/actions/drain',
    { schema: { hide: true, body: z.object({ workerId: z.string().min(1).max(128) }).strict() } },
    async (request, reply) => {
      const url = `/v1/hosts/${encodeURIComponent(request.body.workerId)}/drain`;
      const answer = await forward(app, keyOf(request), 'POST', url);
      return reply.code(answer.status).send(answer.body);
    },
  );

  // A connect URL for the session's ready port (POST /v1/sessions/{id}/connect, audited there): the page
  // opens it in a new tab, on the session's own origin.
  scope.post(
    '/api/actions/open',
    {
      schema: {
        hide: true,
        body: z.object({ sessionId: sessionIdSchema, port: z.number().int().min(1).max(65_535).optional() }).strict(),
      },
    },
    async (request, reply) => {
      const { sessionId, port } = request.body;
      const url = `/v1/sessions/${encodeURIComponent(sessionId)}/connect`;
      const answer = await forward(app, keyOf(request), 'POST', url, port === undefined ? {} : { port });
      return reply.code(answer.status).send(answer.body);
    },
  );

  // A terminal on a running session (a WebSocket: GET, so the dashboard's hook checked only
  // `dashboard`): `dashboard:act` and `sessions:exec`, and the page's own origin and anti-forgery token
  // (in the query: a browser's WebSocket sends no header of the page's choosing). Through the session's
  // host as GET /v1/sessions/{id}/exec does, audited the same way.
  scope.get(
    '/api/terminal',
    {
      schema: {
        hide: true,
        querystring: z
          .object({
            sessionId: sessionIdSchema,
            token: z.string().max(128),
            cols: z.coerce.number().int().min(1).max(1000).optional(),
            rows: z.coerce.number().int().min(1).max(1000).optional(),
          })
          .strict(),
      },
    },
    async (request, reply) => {
      const caller = request.caller!;
      for (const needed of ['dashboard:act', ACTION_SCOPES.terminal] as const)
        if (!holds(caller, needed)) throw forbidden(caller, needed, 'a terminal from the dashboard');
      const forged = forgeryReason(request, keyOf(request), request.query.token);
      if (forged !== undefined)
        throw new HttpError('forbidden', `The dashboard refused this terminal: ${forged}.`, { scope: 'dashboard:act' });
      const { sessionId, cols, rows } = request.query;
      await openTerminal(app, request, reply, sessionId, {
        argv: ['/bin/sh'],
        tty: true,
        ...(cols === undefined ? {} : { cols }),
        ...(rows === undefined ? {} : { rows }),
      });
    },
  );

  scope.post('/api/actions/stop-matching', { schema: { hide: true, body: filterQuery } }, async (request, reply) => {
    const answer = await forward(app, keyOf(request), 'POST', '/v1/sessions/stop', filterOf(request.body));
    return reply.code(answer.status).send(answer.body);
  });
}
