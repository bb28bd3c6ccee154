import { cleanUp, startRedisServer } from '@cq/test-harness';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { jsonHeaders, send, startTestApi } from './test-support/app.js';

describe('Redis outage', async () => {
  const server = await startRedisServer();
  cleanUp(() => server.stop());
  const api = await startTestApi(
    { TOKEN_LIMIT: '1000', SPAWN_INTERVAL_MS: '1', SPAWN_BURST: '100' },
    { redisUrl: server.url },
  );

  const timed = async (method: string, path: string, body?: unknown, auth = true) => {
    const start = performance.now();
    const headers = body === undefined ? { authorization: jsonHeaders(auth).authorization ?? '' } : jsonHeaders(auth);
    const res = await send(api.baseUrl, method, path, {
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
      headers,
    });
    return { ...res, ms: performance.now() - start };
  };

  it('answers 503 unavailable within 2 s while Redis is down, and 202 again once it is back, without a restart', async () => {
    const before = await api.client.issueToken({ userId: 'outage' });
    await server.halt('SIGKILL');

    const answers = await Promise.all([
      timed('POST', '/v1/tokens', { userId: 'outage' }),
      timed('POST', '/v1/spawn', { token: before.token }, false),
      timed('GET', '/v1/users/outage/session'),
      timed('DELETE', '/v1/users/outage/session'),
      timed('PATCH', '/v1/users/outage/session', { lifetimeMs: 1000 }),
      timed('GET', '/v1/users/outage/history'),
      timed('GET', '/readyz', undefined, false),
    ]);
    for (const res of answers) {
      expect(res.status).toBe(503);
      expect(res.body.error.code).toBe('unavailable');
      expect(res.ms).toBeLessThan(2000);
    }
    expect((await timed('GET', '/healthz', undefined, false)).status).toBe(200);

    await server.resume();
    // Wait for the condition: the API has reconnected by itself.
    await expect
      .poll(async () => (await send(api.baseUrl, 'GET', '/readyz')).status, { timeout: 10_000, interval: 50 })
      .toBe(200);
    // The server restarted without persistence: the old token is gone; a new one works end to end.
    const fresh = await api.client.issueToken({ userId: 'outage' });
    const spawned = await send(api.baseUrl, 'POST', '/v1/spawn', {
      body: JSON.stringify({ token: fresh.token }),
      headers: jsonHeaders(false),
    });
    expect(spawned.status).toBe(202);
  });

  it('a Redis that hangs (SIGSTOP) also gets 503 within 2 s', async () => {
    const pid = server.pid()!;
    process.kill(pid, 'SIGSTOP');
    try {
      const res = await timed('POST', '/v1/tokens', { userId: 'hung' });
      expect(res.status).toBe(503);
      expect(res.ms).toBeLessThan(2000);
    } finally {
      process.kill(pid, 'SIGCONT');
    }
    await expect
      .poll(async () => (await send(api.baseUrl, 'GET', '/readyz')).status, { timeout: 10_000, interval: 50 })
      .toBe(200);
    expect((await timed('POST', '/v1/tokens', { userId: 'hung' })).status).toBe(201);
  });
});

describe('a bug is not an outage', async () => {
  const api = await startTestApi();
  afterEach(() => vi.restoreAllMocks());

  it('a TypeError thrown under a route answers 500 internal and is logged with its stack', async () => {
    // A bug of ours inside a coordinator call, with words the old message match took for an outage.
    const bug = new TypeError("Cannot read properties of undefined (reading 'stream')");
    vi.spyOn(api.app.redis, 'lrange').mockRejectedValueOnce(bug);
    const res = await send(api.baseUrl, 'GET', '/v1/users/bug/history', { headers: jsonHeaders() });
    expect(res.status).toBe(500);
    expect(res.body).toEqual({ error: { code: 'internal', message: expect.any(String) } });
    expect(JSON.stringify(res.body)).not.toContain('stream');
    const logged = api.logs.find((line) => line['msg'] === 'unexpected error');
    expect(logged).toMatchObject({ level: 50, err: { type: 'TypeError', message: bug.message } });
    expect((logged!['err'] as { stack: string }).stack).toContain(`TypeError: ${bug.message}\n    at `);
  });

  it('a connection error of ioredis under the same route still answers 503 unavailable', async () => {
    vi.spyOn(api.app.redis, 'lrange').mockRejectedValueOnce(new Error('Connection is closed.'));
    const res = await send(api.baseUrl, 'GET', '/v1/users/bug/history', { headers: jsonHeaders() });
    expect(res.status).toBe(503);
    expect(res.body.error.code).toBe('unavailable');
    const logged = api.logs.find((line) => line['msg'] === 'redis unavailable');
    expect(logged).toMatchObject({ level: 40, err: { type: 'UnavailableError' } });
    // pino's serializer keeps the cause: its stack follows the wrapper's.
    expect((logged!['err'] as { stack: string }).stack).toContain('caused by: Error: Connection is closed.');
  });
});
