import { describe, expect, it } from 'vitest';
import { TEST_API_KEY, claimAs, send, startTestApi } from '../test-support/app.js';

const queuesHeaders = (res: { headers: Headers }) => ({
  frame: res.headers.get('x-frame-options'),
  sniff: res.headers.get('x-content-type-options'),
});
const basic = (password: string, user = 'operator') => ({
  authorization: `Basic ${Buffer.from(`${user}:${password}`).toString('base64')}`,
});

describe('dashboard', async () => {
  const api = await startTestApi({ TOKEN_LIMIT: '1000', SPAWN_INTERVAL_MS: '1', SPAWN_BURST: '100' });

  const protectedPaths = [
    '/dashboard',
    '/dashboard/',
    '/dashboard/app.js',
    '/dashboard/app.css',
    '/dashboard/api/state',
    '/dashboard/queues',
    '/dashboard/queues/api/queues',
  ];

  it.each(protectedPaths)(
    '401 with WWW-Authenticate for %s without credentials, with a wrong key, or with a bearer key',
    async (path) => {
      for (const headers of [
        {},
        basic('not-a-service-key-000000'),
        basic(''),
        { authorization: `Bearer ${TEST_API_KEY}` },
        { authorization: 'Basic !!!' },
      ]) {
        const res = await send(api.baseUrl, 'GET', path, { headers });
        expect(res.status, `${path} ${JSON.stringify(headers)}`).toBe(401);
        expect(res.headers.get('www-authenticate')).toMatch(/^Basic realm="worker-coordinator dashboard"/);
      }
    },
  );

  it('serves the page, its assets and bull-board with any user name and a service key as password', async () => {
    const page = await send(api.baseUrl, 'GET', '/dashboard', { headers: basic(TEST_API_KEY, 'anyone') });
    expect(page.status).toBe(200);
    expect(page.headers.get('content-type')).toMatch(/text\/html/);
    expect(page.headers.get('content-security-policy')).toContain("script-src 'self'");
    expect(page.headers.get('x-frame-options')).toBe('DENY');
    expect(page.headers.get('x-content-type-options')).toBe('nosniff');
    expect(page.headers.get('strict-transport-security')).toMatch(/max-age=/);
    expect(
      queuesHeaders(await send(api.baseUrl, 'GET', '/dashboard/queues', { headers: basic(TEST_API_KEY) })),
    ).toEqual({ frame: 'DENY', sniff: 'nosniff' });
    expect(page.body).toContain('Live sessions');
    expect((await send(api.baseUrl, 'GET', '/dashboard/app.js', { headers: basic(TEST_API_KEY) })).status).toBe(200);
    const queues = await send(api.baseUrl, 'GET', '/dashboard/queues', { headers: basic(TEST_API_KEY) });
    expect(queues.status).toBe(200);
    const list = await send(api.baseUrl, 'GET', '/dashboard/queues/api/queues', { headers: basic(TEST_API_KEY) });
    expect(list.status).toBe(200);
    expect(list.body.queues.map((q: { name: string }) => q.name)).toEqual(['spawn']);
    expect(list.body.queues[0].readOnlyMode).toBe(true);
  });

  it("bull-board's own assets need the credentials too", async () => {
    const html = (await send(api.baseUrl, 'GET', '/dashboard/queues', { headers: basic(TEST_API_KEY) })).body as string;
    const assets = [...html.matchAll(/(?:src|href)="([^"]+\.(?:js|css|ico|svg|png))"/g)].map((m) => m[1]!);
    expect(assets.length).toBeGreaterThan(1);
    for (const asset of assets) {
      const path = asset.startsWith('/') ? asset : `/dashboard/queues/${asset}`;
      expect((await send(api.baseUrl, 'GET', path, { headers: basic(TEST_API_KEY) })).status, path).toBe(200);
      const refused = await send(api.baseUrl, 'GET', path);
      expect(refused.status, path).toBe(401);
    }
  });

  it('queue actions are refused in read-only mode', async () => {
    const retry = await send(api.baseUrl, 'PUT', '/dashboard/queues/api/queues/spawn/retry/failed', {
      headers: basic(TEST_API_KEY),
    });
    expect(retry.status).toBe(405);
    expect(retry.body).toEqual({ error: { key: 'ERRORS.QUEUE_READ_ONLY' } });
    const clean = await send(api.baseUrl, 'PUT', '/dashboard/queues/api/queues/spawn/clean/completed', {
      headers: basic(TEST_API_KEY),
    });
    expect(clean.status).toBe(405);
  });

  it('the state lists live sessions (filtered, paged), worker hosts, recent endings and the chart', async () => {
    for (const userId of ['dash-alice', 'dash-bob', 'dash-carol'])
      await api.client.spawn((await api.client.issueToken({ userId })).token);
    const admitted = await api.client.spawn((await api.client.issueToken({ userId: 'dash-dave' })).token);
    await claimAs(api, admitted, 'dash-host');
    await api.coordinator.workers.heartbeat(
      { workerId: 'dash-host', slots: 4, busy: 1, startedAt: Date.now(), containment: 'namespace' },
      10_000,
    );
    await api.client.stopSession('dash-carol');
    await api.app.stats.flush();

    const state = await send(api.baseUrl, 'GET', '/dashboard/api/state?limit=2', { headers: basic(TEST_API_KEY) });
    expect(state.status).toBe(200);
    expect(state.body.live.total).toBe(3);
    expect(state.body.live.rows.map((r: { userId: string }) => r.userId)).toEqual(['dash-alice', 'dash-bob']);
    const dave = await send(api.baseUrl, 'GET', '/dashboard/api/state?filter=dave', { headers: basic(TEST_API_KEY) });
    expect(dave.body.live.rows).toEqual([
      expect.objectContaining({
        userId: 'dash-dave',
        state: 'running',
        fence: admitted.fence,
        workerId: 'dash-host',
        leaseLeftMs: expect.any(Number),
        lifetimeLeftMs: expect.any(Number),
      }),
    ]);
    expect(dave.body.live.rows[0].leaseLeftMs).toBeGreaterThan(5000);
    expect(state.body.workers).toEqual([
      expect.objectContaining({ workerId: 'dash-host', slots: 4, busy: 1, containment: 'namespace' }),
    ]);
    expect(state.body.ended).toEqual([expect.objectContaining({ userId: 'dash-carol', state: 'stopped' })]);
    const total = state.body.chart.reduce((n: number, m: { admitted: number }) => n + m.admitted, 0);
    expect(total).toBe(4);
    expect(state.body.chart).toHaveLength(15);
    const bad = await send(api.baseUrl, 'GET', '/dashboard/api/state?limit=0', { headers: basic(TEST_API_KEY) });
    expect(bad.status).toBe(400);
  });

  it('a recent ending carries its reason: failed (out_of_memory) for a session its memory cap killed', async () => {
    const admitted = await api.client.spawn((await api.client.issueToken({ userId: 'dash-oom' })).token);
    const claim = await claimAs(api, admitted, 'dash-host');
    await api.coordinator.claims.finish(claim, 'failed', 137, 'out_of_memory');
    // The index read is shared for a second: wait for one that has the ending, without sleeping blindly.
    await expect
      .poll(
        async () =>
          (await send(api.baseUrl, 'GET', '/dashboard/api/state?filter=dash-oom', { headers: basic(TEST_API_KEY) }))
            .body.ended,
        { timeout: 5000 },
      )
      .toEqual([
        expect.objectContaining({ userId: 'dash-oom', state: 'failed', reason: 'out_of_memory', exitCode: 137 }),
      ]);
  });
});

describe('dashboard with a thousand live sessions', async () => {
  const api = await startTestApi({ TOKEN_LIMIT: '1000', SPAWN_INTERVAL_MS: '1', SPAWN_BURST: '100' });

  it('pages and filters them', async () => {
    const users = Array.from({ length: 1000 }, (_, i) => `many-${String(i).padStart(4, '0')}`);
    for (let i = 0; i < users.length; i += 100) {
      await Promise.all(
        users.slice(i, i + 100).map(async (userId) => {
          const issued = await api.coordinator.tokens.issue(userId);
          if (issued.outcome !== 'issued') throw new Error('throttled');
          await api.coordinator.sessions.admit(issued.token);
        }),
      );
    }
    const page = await send(api.baseUrl, 'GET', '/dashboard/api/state?offset=950', { headers: basic(TEST_API_KEY) });
    expect(page.status).toBe(200);
    expect(page.body.live.total).toBe(1000);
    expect(page.body.live.rows).toHaveLength(50);
    expect(page.body.live.rows[0].userId).toBe('many-0950');
    const one = await send(api.baseUrl, 'GET', '/dashboard/api/state?filter=many-0123', {
      headers: basic(TEST_API_KEY),
    });
    expect(one.body.live.rows.map((r: { userId: string }) => r.userId)).toEqual(['many-0123']);
  });
});
