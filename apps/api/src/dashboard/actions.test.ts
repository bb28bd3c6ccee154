import { describe, expect, it, vi } from 'vitest';
import { claimAs, send, startTestApi, writeKeysFile } from '../test-support/app.js';

const KEYS = {
  ops: 'ops-dash-key-0123456789',
  viewer: 'viewer-dash-key-0123456789',
  actorOnly: 'actor-dash-key-0123456789',
  api: 'api-only-key-0123456789',
};
const basic = (key: string) => ({ authorization: `Basic ${Buffer.from(`operator:${key}`).toString('base64')}` });

describe("the dashboard's actions", async () => {
  const keysFile = writeKeysFile([
    { name: 'ops', key: KEYS.ops, scopes: ['dashboard', 'dashboard:act', 'sessions:write', 'hosts:write'] },
    { name: 'viewer', key: KEYS.viewer, scopes: ['dashboard'] },
    { name: 'actor-only', key: KEYS.actorOnly, scopes: ['dashboard', 'dashboard:act'] },
    { name: 'api-only', key: KEYS.api, scopes: ['sessions:read', 'sessions:write'] },
  ]);
  const api = await startTestApi({ API_KEYS_FILE: keysFile, TOKEN_LIMIT: '1000', SPAWN_INTERVAL_MS: '1' });
  const host = new URL(api.baseUrl).host;

  /** Headers of a request from the dashboard's own page signed in with `key`: its origin and token. */
  async function page(key: string): Promise<Record<string, string>> {
    const me = await send(api.baseUrl, 'GET', '/dashboard/api/me', { headers: basic(key) });
    expect(me.status).toBe(200);
    return { ...basic(key), host, origin: api.baseUrl, 'x-xsrf-token': me.body.antiForgeryToken };
  }
  const act = (headers: Record<string, string>, action: string, body: unknown) =>
    send(api.baseUrl, 'POST', `/dashboard/api/actions/${action}`, {
      headers: { ...headers, 'content-type': 'application/json' },
      body: JSON.stringify(body),
    });
  async function running(userId: string): Promise<string> {
    const admitted = await api.client.spawn((await api.client.issueToken({ userId, labels: { team: 'dash' } })).token);
    await claimAs(api, admitted, 'dash-act-host');
    return admitted.sessionId;
  }

  it('me: the signed-in key, its scopes and the actions it may take; the anti-forgery cookie', async () => {
    const me = await send(api.baseUrl, 'GET', '/dashboard/api/me', { headers: basic(KEYS.ops) });
    expect(me.body).toMatchObject({
      name: 'ops',
      actions: { stop: true, lifetime: true, drain: true, stopMatching: true, open: false, terminal: false },
    });
    expect(me.headers.get('set-cookie')).toBe(
      `XSRF-TOKEN=${me.body.antiForgeryToken}; Path=/dashboard; SameSite=Strict`,
    );
    const viewer = await send(api.baseUrl, 'GET', '/dashboard/api/me', { headers: basic(KEYS.viewer) });
    expect(viewer.body.actions).toEqual({
      stop: false,
      lifetime: false,
      drain: false,
      stopMatching: false,
      open: false,
      terminal: false,
    });
    // Another key, another token.
    expect(viewer.body.antiForgeryToken).not.toBe(me.body.antiForgeryToken);
    const apiOnly = await send(api.baseUrl, 'GET', '/dashboard', { headers: basic(KEYS.api) });
    expect(apiOnly.status).toBe(403);
    expect(apiOnly.body.error).toMatchObject({ code: 'forbidden', scope: 'dashboard' });
  });

  it('stop, lifetime, drain and stop-matching act through their routes, audited under the key’s name', async () => {
    const ops = await page(KEYS.ops);
    const one = await running('dash-act-1');
    const lifetime = await act(ops, 'lifetime', { userId: 'dash-act-1', sessionId: one, lifetimeMs: 120_000 });
    expect(lifetime.status).toBe(200);
    const deadline = (await api.client.getSession('dash-act-1')).deadline!;
    expect(Date.parse(deadline) - Date.now()).toBeGreaterThan(100_000);
    const stop = await act(ops, 'stop', { userId: 'dash-act-1', sessionId: one });
    expect(stop.status).toBe(202);
    expect(stop.body).toMatchObject({ sessionId: one, state: 'stopping' });

    for (const userId of ['dash-act-2', 'dash-act-3', 'dash-act-4']) await running(userId);
    const counted = await send(api.baseUrl, 'GET', '/dashboard/api/matching?label=team%3Ddash&state=running', {
      headers: basic(KEYS.ops),
    });
    expect(counted.body).toMatchObject({ count: 3, more: false });
    const bulk = await act(ops, 'stop-matching', { label: 'team=dash', state: 'running' });
    expect(bulk.status).toBe(202);
    expect(bulk.body).toEqual({ matched: 3, stopping: 3, more: false });

    await api.coordinator.workers.heartbeat(
      { workerId: 'dash-act-host', slots: 4, busy: 0, startedAt: Date.now(), containment: 'group' },
      60_000,
    );
    const drain = await act(ops, 'drain', { workerId: 'dash-act-host' });
    expect(drain.status).toBe(202);
    expect(drain.body.state).toBe('draining');
    expect(api.logs.filter((l) => l.audit === true && l.key === 'ops').map((l) => l.action)).toEqual([
      'session.update',
      'session.stop',
      'sessions.stop',
      'host.drain',
    ]);
  });

  it('the state and the confirmation take the filters GET /v1/sessions takes: what it refuses, they refuse alike', async () => {
    const bearer = { authorization: `Bearer ${KEYS.api}` };
    for (const query of ['workerId=two%20words', 'pool=GPU', 'label=bad%20key%3Dx', 'label=team', 'state=done']) {
      const listed = await send(api.baseUrl, 'GET', `/v1/sessions?${query}`, { headers: bearer });
      expect(listed.status, query).toBe(400);
      for (const path of ['/dashboard/api/state', '/dashboard/api/matching']) {
        const res = await send(api.baseUrl, 'GET', `${path}?${query}`, { headers: basic(KEYS.ops) });
        expect(res.status, `${path}?${query}`).toBe(400);
        expect(res.body.error, `${path}?${query}`).toEqual(listed.body.error);
      }
    }
    // The page sends every input: an empty one is no filter.
    const empty = 'userId=&state=&workerId=&pool=&label=';
    expect(
      (await send(api.baseUrl, 'GET', `/dashboard/api/state?${empty}&cursor=`, { headers: basic(KEYS.ops) })).status,
    ).toBe(200);
    expect(
      (await send(api.baseUrl, 'GET', `/dashboard/api/matching?${empty}`, { headers: basic(KEYS.ops) })).status,
    ).toBe(200);
  });

  it("a key without dashboard:act, or without the action's route scope, is refused and nothing changes", async () => {
    const sessionId = await running('dash-act-refused');
    const viewer = await page(KEYS.viewer);
    const refused = await act(viewer, 'stop', { userId: 'dash-act-refused', sessionId });
    expect(refused.status).toBe(403);
    expect(refused.body.error).toMatchObject({ code: 'forbidden', scope: 'dashboard:act' });
    const actorOnly = await page(KEYS.actorOnly);
    const noRoute = await act(actorOnly, 'stop', { userId: 'dash-act-refused', sessionId });
    expect(noRoute.status).toBe(403);
    expect(noRoute.body.error).toMatchObject({ code: 'forbidden', scope: 'sessions:write' });
    const noDrain = await act(actorOnly, 'drain', { workerId: 'dash-act-host' });
    expect(noDrain.body.error).toMatchObject({ code: 'forbidden', scope: 'hosts:write' });
    const noOpen = await act(actorOnly, 'open', { sessionId });
    expect(noOpen.body.error).toMatchObject({ code: 'forbidden', scope: 'sessions:connect' });
    expect((await api.client.getSession('dash-act-refused')).state).toBe('running');
  });

  it('a request as another site would send it (the browser adds the Basic credentials) is refused; nothing changes', async () => {
    const sessionId = await running('dash-act-forged');
    const ops = await page(KEYS.ops);
    const { origin: _origin, 'x-xsrf-token': token, ...noOrigin } = ops;
    const forgeries: Array<[string, Record<string, string>]> = [
      ['no Origin', { ...noOrigin, 'x-xsrf-token': token! }],
      ['another origin', { ...ops, origin: 'https://evil.example' }],
      ['an opaque origin', { ...ops, origin: 'null' }],
      ['a cross-site fetch', { ...ops, 'sec-fetch-site': 'cross-site' }],
      ['no token', noOrigin],
      ['no token, own origin', { ...noOrigin, origin: api.baseUrl }],
      ['a wrong token', { ...ops, 'x-xsrf-token': 'x'.repeat(43) }],
      ['the token of another key', { ...ops, 'x-xsrf-token': (await page(KEYS.viewer))['x-xsrf-token']! }],
    ];
    for (const [what, headers] of forgeries) {
      const res = await act(headers, 'stop', { userId: 'dash-act-forged', sessionId });
      expect(res.status, what).toBe(403);
      expect(res.body.error.code, what).toBe('forbidden');
    }
    // A plain HTML form posted from another site: no JSON, no token.
    const form = await send(api.baseUrl, 'POST', '/dashboard/api/actions/stop', {
      headers: {
        ...basic(KEYS.ops),
        host,
        origin: 'https://evil.example',
        'content-type': 'application/x-www-form-urlencoded',
      },
      body: `userId=dash-act-forged&sessionId=${sessionId}`,
    });
    expect(form.status).toBe(403);
    expect((await api.client.getSession('dash-act-forged')).state).toBe('running');
    expect(api.logs.some((l) => l.action === 'session.stop' && l.target === 'dash-act-forged')).toBe(false);
  });
});

describe("the stop-matching preview's bound", async () => {
  const BOUND = 20;
  const keysFile = writeKeysFile([
    { name: 'ops', key: KEYS.ops, scopes: ['dashboard', 'dashboard:act', 'sessions:write', 'hosts:write'] },
  ]);
  const api = await startTestApi({ API_KEYS_FILE: keysFile }, { matchingMaxExamined: BOUND });
  const matching = (query: string) =>
    send(api.baseUrl, 'GET', `/dashboard/api/matching?${query}`, { headers: basic(KEYS.ops) });

  it('with more live sessions than it may examine, it reads at most that many and says it stopped early', async () => {
    // 60 live sessions (pending), admitted straight through the coordinator: 5 labelled team=few.
    await Promise.all(
      Array.from({ length: 60 }, async (_, i) => {
        const issued = await api.coordinator.tokens.issue(`bound-${i}`, { labels: { team: i < 5 ? 'few' : 'many' } });
        if (issued.outcome !== 'issued') throw new Error(issued.outcome);
        expect(await api.coordinator.sessions.admit(issued.token)).toMatchObject({ outcome: 'admitted' });
      }),
    );
    const reads = vi.spyOn(api.app.coordinator.sessions, 'settleAndRead');

    // A filter matching nothing no longer reads every live session.
    const none = await matching('label=team%3Dnobody');
    expect(none.status).toBe(200);
    expect(none.body).toEqual({ count: 0, more: true, examined: BOUND });
    expect(reads.mock.calls.length).toBeLessThanOrEqual(BOUND);

    // One matching some: what it found among those it examined, and that more may match.
    reads.mockClear();
    const few = await matching('label=team%3Dfew');
    expect(few.body).toMatchObject({ more: true, examined: BOUND });
    expect(few.body.count).toBeLessThanOrEqual(5);
    expect(reads.mock.calls.length).toBeLessThanOrEqual(BOUND);

    // A user id reads one session, whatever the bound: the whole answer.
    expect((await matching('userId=bound-7')).body).toEqual({ count: 1, more: false, examined: 1 });
  });
});
