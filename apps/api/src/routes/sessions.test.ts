import { SessionMismatchError } from '@cq/client';
import { until } from '@cq/test-harness';
import { describe, expect, it } from 'vitest';
import { claimAs, jsonHeaders, send, startTestApi } from '../test-support/app.js';
import { inlineRefs } from '../test-support/openapi.js';

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
      pool: 'default',
      labels: {},
      ready: false,
    });
  });

  it('a running session shows its worker, start, lease and deadline as ISO times', async () => {
    const admitted = await api.client.spawn(
      (await api.client.issueToken({ userId: 'frank', lifetimeMs: 60_000 })).token,
    );
    const claim = await claimAs(api, admitted);
    const res = await get('/v1/users/frank/session');
    expect(res.body).toEqual({
      sessionId: admitted.sessionId,
      userId: 'frank',
      fence: admitted.fence,
      state: 'running',
      pool: 'default',
      labels: {},
      ready: false,
      workerId: 'host-1',
      startedAt: new Date(claim.startedAt).toISOString(),
      leaseExpiresAt: new Date(claim.leaseExpiresAt).toISOString(),
      deadline: new Date(claim.deadline).toISOString(),
      // Its idle clock starts when it runs (it has no idle timeout: IDLE_TIMEOUT_MS is 0 here).
      lastActivityAt: new Date(claim.startedAt).toISOString(),
    });
    // The host marks it ready when the session says so; the endpoint shows with it.
    expect(await api.coordinator.claims.markReady(claim, 'http://10.0.0.7:8888')).toBe(true);
    expect((await get('/v1/users/frank/session')).body).toMatchObject({
      ready: true,
      endpoint: 'http://10.0.0.7:8888',
    });
    expect(await api.coordinator.claims.finish(claim, 'completed', 0)).toBe(true);
    const history = await get('/v1/users/frank/history');
    expect(history.status).toBe(200);
    expect(history.body.sessions[0]).toEqual({
      sessionId: admitted.sessionId,
      fence: admitted.fence,
      state: 'completed',
      workerId: 'host-1',
      startedAt: new Date(claim.startedAt).toISOString(),
      endedAt: expect.any(String),
      exitCode: 0,
      pool: 'default',
      labels: {},
    });
  });

  it('history: a session its memory cap killed is failed with reason out_of_memory (and OpenAPI lists the reason)', async () => {
    const admitted = await api.client.spawn((await api.client.issueToken({ userId: 'oona' })).token);
    const claim = await claimAs(api, admitted);
    expect(await api.coordinator.claims.finish(claim, 'failed', 137, 'out_of_memory')).toBe(true);
    const history = await get('/v1/users/oona/history');
    expect(history.status).toBe(200);
    expect(history.body.sessions[0]).toEqual({
      sessionId: admitted.sessionId,
      fence: admitted.fence,
      state: 'failed',
      reason: 'out_of_memory',
      workerId: 'host-1',
      startedAt: new Date(claim.startedAt).toISOString(),
      endedAt: expect.any(String),
      exitCode: 137,
      pool: 'default',
      labels: {},
    });
    expect((await api.client.history('oona'))[0]).toMatchObject({ state: 'failed', reason: 'out_of_memory' });
    const doc = inlineRefs((await get('/openapi.json')).body);
    const entry =
      doc.paths['/v1/users/{userId}/history'].get.responses['200'].content['application/json'].schema.properties
        .sessions.items;
    expect(entry.properties.reason.enum).toEqual(['host_lost', 'not_claimed', 'state_lost', 'out_of_memory', 'idle']);
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

describe('PATCH session: changing its lifetime', async () => {
  const api = await startTestApi({
    TOKEN_LIMIT: '1000',
    SPAWN_INTERVAL_MS: '1',
    SPAWN_BURST: '100',
    MAX_LIFETIME_MS: '60000',
  });
  const patch = (userId: string, body: string, auth = true) =>
    send(api.baseUrl, 'PATCH', `/v1/users/${userId}/session`, { body, headers: jsonHeaders(auth) });
  const running = async (userId: string, lifetimeMs: number) => {
    const admitted = await api.client.spawn((await api.client.issueToken({ userId, lifetimeMs })).token);
    const claim = await claimAs(api, admitted);
    return claim;
  };

  it('200: a running session ends at now + lifetimeMs, shown like GET session with its new deadline', async () => {
    const claim = await running('lena', 5000);
    const sentAt = Date.now();
    const res = await patch('lena', '{"lifetimeMs": 30000}');
    expect(res.status).toBe(200);
    expect(res.body).toEqual(
      (await send(api.baseUrl, 'GET', '/v1/users/lena/session', { headers: jsonHeaders() })).body,
    );
    expect(res.body).toMatchObject({
      sessionId: claim.sessionId,
      userId: 'lena',
      state: 'running',
      workerId: 'host-1',
    });
    const deadline = Date.parse(res.body.deadline);
    // Redis's clock and ours are the same machine's here; allow for the round trip.
    expect(deadline - sentAt).toBeGreaterThanOrEqual(30_000 - 50);
    expect(deadline - sentAt).toBeLessThanOrEqual(30_000 + 1000);
    // Shorter works too.
    const shorter = await patch('lena', '{"lifetimeMs": 1000}');
    expect(shorter.status).toBe(200);
    expect(Date.parse(shorter.body.deadline)).toBeLessThan(deadline - 25_000);
    expect(await api.coordinator.claims.renew(claim)).toMatchObject({
      ok: true,
      deadline: Date.parse(shorter.body.deadline),
    });
  });

  it('400 lifetime_too_long beyond its start + MAX_LIFETIME_MS, naming the largest lifetimeMs allowed; nothing changes', async () => {
    const claim = await running('max', 5000);
    const res = await patch('max', '{"lifetimeMs": 60001}');
    expect(res.status).toBe(400);
    expect(res.body.error.code).toBe('lifetime_too_long');
    const largest = res.body.error.largestLifetimeMs as number;
    expect(largest).toBeLessThanOrEqual(60_000);
    expect(largest).toBeGreaterThan(59_000);
    expect(res.body.error.message).toContain(`at most ${largest}`);
    expect((await api.client.getSession('max')).deadline).toBe(new Date(claim.deadline).toISOString());
  });

  it('a pending session gets the lifetime it will have once started, at most MAX_LIFETIME_MS', async () => {
    const admitted = await api.client.spawn((await api.client.issueToken({ userId: 'pia' })).token);
    const tooLong = await patch('pia', '{"lifetimeMs": 60001}');
    expect(tooLong.status).toBe(400);
    expect(tooLong.body.error).toMatchObject({ code: 'lifetime_too_long', largestLifetimeMs: 60_000 });
    expect(tooLong.body.error.message).toContain('at most 60000');
    const res = await patch('pia', '{"lifetimeMs": 4321}');
    expect(res.status).toBe(200);
    expect(res.body).toEqual({
      sessionId: admitted.sessionId,
      userId: 'pia',
      fence: admitted.fence,
      state: 'pending',
      pool: 'default',
      labels: {},
      ready: false,
    });
    const claim = await claimAs(api, admitted);
    expect(claim.deadline - claim.startedAt).toBe(4321);
  });

  it('404 no_session without a live session; 409 session_stopping while a stop is under way', async () => {
    const none = await patch('nobody', '{"lifetimeMs": 1000}');
    expect(none.status).toBe(404);
    expect(none.body.error.code).toBe('no_session');
    const claim = await running('quitter', 5000);
    await api.client.stopSession('quitter');
    const stopping = await patch('quitter', '{"lifetimeMs": 1000}');
    expect(stopping.status).toBe(409);
    expect(stopping.body.error).toMatchObject({ code: 'session_stopping', sessionId: claim.sessionId });
  });

  it('400 for a bad body, naming the field; 401 without a key', async () => {
    await running('body', 5000);
    const unknown = await patch('body', '{"lifetimeMs": 1000, "deadline": 5}');
    expect(unknown.status).toBe(400);
    expect(unknown.body.error).toEqual({ code: 'invalid_request', message: 'Unknown field "deadline" in body.' });
    for (const body of ['{"lifetimeMs": 0}', '{"lifetimeMs": 1.5}', '{"lifetimeMs": "1000"}', '{}']) {
      const res = await patch('body', body);
      expect(res.status, body).toBe(400);
      expect(res.body.error.code, body).toBe('invalid_request');
      expect(res.body.error.message, body).toContain('lifetimeMs');
    }
    expect((await patch('body', '{"lifetimeMs": 1000}', false)).status).toBe(401);
  });
});

describe('idle sessions: the idle timeout, last activity and activity from the service', async () => {
  const api = await startTestApi({
    TOKEN_LIMIT: '1000',
    SPAWN_INTERVAL_MS: '1',
    SPAWN_BURST: '100',
    MAX_LIFETIME_MS: '60000',
    IDLE_TIMEOUT_MS: '30000',
  });
  const get = (path: string) => send(api.baseUrl, 'GET', path, { headers: jsonHeaders() });
  const activity = (userId: string, options: { auth?: boolean; body?: string } = {}) =>
    send(api.baseUrl, 'POST', `/v1/users/${userId}/session/activity`, {
      headers:
        options.body === undefined
          ? options.auth === false
            ? {}
            : { authorization: jsonHeaders().authorization! }
          : jsonHeaders(options.auth ?? true),
      ...(options.body === undefined ? {} : { body: options.body }),
    });

  it("GET session shows the token's idleTimeoutMs, else IDLE_TIMEOUT_MS; 0 shows none; lastActivityAt once running", async () => {
    const own = await api.client.spawn(
      (await api.client.issueToken({ userId: 'idle-own', idleTimeoutMs: 1500 })).token,
    );
    expect((await get('/v1/users/idle-own/session')).body).toEqual({
      sessionId: own.sessionId,
      userId: 'idle-own',
      fence: own.fence,
      state: 'pending',
      pool: 'default',
      labels: {},
      ready: false,
      idleTimeoutMs: 1500,
    });
    const claim = await claimAs(api, own);
    const running = (await get('/v1/users/idle-own/session')).body;
    expect(running).toMatchObject({ state: 'running', idleTimeoutMs: 1500 });
    expect(running.lastActivityAt).toBe(new Date(claim.startedAt).toISOString());

    await api.client.spawn((await api.client.issueToken({ userId: 'idle-default' })).token);
    expect((await get('/v1/users/idle-default/session')).body.idleTimeoutMs).toBe(30_000);
    await api.client.spawn((await api.client.issueToken({ userId: 'idle-zero', idleTimeoutMs: 0 })).token);
    expect((await get('/v1/users/idle-zero/session')).body.idleTimeoutMs).toBeUndefined();
  });

  it('POST activity: 204 and lastActivityAt moves for a running session; 204 for a pending one; 404 no_session; 401 without a key', async () => {
    expect((await activity('idle-none')).status).toBe(404);
    expect((await activity('idle-none')).body.error.code).toBe('no_session');
    const admitted = await api.client.spawn((await api.client.issueToken({ userId: 'idle-touch' })).token);
    expect((await activity('idle-touch')).status).toBe(204);
    expect((await get('/v1/users/idle-touch/session')).body.lastActivityAt).toBeUndefined();
    const claim = await claimAs(api, admitted);
    // Redis's clock is this machine's: wait until it has moved on from the start.
    await until(() => Date.now() > claim.startedAt + 20, 1000, 'the clock past the start');
    const res = await activity('idle-touch');
    expect(res.status).toBe(204);
    expect(res.body).toBe('');
    const last = Date.parse((await get('/v1/users/idle-touch/session')).body.lastActivityAt);
    expect(last).toBeGreaterThan(claim.startedAt);
    // The typed client's call does the same.
    await api.client.recordActivity('idle-touch');
    expect(Date.parse((await get('/v1/users/idle-touch/session')).body.lastActivityAt)).toBeGreaterThanOrEqual(last);
    expect((await activity('idle-touch', { body: '{}' })).status).toBe(204);
    const unknown = await activity('idle-touch', { body: '{"at": 5}' });
    expect(unknown.status).toBe(400);
    expect(unknown.body.error.message).toContain('"at"');
    expect((await activity('idle-touch', { auth: false })).status).toBe(401);
    expect(
      (await get('/openapi.json')).body.paths['/v1/users/{userId}/session/activity'].post.responses,
    ).toHaveProperty('204');
  });

  it('a session stopped as idle is in the history as stopped, reason idle', async () => {
    const admitted = await api.client.spawn((await api.client.issueToken({ userId: 'idle-ended' })).token);
    const claim = await claimAs(api, admitted);
    expect(await api.coordinator.claims.finish(claim, 'stopped', 143, 'idle')).toBe(true);
    expect((await api.client.history('idle-ended'))[0]).toMatchObject({ state: 'stopped', reason: 'idle' });
  });
});

describe('?sessionId= on DELETE, PATCH and POST activity: the session the call means', async () => {
  const api = await startTestApi({ TOKEN_LIMIT: '1000', SPAWN_INTERVAL_MS: '1', SPAWN_BURST: '100' });
  const get = (userId: string) => send(api.baseUrl, 'GET', `/v1/users/${userId}/session`, { headers: jsonHeaders() });
  /** The three calls that change a user's session, each with `?<query>`. */
  const changes = (userId: string, query: string) =>
    [
      ['DELETE', `/v1/users/${userId}/session?${query}`, undefined],
      ['PATCH', `/v1/users/${userId}/session?${query}`, '{"lifetimeMs": 1000}'],
      ['POST', `/v1/users/${userId}/session/activity?${query}`, undefined],
    ] as const;
  const call = ([method, path, body]: ReturnType<typeof changes>[number]) =>
    send(api.baseUrl, method, path, {
      headers: body === undefined ? { authorization: jsonHeaders().authorization! } : jsonHeaders(),
      ...(body === undefined ? {} : { body }),
    });
  const running = async (userId: string) =>
    claimAs(api, await api.client.spawn((await api.client.issueToken({ userId })).token));

  /** The user's first session ended; the second (the successor) runs. */
  async function replaced(userId: string): Promise<{ stale: string; successor: Awaited<ReturnType<typeof running>> }> {
    const first = await running(userId);
    await api.client.stopSession(userId);
    expect(await api.coordinator.claims.finish(first, 'stopped', 0)).toBe(true);
    return { stale: first.sessionId, successor: await running(userId) };
  }

  it('409 session_mismatch for a stale sessionId after the session was replaced: the successor still runs, its deadline and last activity unchanged', async () => {
    const { stale, successor } = await replaced('mm-stale');
    const before = (await get('mm-stale')).body;
    expect(before).toMatchObject({ sessionId: successor.sessionId, state: 'running' });
    // Redis's clock is this machine's: past the start, so recorded activity would show.
    await until(() => Date.now() > successor.startedAt + 20, 1000, 'the clock past the start');
    for (const change of changes('mm-stale', `sessionId=${stale}`)) {
      const res = await call(change);
      expect(res.status, change[0]).toBe(409);
      expect(res.body.error, change[0]).toEqual({
        code: 'session_mismatch',
        message: `The request names session ${stale} of user mm-stale, but the user's live session is another one; nothing was changed.`,
      });
    }
    // The typed client passes it too.
    await expect(api.client.stopSession('mm-stale', { sessionId: stale })).rejects.toBeInstanceOf(SessionMismatchError);
    await expect(api.client.extend('mm-stale', 1000, { sessionId: stale })).rejects.toBeInstanceOf(
      SessionMismatchError,
    );
    await expect(api.client.recordActivity('mm-stale', { sessionId: stale })).rejects.toBeInstanceOf(
      SessionMismatchError,
    );
    expect((await get('mm-stale')).body).toEqual(before);
    expect(await api.coordinator.claims.renew(successor)).toMatchObject({
      ok: true,
      stopRequested: false,
      deadline: successor.deadline,
    });
  });

  it('naming the live session (in either case) acts as without it', async () => {
    const { successor } = await replaced('mm-live');
    await until(() => Date.now() > successor.startedAt + 20, 1000, 'the clock past the start');
    await api.client.recordActivity('mm-live', { sessionId: successor.sessionId });
    expect(Date.parse((await get('mm-live')).body.lastActivityAt)).toBeGreaterThan(successor.startedAt);
    const extended = await api.client.extend('mm-live', 5000, { sessionId: successor.sessionId.toUpperCase() });
    expect(Date.parse(extended.deadline!)).toBeLessThan(successor.deadline);
    expect(await api.client.stopSession('mm-live', { sessionId: successor.sessionId })).toEqual({
      sessionId: successor.sessionId,
      userId: 'mm-live',
      state: 'stopping',
    });
  });

  it('409 session_mismatch when the user has no live session; without sessionId that stays 404 no_session', async () => {
    const first = await running('mm-none');
    await api.client.stopSession('mm-none');
    expect(await api.coordinator.claims.finish(first, 'stopped', 0)).toBe(true);
    for (const change of changes('mm-none', `sessionId=${first.sessionId}`)) {
      const res = await call(change);
      expect(res.status, change[0]).toBe(409);
      expect(res.body.error.message, change[0]).toBe(
        `The request names session ${first.sessionId} of user mm-none, but the user has no live session; nothing was changed.`,
      );
    }
    for (const change of changes('mm-none', '')) expect((await call(change)).body.error.code).toBe('no_session');
  });

  it('400 naming the query parameter for a sessionId that is not a UUID, or for an unknown one; nothing changes', async () => {
    const claim = await running('mm-bad');
    const before = (await get('mm-bad')).body;
    for (const [query, message] of [
      [`sessionId=${claim.sessionId}:rec`, 'Query parameter "sessionId" is not valid: must be a session id (a UUID'],
      ['sessionId=', 'Query parameter "sessionId" is not valid'],
      [`sessionId=${claim.sessionId}&sessionId=${claim.sessionId}`, 'Query parameter "sessionId" is not valid'],
      [`session=${claim.sessionId}`, 'Unknown query parameter "session".'],
      ['force=1&dryRun', 'Unknown query parameters "force", "dryRun".'],
    ] as const)
      for (const change of changes('mm-bad', query)) {
        const res = await call(change);
        expect(res.status, `${change[0]} ?${query}`).toBe(400);
        expect(res.body.error.code).toBe('invalid_request');
        expect(res.body.error.message, `${change[0]} ?${query}`).toContain(message);
      }
    expect((await get('mm-bad')).body).toEqual(before);
  });

  it('the OpenAPI document lists sessionId as an optional query parameter of the three, and 409 among their answers', async () => {
    const doc = (await send(api.baseUrl, 'GET', '/openapi.json')).body;
    for (const [path, method] of [
      ['/v1/users/{userId}/session', 'delete'],
      ['/v1/users/{userId}/session', 'patch'],
      ['/v1/users/{userId}/session/activity', 'post'],
    ] as const) {
      const operation = doc.paths[path][method];
      expect(operation.parameters, `${method} ${path}`).toContainEqual(
        expect.objectContaining({ in: 'query', name: 'sessionId', required: false }),
      );
      expect(operation.responses, `${method} ${path}`).toHaveProperty('409');
    }
  });
});
