import { createHash } from 'node:crypto';
import { Redis } from 'ioredis';
import { describe, expect, inject, it } from 'vitest';
import { TEST_API_KEY, send, startTestApi } from './test-support/app.js';
import { rawExchange } from './test-support/raw-http.js';
import { cleanUp } from '@cq/test-harness';

/** Routes anyone may call: they reveal no state of any user (spawn is authorised by its token). */
const PUBLIC = new Set(['GET /', 'GET /healthz', 'GET /readyz', 'GET /metrics', 'GET /openapi.json', 'POST /v1/spawn']);

describe('security', async () => {
  const api = await startTestApi({ TOKEN_LIMIT: '1000' });
  const redis = new Redis(inject('redisUrl'));
  cleanUp(() => redis.disconnect());

  it('every route that reveals or changes state refuses a request without a valid service key', async () => {
    const routes = api.app.routeTable.filter((r) => r.method !== 'HEAD' && !PUBLIC.has(`${r.method} ${r.url}`));
    expect(routes.length).toBeGreaterThan(10);
    expect(routes.map((r) => r.url)).toEqual(
      expect.arrayContaining([
        '/v1/tokens',
        '/v1/users/:userId/session',
        '/v1/users/:userId/history',
        '/dashboard/api/state',
      ]),
    );
    const wrongKey = 'wrong-key-0123456789abcdef';
    for (const { method, url } of routes) {
      const path = url.replace(/:\w+/g, 'someone').replace(/\*$/, 'js/main.js');
      const dashboard = path.startsWith('/dashboard');
      const attempts: Array<Record<string, string>> = [
        {},
        { authorization: `Bearer ${wrongKey}` },
        { authorization: `Basic ${Buffer.from(`user:${wrongKey}`).toString('base64')}` },
        // The dashboard takes Basic only; the API's routes take Bearer only.
        dashboard
          ? { authorization: `Bearer ${TEST_API_KEY}` }
          : { authorization: `Basic ${Buffer.from(`user:${TEST_API_KEY}`).toString('base64')}` },
      ];
      for (const headers of attempts) {
        const res = await send(api.baseUrl, method, path, {
          headers: {
            ...headers,
            ...(method === 'GET' || method === 'DELETE' ? {} : { 'content-type': 'application/json' }),
          },
          ...(method === 'GET' || method === 'DELETE' ? {} : { body: '{"userId":"someone"}' }),
        });
        expect(res.status, `${method} ${path} ${JSON.stringify(headers)}`).toBe(401);
      }
    }
  });

  it('every service-key route answers 401 before it reads, parses or validates a body', async () => {
    const routes = api.app.routeTable.filter(
      (r) =>
        ['POST', 'PATCH', 'PUT', 'DELETE'].includes(r.method) &&
        !PUBLIC.has(`${r.method} ${r.url}`) &&
        !r.url.startsWith('/dashboard'),
    );
    expect(routes.map((r) => `${r.method} ${r.url}`)).toEqual(
      expect.arrayContaining(['POST /v1/tokens', 'PATCH /v1/users/:userId/session', 'POST /v1/webhooks']),
    );
    const bodies: Array<[string, string]> = [
      ['application/json', '{'],
      ['application/json', '{"unknown": 1, "userId": 5}'],
      ['application/json', '['.repeat(20_000) + ']'.repeat(20_000)],
      ['application/json', JSON.stringify({ userId: 'x', pad: 'y'.repeat(70_000) })],
      ['text/plain', 'hello'],
    ];
    for (const { method, url } of routes) {
      const path = url.replace(/:\w+/g, 'someone');
      for (const [type, body] of bodies) {
        const res = await send(api.baseUrl, method, path, { headers: { 'content-type': type }, body });
        expect(res.status, `${method} ${path} ${type} ${body.slice(0, 30)}`).toBe(401);
        expect(res.body.error.code).toBe('unauthorized');
      }
      // Headers that announce a body which never comes: answered at once, so the body was not waited for.
      const answer = await rawExchange(
        api.baseUrl,
        `${method} ${path} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n`,
      );
      expect(answer.status, `${method} ${path} without its body`).toBe(401);
      expect(answer.body.error.code).toBe('unauthorized');
    }
  });

  it('Redis holds no token secret anywhere: only SHA-256 digests', async () => {
    const tokens: string[] = [];
    for (let i = 0; i < 5; i++)
      tokens.push((await api.client.issueToken({ userId: `secret-${i}`, metadata: { n: i } })).token);
    await api.client.spawn(tokens[0]!);
    await api.client.spawn(tokens[1]!);
    await api.client.stopSession('secret-1');
    const secrets = tokens.map((t) => t.split('.')[2]!);
    const dump: string[] = [];
    let cursor = '0';
    do {
      const [next, keys] = await redis.scan(cursor, 'MATCH', `${api.config.keyPrefix}:*`, 'COUNT', 1000);
      cursor = next;
      for (const key of keys) dump.push(key, (await redis.dumpBuffer(key))?.toString('latin1') ?? '');
    } while (cursor !== '0');
    expect(dump.length).toBeGreaterThan(10);
    const everything = dump.join('\n');
    for (const [i, secret] of secrets.entries()) {
      expect(everything).not.toContain(secret);
      expect(everything).not.toContain(tokens[i]!);
    }
    // The unused tokens are there, as digests.
    const digest = createHash('sha256').update(secrets[4]!).digest('hex');
    expect(everything).toContain(digest);
  });
});
