import { randomBytes } from 'node:crypto';
import { WEBHOOK_ID_PATTERN } from '@cq/contract';
import { cleanUp, watchClient } from '@cq/test-harness';
import type { Redis } from 'ioredis';
import { describe, expect, inject, it } from 'vitest';
import { TEST_API_KEY, jsonHeaders, send, startTestApi } from './test-support/app.js';

/** One hex tag per run: every id below carries it, so a Redis command about one of them would show it. */
const tag = randomBytes(6).toString('hex');

/**
 * Every path parameter of the API: a value of its documented shape (its user, host, webhook do not
 * exist), and whether a colon is part of that shape (a user id and a `WORKER_ID`, `<hostname>:<pid>`,
 * may hold one; a session id, a UUID, and a webhook id may not).
 */
const PARAMS: Readonly<Record<string, { valid: string; colonAllowed: boolean }>> = {
  userId: { valid: `u-${tag}`, colonAllowed: true },
  sessionId: { valid: `${tag.slice(0, 8)}-${tag.slice(8)}-4abc-8def-0123456789ab`, colonAllowed: false },
  workerId: { valid: `h-${tag}`, colonAllowed: true },
  id: { valid: `wh_${tag}${'0'.repeat(12)}`, colonAllowed: false },
  port: { valid: '8080', colonAllowed: false },
};

/** Values that are not of any parameter's shape, as they appear in the path (percent-encoded where they must). */
function badValues(valid: string, colonAllowed: boolean): Array<[string, string]> {
  return [
    ...(colonAllowed ? [] : ([['a colon', `${valid}:rec`]] as Array<[string, string]>)),
    ['an encoded slash', `${valid}%2Frec`],
    ['a hash tag', `${valid}${encodeURIComponent('{x}')}`],
    ['a raw hash tag', `{${valid}}`],
    ['129 characters', `${valid}${'a'.repeat(129 - valid.length)}`],
    ['an empty-looking value', '%20'],
  ];
}

/** A body the route takes, so that only the path (or the query) is wrong. */
function bodyOf(method: string, url: string): string | undefined {
  if (method === 'PATCH') return '{"lifetimeMs": 1000}';
  if (method === 'POST' && url === '/v1/tokens') return JSON.stringify({ userId: PARAMS['userId']!.valid });
  if (method === 'POST' && url === '/v1/spawn') return '{"token": "v1.not-a-token"}';
  if (method === 'POST' && url === '/v1/webhooks') return '{"url": "https://example.com/hook"}';
  if (method === 'POST' && url === '/v1/sessions/stop') return '{"state": "running"}';
  if (method === 'POST' && url.endsWith('/commands')) return '{"argv": ["true"]}';
  return undefined;
}

describe('request shapes: path parameters and query parameters are checked before anything else', async () => {
  const api = await startTestApi();
  const watch = await watchClient(api.app.redis as Redis, inject('redisUrl'));
  cleanUp(() => watch.stop());

  const routes = api.app.routeTable.filter((r) => r.method !== 'HEAD' && r.url.startsWith('/v1/'));
  const withParams = routes.filter((r) => r.url.includes('/:'));
  const namesIn = (url: string): string[] => [...url.matchAll(/:(\w+)/g)].map((m) => m[1]!);
  const pathOf = (url: string, values: Readonly<Record<string, string>> = {}): string =>
    url.replace(/:(\w+)/g, (_, name: string) => values[name] ?? PARAMS[name]!.valid);
  const request = (method: string, url: string, path: string, headers: Record<string, string> = {}) => {
    const body = bodyOf(method, url);
    return send(api.baseUrl, method, path, {
      headers: {
        ...(body === undefined ? { authorization: jsonHeaders().authorization! } : jsonHeaders()),
        ...headers,
      },
      ...(body === undefined ? {} : { body }),
    });
  };
  /** Runs `run` and answers the Redis commands the API sent meanwhile that name one of the ids above. */
  async function commandsAbout(run: () => Promise<void>): Promise<string[][]> {
    await watch.settle();
    const before = watch.seen.length;
    await run();
    await watch.settle();
    return watch.seen
      .slice(before)
      .map((seen) => seen.args)
      .filter((args) => args.some((arg) => arg.includes(tag)));
  }

  it('knows every route with a path parameter, and every parameter in it', () => {
    expect(withParams.map((r) => `${r.method} ${r.url}`).sort()).toEqual([
      'DELETE /v1/sessions/:sessionId/ports/:port/*',
      'DELETE /v1/users/:userId/session',
      'DELETE /v1/webhooks/:id',
      'GET /v1/sessions/:sessionId',
      'GET /v1/sessions/:sessionId/exec',
      'GET /v1/sessions/:sessionId/files',
      'GET /v1/sessions/:sessionId/ports/:port/*',
      'GET /v1/users/:userId/history',
      'GET /v1/users/:userId/session',
      'GET /v1/users/:userId/session/events',
      'GET /v1/users/:userId/sessions/:sessionId/logs',
      'GET /v1/webhooks/:id/deliveries',
      'PATCH /v1/sessions/:sessionId/ports/:port/*',
      'PATCH /v1/users/:userId/session',
      'POST /v1/hosts/:workerId/drain',
      'POST /v1/sessions/:sessionId/commands',
      'POST /v1/sessions/:sessionId/connect',
      'POST /v1/sessions/:sessionId/ports/:port/*',
      'POST /v1/users/:userId/session/activity',
      'PUT /v1/sessions/:sessionId/files',
      'PUT /v1/sessions/:sessionId/ports/:port/*',
    ]);
    for (const { url } of withParams)
      for (const name of namesIn(url)) expect(PARAMS, `${url}: ${name}`).toHaveProperty(name);
  });

  it('a path parameter not of its shape is 400 invalid_request naming it (JSON or SSE asked), and reaches no Redis command', async () => {
    let checked = 0;
    const commands = await commandsAbout(async () => {
      for (const { method, url } of withParams)
        for (const name of namesIn(url)) {
          const { valid, colonAllowed } = PARAMS[name]!;
          for (const [what, value] of badValues(valid, colonAllowed))
            for (const accept of method === 'GET' ? ['application/json', 'text/event-stream'] : ['application/json']) {
              const path = pathOf(url, { [name]: value });
              const res = await request(method, url, path, { accept });
              const label = `${method} ${url} ${name} with ${what} (${accept})`;
              expect(res.status, label).toBe(400);
              expect(res.body.error.code, label).toBe('invalid_request');
              expect(res.body.error.message, label).toMatch(new RegExp(`^Path parameter "${name}" is not valid: `));
              checked++;
            }
        }
    });
    // Ten routes, their parameters, up to six bad values each, JSON and SSE for the GETs.
    expect(checked).toBeGreaterThanOrEqual(90);
    expect(commands).toEqual([]);
  });

  it('a path parameter over 256 characters is 414 uri_too_long (the router refuses it first)', async () => {
    for (const { method, url } of withParams)
      for (const name of namesIn(url)) {
        const res = await request(method, url, pathOf(url, { [name]: `${tag}${'a'.repeat(300)}` }));
        expect(res.status, `${method} ${url} ${name}`).toBe(414);
        expect(res.body.error.code).toBe('uri_too_long');
      }
  });

  it('a colon where the shape allows one (a user id, a WORKER_ID) is an ordinary id: 404 or 200, never 400 or 500', async () => {
    const allowed = Object.entries(PARAMS).filter(([, p]) => p.colonAllowed);
    const commands = await commandsAbout(async () => {
      for (const { method, url } of withParams)
        for (const [name, { valid }] of allowed) {
          // The user's event stream stays open for a user without a session: left out here.
          if (!namesIn(url).includes(name) || url.endsWith('/events')) continue;
          const res = await request(method, url, pathOf(url, { [name]: `${valid}:rec` }));
          expect([200, 404], `${method} ${url} ${name} with a colon`).toContain(res.status);
        }
    });
    // These do reach Redis, and the watch above sees it: its empty lists mean something.
    expect(commands.length).toBeGreaterThan(0);
  });

  it('the dashboard reads output only of a session id that is a UUID', async () => {
    const basic = { authorization: `Basic ${Buffer.from(`op:${TEST_API_KEY}`).toString('base64')}` };
    const { valid } = PARAMS['sessionId']!;
    const commands = await commandsAbout(async () => {
      for (const [what, value] of badValues(valid, false)) {
        const path = `/dashboard/api/output?userId=${PARAMS['userId']!.valid}&sessionId=${value}`;
        const res = await send(api.baseUrl, 'GET', path, { headers: basic });
        expect(res.status, what).toBe(400);
        expect(res.body.error.message, what).toMatch(/^Query parameter "sessionId" is not valid: /);
      }
    });
    expect(commands).toEqual([]);
  });

  it('every /v1 route refuses a query parameter it does not take, 400 naming it, and reaches no Redis command', async () => {
    expect(routes.length).toBeGreaterThanOrEqual(16);
    const commands = await commandsAbout(async () => {
      // The session proxy's /ports/ route passes its query to the session, whatever it holds.
      for (const { method, url } of routes.filter((r) => !r.url.includes('/ports/'))) {
        // The files routes take one query parameter, always: the path in the session.
        const path = url.endsWith('/files') ? `${pathOf(url)}?path=/tmp/x&` : `${pathOf(url)}?`;
        const one = await request(method, url, `${path}${tag}=1`);
        expect(one.status, `${method} ${url}`).toBe(400);
        expect(one.body.error, `${method} ${url}`).toEqual({
          code: 'invalid_request',
          message: `Unknown query parameter "${tag}".`,
        });
        const two = await request(method, url, `${path}verbose&${tag}=a&${tag}=b`);
        expect(two.body.error.message, `${method} ${url}`).toBe(`Unknown query parameters "verbose", "${tag}".`);
      }
    });
    expect(commands).toEqual([]);
  });

  it('the routes outside /v1 (operations, the dashboard, bull-board) keep taking query strings', async () => {
    const basic = { authorization: `Basic ${Buffer.from(`op:${TEST_API_KEY}`).toString('base64')}` };
    for (const path of ['/?x=1', '/healthz?x=1', '/readyz?x=1', '/metrics?x=1', '/openapi.json?x=1'])
      expect((await send(api.baseUrl, 'GET', path)).status, path).toBe(200);
    for (const path of ['/dashboard?x=1', '/dashboard/queues?x=1'])
      expect((await send(api.baseUrl, 'GET', path, { headers: basic })).status, path).toBe(200);
  });

  it('a webhook id as the coordinator makes it is one the routes take; the OpenAPI document gives the shapes', async () => {
    const created = await api.coordinator.webhooks.create({
      url: 'https://example.com/hook',
      events: [],
      sealedSecret: 'x',
    });
    expect(created.id).toMatch(WEBHOOK_ID_PATTERN);
    expect(await api.coordinator.webhooks.delete(created.id)).toBe(true);

    const doc = (await send(api.baseUrl, 'GET', '/openapi.json')).body;
    const parameter = (path: string, method: string, name: string) =>
      doc.paths[path][method].parameters.find((p: { name: string }) => p.name === name);
    expect(parameter('/v1/users/{userId}/sessions/{sessionId}/logs', 'get', 'sessionId').schema).toMatchObject({
      format: 'uuid',
    });
    expect(parameter('/v1/webhooks/{id}', 'delete', 'id').schema.pattern).toBe(WEBHOOK_ID_PATTERN.source);
    // A route without query parameters lists none.
    expect((doc.paths['/v1/pools'].get.parameters ?? []).filter((p: { in: string }) => p.in === 'query')).toEqual([]);
    expect(parameter('/v1/hosts', 'get', 'pool').schema.pattern).toBe('^[a-z0-9-]{1,64}$');
  });
});
