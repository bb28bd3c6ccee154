import { randomUUID } from 'node:crypto';
import { cleanUp, startRedisServer } from '@cq/test-harness';
import { Redis } from 'ioredis';
import { describe, expect, it, onTestFinished } from 'vitest';
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
    '/dashboard/api/output?userId=u&sessionId=s',
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

  it('every HTML page under /dashboard has a Content-Security-Policy and loads nothing from another host', async () => {
    for (const path of ['/dashboard', '/dashboard/', '/dashboard/queues', '/dashboard/queues/queue/spawn']) {
      const page = await send(api.baseUrl, 'GET', path, { headers: basic(TEST_API_KEY) });
      expect(page.status, path).toBe(200);
      expect(page.headers.get('content-type'), path).toMatch(/^text\/html/);
      const csp = page.headers.get('content-security-policy') ?? '';
      expect(csp, path).toContain("default-src 'self'");
      expect(csp, path).toContain("script-src 'self'");
      expect(csp, path).not.toMatch(/https?:|\*|unsafe-eval/);
      expect(csp, path).toContain("frame-ancestors 'none'");
      const html = String(page.body);
      // No element loads from a URL with a host (bull-board's page linked fonts from fonts.googleapis.com).
      expect(html, path).not.toMatch(/(?:src|href)=["']?(?:https?:)?\/\//i);
      expect(html, path).not.toContain('googleapis');
    }
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

  it("queue actions are refused in read-only mode (sent as the page would: its origin, its anti-forgery token); without the page's token, before that", async () => {
    const me = await send(api.baseUrl, 'GET', '/dashboard/api/me', { headers: basic(TEST_API_KEY) });
    const page = {
      ...basic(TEST_API_KEY),
      host: new URL(api.baseUrl).host,
      origin: api.baseUrl,
      'x-xsrf-token': me.body.antiForgeryToken,
    };
    const retry = await send(api.baseUrl, 'PUT', '/dashboard/queues/api/queues/spawn/retry/failed', { headers: page });
    expect(retry.status).toBe(405);
    expect(retry.body).toEqual({ error: { key: 'ERRORS.QUEUE_READ_ONLY' } });
    const clean = await send(api.baseUrl, 'PUT', '/dashboard/queues/api/queues/spawn/clean/completed', {
      headers: page,
    });
    expect(clean.status).toBe(405);
    const forged = await send(api.baseUrl, 'PUT', '/dashboard/queues/api/queues/spawn/clean/completed', {
      headers: basic(TEST_API_KEY),
    });
    expect(forged.status).toBe(403);
    expect(forged.body.error.code).toBe('forbidden');
  });

  it('the state lists live sessions (filtered, paged through the session list), worker hosts, recent endings and the chart', async () => {
    for (const userId of ['dash-alice', 'dash-bob', 'dash-carol'])
      await api.client.spawn((await api.client.issueToken({ userId })).token);
    const admitted = await api.client.spawn((await api.client.issueToken({ userId: 'dash-dave' })).token);
    await claimAs(api, admitted, 'dash-host');
    await api.coordinator.workers.heartbeat(
      {
        workerId: 'dash-host',
        slots: 4,
        busy: 1,
        startedAt: Date.now(),
        containment: 'namespace',
        isolation: { network: 'egress', filesystem: 'private', cpus: 1.5 },
      },
      10_000,
    );
    await api.client.stopSession('dash-carol');
    await api.app.stats.flush();

    // Pages of 2 through the list's walk, with its cursors: the three live sessions once each.
    const state = await send(api.baseUrl, 'GET', '/dashboard/api/state?limit=2', { headers: basic(TEST_API_KEY) });
    expect(state.status).toBe(200);
    expect(state.body.live.rows).toHaveLength(2);
    const rest = await send(api.baseUrl, 'GET', `/dashboard/api/state?limit=2&cursor=${state.body.live.next}`, {
      headers: basic(TEST_API_KEY),
    });
    expect([...state.body.live.rows, ...rest.body.live.rows].map((r: { userId: string }) => r.userId).sort()).toEqual([
      'dash-alice',
      'dash-bob',
      'dash-dave',
    ]);
    expect(rest.body.live.next).toBeUndefined();
    const dave = await send(api.baseUrl, 'GET', '/dashboard/api/state?userId=dash-dave', {
      headers: basic(TEST_API_KEY),
    });
    expect(dave.body.live.rows).toEqual([
      expect.objectContaining({
        userId: 'dash-dave',
        state: 'running',
        fence: admitted.fence,
        workerId: 'dash-host',
        pool: 'default',
        labels: {},
        leaseLeftMs: expect.any(Number),
        lifetimeLeftMs: expect.any(Number),
      }),
    ]);
    expect(dave.body.live.rows[0].leaseLeftMs).toBeGreaterThan(5000);
    expect(state.body.workers).toEqual([
      expect.objectContaining({
        workerId: 'dash-host',
        pool: 'default',
        slots: 4,
        busy: 1,
        containment: 'namespace',
        isolation: { network: 'egress', filesystem: 'private', cpus: 1.5 },
      }),
    ]);
    // Its pool, with its slots and the jobs waiting in its queue: no host took any here (dave was claimed
    // by hand, carol stopped while pending), so all four are still queued.
    expect(state.body.pools).toEqual([{ pool: 'default', hosts: 1, slots: 4, busy: 1, free: 4, pending: 4 }]);
    expect(state.body.ended).toEqual([expect.objectContaining({ userId: 'dash-carol', state: 'stopped' })]);
    const total = state.body.chart.reduce((n: number, m: { admitted: number }) => n + m.admitted, 0);
    expect(total).toBe(4);
    expect(state.body.chart).toHaveLength(15);
    const bad = await send(api.baseUrl, 'GET', '/dashboard/api/state?limit=0', { headers: basic(TEST_API_KEY) });
    expect(bad.status).toBe(400);
  });

  it("a session's output: the newest lines after `after`, with stream and time, through the logs route", async () => {
    const claim = await claimAs(
      api,
      await api.client.spawn((await api.client.issueToken({ userId: 'dash-out' })).token),
      'dash-host',
    );
    // 1,200 lines, more than one page of the logs route: the newest 100 come back, the rest counted.
    const keeping = { keepLines: 5000, keepForMs: 60_000, droppedBytes: 0 };
    const printed = Array.from({ length: 1200 }, (_, i) => ({
      stream: i % 2 === 0 ? ('stdout' as const) : ('stderr' as const),
      line: `line ${i}`,
    }));
    await api.coordinator.output.append('dash-out', claim.sessionId, printed, keeping);
    const output = (query: string) =>
      send(api.baseUrl, 'GET', `/dashboard/api/output?userId=dash-out&sessionId=${claim.sessionId}${query}`, {
        headers: basic(TEST_API_KEY),
      });
    const tail = await output('');
    expect(tail.status).toBe(200);
    expect(tail.body).toMatchObject({ skipped: 1100, droppedBytes: 0, more: false });
    expect(tail.body.lines.map((l: { stream: string; line: string }) => `${l.stream} ${l.line}`)).toEqual(
      printed.slice(-100).map((l) => `${l.stream} ${l.line}`),
    );
    for (const line of tail.body.lines) expect(new Date(line.at).toISOString()).toBe(line.at);
    expect(tail.body.next).toBe(tail.body.lines.at(-1).id);
    // Nothing new: nothing, and the same place to go on from.
    expect((await output(`&after=${tail.body.next}`)).body).toMatchObject({
      lines: [],
      skipped: 0,
      next: tail.body.next,
    });
    await api.coordinator.output.append('dash-out', claim.sessionId, [{ stream: 'stderr', line: 'late' }], keeping);
    const late = await output(`&after=${tail.body.next}`);
    expect(late.body.lines.map((l: { line: string }) => l.line)).toEqual(['late']);
  });

  it("a session's output answers the logs route's 404 when none is kept, and 400 for a bad ask", async () => {
    const admitted = await api.client.spawn((await api.client.issueToken({ userId: 'dash-output' })).token);
    const unknown = await send(
      api.baseUrl,
      'GET',
      `/dashboard/api/output?userId=dash-output&sessionId=${randomUUID()}`,
      { headers: basic(TEST_API_KEY) },
    );
    expect(unknown.status).toBe(404);
    expect(unknown.body).toEqual({ error: { code: 'no_session', message: expect.stringContaining('dash-output') } });
    const sid = admitted.sessionId;
    for (const query of [
      `userId=a/b&sessionId=${sid}`,
      'userId=a',
      `userId=a&sessionId=${sid}&tail=0`,
      `userId=a&sessionId=${sid}&x=1`,
      // A session id is a UUID: nothing else reaches the logs route (or Redis).
      `userId=dash-output&sessionId=${sid}x`,
      `userId=dash-output&sessionId=${sid}:rec`,
      `userId=dash-output&sessionId=${encodeURIComponent(`${sid}/rec`)}`,
      `userId=dash-output&sessionId=${encodeURIComponent('{x}')}`,
    ]) {
      const bad = await send(api.baseUrl, 'GET', `/dashboard/api/output?${query}`, { headers: basic(TEST_API_KEY) });
      expect(bad.status, query).toBe(400);
      expect(bad.body.error.code, query).toBe('invalid_request');
    }
  });

  it('a recent ending carries its reason: failed (out_of_memory) for a session its memory cap killed', async () => {
    const admitted = await api.client.spawn((await api.client.issueToken({ userId: 'dash-oom' })).token);
    const claim = await claimAs(api, admitted, 'dash-host');
    await api.coordinator.claims.finish(claim, 'failed', 137, 'out_of_memory');
    // The endings come from the process's ring of recent events: wait for the event, without sleeping blindly.
    await expect
      .poll(
        async () =>
          (await send(api.baseUrl, 'GET', '/dashboard/api/state?userId=dash-oom', { headers: basic(TEST_API_KEY) }))
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
    // Every page of 50 through the list's cursors: each of the thousand once.
    const seen: string[] = [];
    let cursor = '';
    do {
      const page = await send(api.baseUrl, 'GET', `/dashboard/api/state?cursor=${cursor}`, {
        headers: basic(TEST_API_KEY),
      });
      expect(page.status).toBe(200);
      expect(page.body.live.rows.length).toBeLessThanOrEqual(50);
      seen.push(...page.body.live.rows.map((r: { userId: string }) => r.userId));
      cursor = page.body.live.next ?? '';
    } while (cursor !== '');
    expect(seen.sort()).toEqual(users);
    const one = await send(api.baseUrl, 'GET', '/dashboard/api/state?userId=many-0123', {
      headers: basic(TEST_API_KEY),
    });
    expect(one.body.live.rows.map((r: { userId: string }) => r.userId)).toEqual(['many-0123']);
  });
});

/** One server-sent event of the dashboard's stream. */
interface Sent {
  id: string | undefined;
  type: string;
  data: { userId: string; type: string; fence: number };
}

/**
 * The dashboard's event stream, read with the page's credentials: `next()` gives the next event, or
 * undefined when none came within `waitMs` (the test then compares what came with what it expected).
 */
async function openEvents(baseUrl: string, headers: Record<string, string> = {}) {
  const controller = new AbortController();
  onTestFinished(() => controller.abort());
  const response = await fetch(`${baseUrl}/dashboard/api/events`, {
    headers: { ...basic(TEST_API_KEY), accept: 'text/event-stream', ...headers },
    signal: controller.signal,
  });
  expect(response.status).toBe(200);
  const reader = response.body!.pipeThrough(new TextDecoderStream()).getReader();
  let buffer = '';
  const parse = (block: string): Sent | undefined => {
    const fields = new Map<string, string>();
    for (const line of block.split('\n')) {
      const colon = line.indexOf(':');
      if (colon > 0) fields.set(line.slice(0, colon), line.slice(colon + 1).trimStart());
    }
    const data = fields.get('data');
    if (data === undefined) return undefined; // a comment (keep-alive)
    return { id: fields.get('id'), type: fields.get('event') ?? 'message', data: JSON.parse(data) as Sent['data'] };
  };
  const next = async (waitMs = 5000): Promise<Sent | undefined> => {
    const deadline = AbortSignal.timeout(waitMs);
    for (;;) {
      const end = buffer.indexOf('\n\n');
      if (end >= 0) {
        const block = buffer.slice(0, end);
        buffer = buffer.slice(end + 2);
        const sent = parse(block);
        if (sent !== undefined) return sent;
        continue;
      }
      const timedOut = new Promise<undefined>((resolve) =>
        deadline.addEventListener('abort', () => resolve(undefined), { once: true }),
      );
      const chunk = await Promise.race([reader.read(), timedOut]);
      if (chunk === undefined || chunk.done) return undefined;
      buffer += chunk.value;
    }
  };
  const take = async (count: number, waitMs?: number): Promise<Sent[]> => {
    const sent: Sent[] = [];
    while (sent.length < count) {
      const one = await next(waitMs);
      if (one === undefined) break;
      sent.push(one);
    }
    return sent;
  };
  return { next, take, close: () => controller.abort() };
}

/** Commands Redis has run, by name, from INFO commandstats. */
async function commandStats(redis: Redis): Promise<Record<string, number>> {
  const stats: Record<string, number> = {};
  for (const m of (await redis.info('commandstats')).matchAll(/cmdstat_([a-z|_-]+):calls=(\d+)/g))
    stats[m[1]!] = Number(m[2]);
  return stats;
}

/** What ran between two {@link commandStats}, by name (only those that ran). */
function ranBetween(before: Record<string, number>, after: Record<string, number>): Record<string, number> {
  return Object.fromEntries(
    Object.entries(after)
      .map(([name, calls]) => [name, calls - (before[name] ?? 0)] as const)
      .filter(([, calls]) => calls > 0),
  );
}

describe("the live events table's first rows", async () => {
  // A Redis of this file's own: INFO commandstats then counts this API's commands only.
  const server = await startRedisServer();
  cleanUp(() => server.stop());
  const api = await startTestApi(
    { TOKEN_LIMIT: '1000', SPAWN_INTERVAL_MS: '1', SPAWN_BURST: '100' },
    { redisUrl: server.url },
  );
  const redis = new Redis(server.url);
  cleanUp(() => redis.disconnect());

  it('a page opening gets the newest 50 events that happened before it, then the new ones; only the first opening reads Redis for them', async () => {
    const reference = await api.app.events.subscribe();
    onTestFinished(() => reference.close());
    // 15 sessions run and complete (3 events each), 3 are stopped while pending (2 each): 51 events.
    for (let i = 0; i < 15; i++) {
      const admitted = await api.client.spawn((await api.client.issueToken({ userId: `first-${i}` })).token);
      await api.coordinator.claims.finish(await claimAs(api, admitted, 'dash-host'), 'completed', 0);
    }
    for (let i = 0; i < 3; i++) {
      await api.client.spawn((await api.client.issueToken({ userId: `first-stopped-${i}` })).token);
      await api.client.stopSession(`first-stopped-${i}`);
    }
    const happened: string[] = [];
    for (let i = 0; i < 51; i++) happened.push((await reference.next())!.id);

    const before = await commandStats(redis);
    const first = await openEvents(api.baseUrl);
    const shown = await first.take(50);
    const firstOpening = ranBetween(before, await commandStats(redis));
    expect(shown.map((e) => e.id)).toEqual(happened.slice(-50));
    expect(shown.at(-1)).toMatchObject({ type: 'stopped', data: { userId: 'first-stopped-2', type: 'stopped' } });
    // Then what happens next, once.
    await api.client.spawn((await api.client.issueToken({ userId: 'first-after' })).token);
    const after = await first.next();
    expect(after).toMatchObject({ type: 'pending', data: { userId: 'first-after' } });
    happened.push((await reference.next())!.id);
    expect(after!.id).toBe(happened.at(-1));

    // Later openings: the same newest 50 from memory, no stream read at all.
    const again = await commandStats(redis);
    const second = await openEvents(api.baseUrl);
    expect((await second.take(50)).map((e) => e.id)).toEqual(happened.slice(-50));
    const secondOpening = ranBetween(again, await commandStats(redis));
    // A page reconnecting with its last id gets only what came after it.
    const resumed = await openEvents(api.baseUrl, { 'last-event-id': happened.at(-4)! });
    expect((await resumed.take(3)).map((e) => e.id)).toEqual(happened.slice(-3));
    expect(await resumed.next(300)).toBeUndefined();

    // For comparison: what a replay from an old position costs (GET /v1/events with an old Last-Event-ID).
    const replayBefore = await commandStats(redis);
    const replay = api.client.events({ lastEventId: happened[0]! });
    for (let i = 0; i < 51; i++) await replay.next();
    await replay.return(undefined);
    const replayed = ranBetween(replayBefore, await commandStats(redis));

    // And what the page's other read, its state (tables, chart), costs.
    const stateBefore = await commandStats(redis);
    expect((await send(api.baseUrl, 'GET', '/dashboard/api/state', { headers: basic(TEST_API_KEY) })).status).toBe(200);
    const state = ranBetween(stateBefore, await commandStats(redis));

    console.info(
      `Redis commands for the events table: first opening ${JSON.stringify(firstOpening)}; ` +
        `later openings ${JSON.stringify(secondOpening)}; a replay from an old id ${JSON.stringify(replayed)}; ` +
        `for comparison, one state read ${JSON.stringify(state)}`,
    );
    expect(firstOpening['xrevrange']).toBeGreaterThanOrEqual(16_384);
    expect(firstOpening['xrevrange']).toBeLessThanOrEqual(16_384 + 50);
    expect(firstOpening['xrange'] ?? 0).toBe(0);
    expect(secondOpening['xrevrange'] ?? 0).toBe(0);
    expect(secondOpening['xrange'] ?? 0).toBe(0);
    expect(replayed['xrange']).toBeGreaterThanOrEqual(16_384);
    first.close();
    second.close();
    resumed.close();
  });
});

describe("a session's output while Redis is down", async () => {
  const server = await startRedisServer();
  cleanUp(() => server.stop());
  const api = await startTestApi(
    { TOKEN_LIMIT: '1000', SPAWN_INTERVAL_MS: '1', SPAWN_BURST: '100' },
    { redisUrl: server.url },
  );

  it("answers the logs route's 503 with its message (the page shows it in the panel's banner), and answers again once Redis is back", async () => {
    const claim = await claimAs(api, await api.client.spawn((await api.client.issueToken({ userId: 'down' })).token));
    await api.coordinator.output.append('down', claim.sessionId, [{ stream: 'stdout', line: 'up' }], {
      keepLines: 100,
      keepForMs: 60_000,
      droppedBytes: 0,
    });
    const output = () =>
      send(api.baseUrl, 'GET', `/dashboard/api/output?userId=down&sessionId=${claim.sessionId}`, {
        headers: basic(TEST_API_KEY),
      });
    await server.halt('SIGKILL');
    const down = await output();
    expect(down.status).toBe(503);
    expect(down.body).toEqual({ error: { code: 'unavailable', message: expect.stringMatching(/Redis/) } });
    await server.resume();
    // Back, and answering from Redis again: the killed server came back empty, so nothing is kept.
    await expect.poll(async () => (await output()).status, { timeout: 10_000 }).toBe(404);
    expect((await output()).body.error.code).toBe('no_session');
  });
});
