import { describe, expect, it } from 'vitest';
import { jsonHeaders, send, startTestApi } from '../test-support/app.js';

describe('sessions and history', async () => {
  const api = await startTestApi({ TOKEN_LIMIT: '1000', SPAWN_INTERVAL_MS: '1', SPAWN_BURST: '100' });
  const get = (path: string, auth = true) => send(api.baseUrl, 'GET', path, { headers: auth ? jsonHeaders() : {} });

  it('GET session: 200 for the live session, 404 no_session otherwise', async () => {
    expect((await get('/v1/users/erin/session')).body.error.code).toBe('no_session');
    expect((await get('/v1/users/erin/session')).status).toBe(404);
    const admitted = await api.client.spawn((await api.client.issueToken({ userId: 'erin' })).token);
    const res = await get('/v1/users/erin/session');
    expect(res.status).toBe(200);
    expect(res.body).toEqual({
      sessionId: admitted.sessionId,
      userId: 'erin',
      fence: admitted.fence,
      state: 'pending',
      ready: false,
    });
  });

  it('a running session shows its worker, start, lease and deadline as ISO times', async () => {
    const admitted = await api.client.spawn(
      (await api.client.issueToken({ userId: 'frank', lifetimeMs: 60_000 })).token,
    );
    const claimed = await api.coordinator.claims.claim(admitted, {
      workerId: 'host-1',
      leaseMs: 10_000,
      graceMs: 1000,
    });
    if (!claimed.claimed) throw new Error('not claimed');
    const res = await get('/v1/users/frank/session');
    expect(res.body).toEqual({
      sessionId: admitted.sessionId,
      userId: 'frank',
      fence: admitted.fence,
      state: 'running',
      ready: false,
      workerId: 'host-1',
      startedAt: new Date(claimed.claim.startedAt).toISOString(),
      leaseExpiresAt: new Date(claimed.claim.leaseExpiresAt).toISOString(),
      deadline: new Date(claimed.claim.deadline).toISOString(),
    });
    // The host marks it ready when the session says so; the endpoint shows with it.
    expect(await api.coordinator.claims.markReady(claimed.claim, 'http://10.0.0.7:8888')).toBe(true);
    expect((await get('/v1/users/frank/session')).body).toMatchObject({
      ready: true,
      endpoint: 'http://10.0.0.7:8888',
    });
    expect(await api.coordinator.claims.finish(claimed.claim, 'completed', 0)).toBe(true);
    const history = await get('/v1/users/frank/history');
    expect(history.status).toBe(200);
    expect(history.body.sessions[0]).toEqual({
      sessionId: admitted.sessionId,
      fence: admitted.fence,
      state: 'completed',
      workerId: 'host-1',
      startedAt: new Date(claimed.claim.startedAt).toISOString(),
      endedAt: expect.any(String),
      exitCode: 0,
    });
  });

  it('DELETE: a pending session ends at once as stopped; a running one goes to stopping; 404 when none', async () => {
    const pending = await api.client.spawn((await api.client.issueToken({ userId: 'gina' })).token);
    const del = await send(api.baseUrl, 'DELETE', '/v1/users/gina/session', {
      headers: { authorization: jsonHeaders().authorization! },
    });
    expect(del.status).toBe(202);
    expect(del.body).toEqual({ sessionId: pending.sessionId, userId: 'gina', state: 'stopped' });
    expect((await api.client.history('gina'))[0]).toMatchObject({ sessionId: pending.sessionId, state: 'stopped' });
    const admitted = await api.client.spawn((await api.client.issueToken({ userId: 'gina' })).token);
    await api.coordinator.claims.claim(admitted, { workerId: 'host-1', leaseMs: 10_000, graceMs: 1000 });
    expect(await api.client.stopSession('gina')).toEqual({
      sessionId: admitted.sessionId,
      userId: 'gina',
      state: 'stopping',
    });
    expect((await api.client.getSession('gina')).state).toBe('stopping');
    expect(
      (
        await send(api.baseUrl, 'DELETE', '/v1/users/nobody/session', {
          headers: { authorization: jsonHeaders().authorization! },
        })
      ).status,
    ).toBe(404);
  });

  it('history is newest first and keeps at least the last 20', async () => {
    for (let i = 0; i < 22; i++) {
      await api.client.spawn((await api.client.issueToken({ userId: 'hank' })).token);
      await api.client.stopSession('hank');
    }
    const sessions = await api.client.history('hank');
    expect(sessions.length).toBeGreaterThanOrEqual(20);
    const fences = sessions.map((s) => s.fence);
    expect(fences).toEqual([...fences].sort((a, b) => b - a));
  });

  it('401 without a key on every user route; 400 for a bad user id in the path', async () => {
    for (const [method, path] of [
      ['GET', '/v1/users/erin/session'],
      ['DELETE', '/v1/users/erin/session'],
      ['GET', '/v1/users/erin/history'],
    ] as const) {
      expect((await send(api.baseUrl, method, path)).status).toBe(401);
    }
    const bad = await get('/v1/users/' + encodeURIComponent('bad user') + '/session');
    expect(bad.status).toBe(400);
    expect(bad.body.error.message).toContain('userId');
  });
});
