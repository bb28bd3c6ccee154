import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import fp from 'fastify-plugin';
import { errorSchema } from '@cq/contract';
import { KeyRing, holds, type Caller, type KeyEntry, type Scope } from '../access.js';
import { HttpError } from '../http-errors.js';

declare module 'fastify' {
  interface FastifyContextConfig {
    /**
     * What a route needs: a key holding this scope (`Authorization: Bearer <key>`), any valid key
     * (`key`), or nothing (`public`: the route reveals no user's state, or is authorised otherwise, as a
     * spawn by its token). Every `/v1/` route must say which: one that does not stops the API at start.
     */
    scope?: RouteAccess;
  }
  interface FastifyInstance {
    /** The API's keys (API_KEYS and API_KEYS_FILE). */
    keys: KeyRing;
    /** Every route of the app with what it needs (method, URL template, scope). */
    routeTable: ReadonlyArray<{ method: string; url: string; scope?: RouteAccess }>;
  }
  interface FastifyRequest {
    /** The key's owner, once a route's scope check let the request through. */
    caller?: Caller;
  }
}

/** What a route needs: see `config.scope`. */
export type RouteAccess = Scope | 'key' | 'public';

/** The bearer token of a request's `Authorization` header, or undefined. */
export function bearer(request: FastifyRequest): string | undefined {
  const header = request.headers.authorization;
  if (typeof header !== 'string') return undefined;
  const match = /^Bearer[ ]+(\S+)\s*$/i.exec(header);
  return match?.[1];
}

/** The `403 forbidden` of a caller without `scope`. */
export function forbidden(caller: Caller, scope: Scope, what: string): HttpError {
  return new HttpError(
    'forbidden',
    `The key "${caller.name}" lacks the scope "${scope}", which ${what} needs; use a key that has it (or "admin").`,
    { scope },
  );
}

/**
 * Names the caller in every later log line of the request (the request log's answer line included):
 * its key's name, never the key.
 */
export function nameCaller(request: FastifyRequest, reply: FastifyReply, caller: Caller): void {
  request.caller = caller;
  request.log = request.log.child({ key: caller.name });
  // The answer's log line ("request completed") is written through the reply's logger.
  reply.log = request.log;
}

/**
 * Keys and scopes for every route: an `onRequest` hook (before any body is read, parsed or validated:
 * a caller without a key learns nothing, not even what a body must be, and costs no parsing) that
 * answers `401` without a valid key and `403 forbidden`, naming the scope, without the route's scope.
 * Routes name their scope in `config.scope`; a `/v1/` route that names none stops the API at start.
 * Also keeps the app's route table (the security tests and the docs' scope table are checked against it).
 */
export const authPlugin = fp(async (app: FastifyInstance, options: { keys: readonly KeyEntry[] }) => {
  const keys = new KeyRing(options.keys);
  app.decorate('keys', keys);
  const routeTable: Array<{ method: string; url: string; scope?: RouteAccess }> = [];
  app.decorate('routeTable', routeTable);
  app.addHook('onRoute', (route) => {
    const scope = route.config?.scope;
    if (route.url.startsWith('/v1/') && scope === undefined)
      throw new Error(`route ${String(route.method)} ${route.url} names no scope (config.scope)`);
    // The API's description says what each route needs, and its 403.
    if (route.url.startsWith('/v1/') && route.schema !== undefined && scope !== 'public') {
      const needs = scope === 'key' ? 'Needs any valid key.' : `Needs the scope \`${scope}\` (or \`admin\`).`;
      // Once: a GET route and its HEAD route share the schema.
      if (route.schema.description?.endsWith(needs) !== true)
        route.schema.description =
          route.schema.description === undefined ? needs : `${route.schema.description} ${needs}`;
      const response = route.schema.response as Record<number, unknown> | undefined;
      if (response !== undefined && scope !== 'key' && response[403] === undefined) response[403] = errorSchema;
    }
    for (const method of [route.method].flat())
      routeTable.push({ method, url: route.url, ...(scope === undefined ? {} : { scope }) });
  });
  app.addHook('onRequest', async (request, reply) => {
    const scope = request.routeOptions.config.scope;
    if (scope === undefined || scope === 'public') return;
    const key = bearer(request);
    const caller = key === undefined ? undefined : keys.identify(key);
    if (caller === undefined) {
      reply.header('WWW-Authenticate', 'Bearer realm="worker-coordinator"');
      throw new HttpError('unauthorized', key === undefined ? undefined : 'The service key is not valid.');
    }
    nameCaller(request, reply, caller);
    if (scope !== 'key' && !holds(caller, scope))
      throw forbidden(caller, scope, `${request.method} ${request.routeOptions.url ?? request.url}`);
  });
});

/**
 * The audit line of a change a caller made: `audit: true`, the key's name (the request logger's binding),
 * the action, its target and what else says what changed. Never a secret: callers pass none.
 */
export function audit(
  request: FastifyRequest,
  action: string,
  target: string,
  details: Record<string, unknown> = {},
): void {
  request.log.info({ audit: true, action, target, ...details }, `audit: ${action} ${target}`);
}
