import { cleanUp, watchClient } from '@cq/test-harness';
import type { Redis } from 'ioredis';
import { describe, expect, inject, it } from 'vitest';
import { claimAs, jsonHeaders, send, startTestApi } from '../test-support/app.js';

describe('labels, the session list, a session by id and bulk stop over HTTP', async () => {
  const api = await startTestApi({ TOKEN_LIMIT: '1000', SPAWN_INTERVAL_MS: '1', SPAWN_BURST: '100' });
  const get = (path: string) => send(api.baseUrl, 'GET', path, { headers: jsonHeaders() });
  const post = (path: string, body: unknown) =>
    send(api.baseUrl, 'POST', path, { headers: jsonHeaders(), body: JSON.stringify(body) });
  const patch = (userId: string, body: unknown) =>
    send(api.baseUrl, 'PATCH', `/v1/users/${userId}/session`, { headers: jsonHeaders(), body: JSON.stringify(body) });
  const spawn = async (userId: string, extra: Record<string, unknown> = {}) => {
    const issued = await post('/v1/tokens', { userId, ...extra });
    expect(issued.status, JSON.stringify(issued.body)).toBe(201);
    const admitted = await post('/v1/spawn', { token: issued.body.token });
    expect(admitted.status).toBe(202);
    return admitted.body as { sessionId: string; userId: string; fence: number };
  };
  const watch = await watchClient(api.app.redis as Redis, inject('redisUrl'));
  cleanUp(() => watch.stop());

  it('labels and pool go from the token to GET, history and the events; PATCH merges them, null removes', async () => {
    const admitted = await spawn('lab-http', { labels: { job: 'nightly', 'team/owner': 'ann' }, pool: 'gpu-a' });
    expect((await get('/v1/users/lab-http/session')).body).toMatchObject({
      sessionId: admitted.sessionId,
      pool: 'gpu-a',
      labels: { job: 'nightly', 'team/owner': 'ann' },
    });
    const changed = await patch('lab-http', { labels: { job: null, stage: 'two' } });
    expect(changed.status).toBe(200);
    expect(changed.body.labels).toEqual({ 'team/owner': 'ann', stage: 'two' });
    const claim = await claimAs(api, admitted, 'host-1', 'gpu-a');
    expect(claim.labels).toEqual({ 'team/owner': 'ann', stage: 'two' });
    await api.coordinator.claims.finish(claim, 'completed', 0);
    expect((await get('/v1/users/lab-http/history')).body.sessions[0]).toMatchObject({
      sessionId: admitted.sessionId,
      pool: 'gpu-a',
      labels: { 'team/owner': 'ann', stage: 'two' },
    });
    expect((await get(`/v1/sessions/${admitted.sessionId}`)).body).toMatchObject({
      sessionId: admitted.sessionId,
      userId: 'lab-http',
      state: 'completed',
      labels: { 'team/owner': 'ann', stage: 'two' },
    });
  });

  it.each([
    [{ labels: { 'bad key': 'x' } }, /label key "bad key"/],
    [{ labels: { k: 'x'.repeat(129) } }, /label k has a value of 129 characters/],
    [{ labels: { k: 'line\nbreak' } }, /label k has a control character/],
    [{ labels: Object.fromEntries(Array.from({ length: 17 }, (_, i) => [`k${i}`, 'v'])) }, /17 labels; at most 16/],
    [{ labels: { k: 1 } }, /labels/],
    [{ pool: 'GPU' }, /pool/],
  ])('POST /v1/tokens with %j is 400 naming the label, and issues nothing', async (extra, why) => {
    await watch.settle();
    const before = watch.seen.length;
    const res = await post('/v1/tokens', { userId: 'lab-bad', ...extra });
    expect(res.status).toBe(400);
    expect(res.body.error.code).toBe('invalid_request');
    expect(res.body.error.message).toMatch(why);
    await watch.settle();
    expect(watch.seen.slice(before).filter((s) => s.args.some((a) => a.includes('lab-bad')))).toEqual([]);
  });

  it('PATCH labels: 400 naming the count when the merge would pass 16, and nothing changes; 404 without a session', async () => {
    await spawn('lab-many', { labels: Object.fromEntries(Array.from({ length: 15 }, (_, i) => [`k${i}`, 'v'])) });
    const res = await patch('lab-many', { labels: { a: '1', b: '2' } });
    expect(res.status).toBe(400);
    expect(res.body.error.message).toMatch(/would have 17 labels/);
    expect(Object.keys((await get('/v1/users/lab-many/session')).body.labels)).toHaveLength(15);
    expect((await patch('lab-nobody', { labels: { a: '1' } })).status).toBe(404);
    expect((await patch('lab-many', {})).status).toBe(400);
  });

  it('GET /v1/sessions walks every live session once with its cursor, and filters by state, pool, workerId, userId and label', async () => {
    for (let i = 0; i < 9; i++)
      await spawn(`walk-http-${i}`, { labels: { batch: i % 3 === 0 ? 'a' : 'b' }, pool: 'walkers' });
    const running = await spawn('walk-http-run', { pool: 'walkers' });
    await claimAs(api, running, 'host-w', 'walkers');
    const seen: string[] = [];
    let cursor: string | undefined;
    let pages = 0;
    do {
      const res = await get(`/v1/sessions?pool=walkers&limit=4${cursor === undefined ? '' : `&cursor=${cursor}`}`);
      expect(res.status).toBe(200);
      expect(res.body.sessions.length).toBeLessThanOrEqual(4);
      seen.push(...res.body.sessions.map((s: { userId: string }) => s.userId));
      cursor = res.body.next;
      pages++;
    } while (cursor !== undefined);
    expect(pages).toBeGreaterThanOrEqual(3);
    expect(seen.sort()).toEqual([...Array.from({ length: 9 }, (_, i) => `walk-http-${i}`), 'walk-http-run'].sort());
    const labelled = await get('/v1/sessions?pool=walkers&label=batch%3Da&limit=100');
    expect(labelled.body.sessions.map((s: { userId: string }) => s.userId).sort()).toEqual([
      'walk-http-0',
      'walk-http-3',
      'walk-http-6',
    ]);
    expect((await get('/v1/sessions?workerId=host-w')).body.sessions.map((s: { userId: string }) => s.userId)).toEqual([
      'walk-http-run',
    ]);
    expect((await get('/v1/sessions?state=running&pool=walkers')).body.sessions).toHaveLength(1);
    expect((await get('/v1/sessions?userId=walk-http-4')).body.sessions).toEqual([
      expect.objectContaining({ userId: 'walk-http-4', state: 'pending', labels: { batch: 'b' } }),
    ]);
  });

  it('a bad filter, limit or cursor is 400 naming it, and a cursor of other filters, edited or made up is refused', async () => {
    for (const [query, name] of [
      ['state=ended', 'state'],
      ['limit=0', 'limit'],
      ['limit=501', 'limit'],
      ['label=novalue', 'label'],
      ['label=bad%20key%3Dv', 'label'],
      ['pool=UPPER', 'pool'],
      ['colour=red', 'colour'],
    ] as const) {
      const res = await get(`/v1/sessions?${query}`);
      expect(res.status, query).toBe(400);
      expect(res.body.error.message, query).toContain(name);
    }
    for (let i = 0; i < 3; i++) await spawn(`cursor-${i}`, { pool: 'cursors' });
    const first = await get('/v1/sessions?pool=cursors&limit=1');
    const cursor = first.body.next as string;
    expect(cursor).toBeDefined();
    expect((await get(`/v1/sessions?pool=cursors&limit=1&cursor=${cursor}`)).status).toBe(200);
    for (const bad of [
      'nonsense',
      cursor.replace(/^\d+/, '1'),
      `${cursor.slice(0, -1)}${cursor.endsWith('A') ? 'B' : 'A'}`,
    ]) {
      const res = await get(`/v1/sessions?pool=cursors&limit=1&cursor=${encodeURIComponent(bad)}`);
      expect(res.status, bad).toBe(400);
      expect(res.body.error.message).toMatch(/cursor/);
    }
    const otherFilter = await get(`/v1/sessions?pool=other&limit=1&cursor=${cursor}`);
    expect(otherFilter.status).toBe(400);
    expect(otherFilter.body.error.message).toMatch(/other filters/);
  });

  it('GET /v1/sessions/{sessionId}: live, then ended from its history; 404 for an id no session has', async () => {
    const admitted = await spawn('by-id');
    expect((await get(`/v1/sessions/${admitted.sessionId}`)).body).toMatchObject({
      sessionId: admitted.sessionId,
      userId: 'by-id',
      state: 'pending',
    });
    await send(api.baseUrl, 'DELETE', '/v1/users/by-id/session', { headers: jsonHeaders() });
    expect((await get(`/v1/sessions/${admitted.sessionId}`)).body).toMatchObject({
      sessionId: admitted.sessionId,
      userId: 'by-id',
      state: 'stopped',
    });
    const unknown = await get('/v1/sessions/00000000-0000-4000-8000-000000000000');
    expect(unknown.status).toBe(404);
    expect(unknown.body.error.code).toBe('no_session');
  });

  it('POST /v1/sessions/stop stops what the filter matches, as DELETE does; no filter is 400 and stops nothing', async () => {
    for (let i = 0; i < 4; i++) await spawn(`bulk-http-${i}`, { labels: { sweep: 'yes' } });
    await spawn('bulk-http-keep', { labels: { sweep: 'no' } });
    const none = await post('/v1/sessions/stop', {});
    expect(none.status).toBe(400);
    expect(none.body.error.message).toMatch(/at least one filter/);
    expect((await post('/v1/sessions/stop', { labels: { sweep: 'yes' } })).body).toEqual({
      matched: 4,
      stopping: 4,
      more: false,
    });
    for (let i = 0; i < 4; i++) expect((await get(`/v1/users/bulk-http-${i}/session`)).status).toBe(404);
    expect((await get('/v1/users/bulk-http-keep/session')).status).toBe(200);
  });
});
