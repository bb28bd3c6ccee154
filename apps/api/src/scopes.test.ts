import { readFileSync } from 'node:fs';
import { Redis } from 'ioredis';
import { describe, expect, inject, it } from 'vitest';
import { SCOPES, holds, type Scope } from './access.js';
import { CoordinatorClient } from '@cq/client';
import { cleanUp } from '@cq/test-harness';
import { claimAs, send, startTestApi, writeKeysFile } from './test-support/app.js';

/** One key per scope, named after it (and an admin key): every route is tried with each. */
const keyOf = (scope: Scope): string => `key-of-${scope.replace(':', '-')}-0123456789`;
const bearer = (key: string) => ({ authorization: `Bearer ${key}` });

/** The `/v1/` rows of docs/http-api.md's routes table: route (without its query) → its "needs" cell. */
function documentedScopes(): Map<string, string> {
  const doc = readFileSync(new URL('../../../docs/http-api.md', import.meta.url), 'utf8');
  const rows = new Map<string, string>();
  for (const [, route, needs] of doc.matchAll(/^\| `([A-Z]+ \/v1\/[^`?\s]*)[^|]*\| ([^|]+?) \|/gm))
    rows.set(route!, needs!.replaceAll('`', ''));
  return rows;
}

describe('scoped keys on every route', async () => {
  const keysFile = writeKeysFile(SCOPES.map((scope) => ({ name: scope, key: keyOf(scope), scopes: [scope] })));
  // Only API_KEYS_FILE: API_KEYS unset.
  const api = await startTestApi({ API_KEYS: '', API_KEYS_FILE: keysFile, TOKEN_LIMIT: '1000' });
  const redis = new Redis(inject('redisUrl'));
  cleanUp(() => redis.disconnect());
  const scoped = api.app.routeTable.filter(
    (r): r is { method: string; url: string; scope: Scope } =>
      r.method !== 'HEAD' && r.scope !== undefined && r.scope !== 'public' && r.scope !== 'key',
  );

  /** Every key of the API's prefix with its value (DUMP), to prove a refusal changed nothing. */
  async function snapshot(): Promise<Map<string, string>> {
    const values = new Map<string, string>();
    for (const key of await redis.keys(`${api.config.keyPrefix}*`))
      values.set(key, (await redis.dumpBuffer(key))?.toString('base64') ?? '');
    return values;
  }

  it('docs/http-api.md lists every /v1/ route with the scope it needs, and no other', () => {
    const routes = new Map(
      api.app.routeTable
        .filter((r) => r.method !== 'HEAD' && r.url.startsWith('/v1/'))
        .map((r) => [
          `${r.method} ${r.url.replace(/:(\w+)/g, '{$1}')}`,
          r.scope === 'key' ? 'any valid key' : r.scope === 'public' ? 'the token' : r.scope!,
        ]),
    );
    expect(routes.size).toBeGreaterThan(20);
    expect(documentedScopes()).toEqual(routes);
  });

  it('a key without the scope a route needs: 403 forbidden naming the scope, before the body is read; nothing changes', async () => {
    // Something to change, so that a refusal that went through would show.
    const admin = new CoordinatorClient({ baseUrl: api.baseUrl, apiKey: keyOf('admin') });
    const admitted = await admin.spawn((await admin.issueToken({ userId: 'scoped-user' })).token);
    await claimAs(api, admitted, 'scoped-host');
    await api.coordinator.workers.heartbeat(
      { workerId: 'scoped-host', slots: 2, busy: 1, startedAt: Date.now(), containment: 'group' },
      60_000,
    );
    const before = await snapshot();
    let refusals = 0;
    for (const { method, url, scope } of scoped) {
      const path = url
        .replace(':userId', 'scoped-user')
        .replace(':sessionId', admitted.sessionId)
        .replace(':workerId', 'scoped-host')
        .replace(':id', 'wh_0000000000000000');
      for (const held of SCOPES.filter((s) => !holds({ name: s, scopes: [s] }, scope))) {
        const body = method === 'GET' ? {} : { headers: { 'content-type': 'application/json' }, body: '{' };
        const res = await send(api.baseUrl, method, path, {
          ...body,
          headers: { ...body.headers, ...bearer(keyOf(held)) },
        });
        expect(res.status, `${method} ${url} with a ${held} key`).toBe(403);
        expect(res.body.error.code).toBe('forbidden');
        expect(res.body.error.scope).toBe(scope);
        expect(res.body.error.message).toContain(`"${scope}"`);
        expect(res.body.error.message).toContain(`"${held}"`);
        refusals++;
      }
    }
    expect(refusals).toBeGreaterThan(100);
    expect(await snapshot()).toEqual(before);
  });

  it("a key with the route's scope (or admin) gets past the check: the route's own answer", async () => {
    for (const { method, url, scope } of scoped) {
      for (const key of [keyOf(scope), keyOf('admin')]) {
        // Bodies are left out: the route then answers from its own validation (400) or with its result.
        // Over a socket, the body not read: an event stream's answer never ends.
        const controller = new AbortController();
        const res = await fetch(`${api.baseUrl}${url.replace(/:\w+/g, 'nobody')}`, {
          method,
          headers: bearer(key),
          signal: controller.signal,
        });
        controller.abort();
        expect([401, 403], `${method} ${url} with ${key}`).not.toContain(res.status);
      }
    }
  });

  it('GET /v1/whoami answers any valid key with its name and scopes', async () => {
    for (const scope of SCOPES) {
      const res = await send(api.baseUrl, 'GET', '/v1/whoami', { headers: bearer(keyOf(scope)) });
      expect(res.status).toBe(200);
      expect(res.body).toEqual({ name: scope, scopes: [scope] });
    }
    expect((await send(api.baseUrl, 'GET', '/v1/whoami', { headers: bearer('nope-0123456789abcdef') })).status).toBe(
      401,
    );
  });
});

describe('key names and the audit trail in the logs', async () => {
  const keysFile = writeKeysFile([
    { name: 'ops', key: 'ops-key-0123456789abcdef', scopes: ['admin'] },
    { name: 'reader', key: 'reader-key-0123456789ab', scopes: ['sessions:read'] },
  ]);
  // Webhook host names resolve to a public address (no DNS here).
  const api = await startTestApi(
    { API_KEYS_FILE: keysFile, TOKEN_LIMIT: '1000', SPAWN_INTERVAL_MS: '1' },
    { webhookResolve: async () => ['93.184.215.14'] },
  );
  const ops = new CoordinatorClient({ baseUrl: api.baseUrl, apiKey: 'ops-key-0123456789abcdef' });
  const reader = new CoordinatorClient({ baseUrl: api.baseUrl, apiKey: 'reader-key-0123456789ab' });
  const audits = () => api.logs.filter((l) => l.audit === true);

  it('each change writes one audit line (key name, action, target); request lines name the key; no secret appears', async () => {
    const before = api.logs.length;
    const token = await ops.issueToken({ userId: 'audited' });
    const admitted = await ops.spawn(token.token);
    await ops.updateSession('audited', { lifetimeMs: 60_000 });
    await ops.updateSession('audited', { labels: { team: 'ml', tier: null } });
    await claimAs(api, admitted, 'audit-host');
    await ops.recordActivity('audited');
    await ops.stopSession('audited');
    await ops.spawn((await ops.issueToken({ userId: 'audited-2', labels: { team: 'a' } })).token);
    await ops.stopSessions({ labels: { team: 'a' } });
    await api.coordinator.workers.heartbeat(
      { workerId: 'audit-host', slots: 2, busy: 0, startedAt: Date.now(), containment: 'group' },
      60_000,
    );
    await ops.drainHost('audit-host');
    await reader.getSession('audited').catch(() => undefined);
    const lines = api.logs.slice(before);
    const trail = audits().map((l) => [l.key, l.action, l.target]);
    expect(trail).toEqual([
      ['ops', 'token.issue', 'audited'],
      ['ops', 'session.update', 'audited'],
      ['ops', 'session.update', 'audited'],
      ['ops', 'session.activity', 'audited'],
      ['ops', 'session.stop', 'audited'],
      ['ops', 'token.issue', 'audited-2'],
      ['ops', 'sessions.stop', JSON.stringify({ labels: { team: 'a' } })],
      ['ops', 'host.drain', 'audit-host'],
    ]);
    // Each says what changed: what a token carries, a new lifetime, the labels set (with their values) and removed.
    const [issued, lifetime, relabelled, , , issuedLabelled] = audits();
    expect(issued).toMatchObject({ userId: 'audited', pool: 'default' });
    expect(lifetime).toMatchObject({ lifetimeMs: 60_000 });
    expect(relabelled).toMatchObject({ labelsSet: { team: 'ml' }, labelsRemoved: ['tier'] });
    expect(issuedLabelled).toMatchObject({ userId: 'audited-2', labels: { team: 'a' } });
    // Every answer's line names the key that asked; the spawns' none (their token is the credential).
    const spawns = new Set(
      lines.filter((l) => (l.req as { url?: string } | undefined)?.url === '/v1/spawn').map((l) => l.reqId),
    );
    expect(spawns.size).toBe(2);
    const answered = lines.filter((l) => l.msg === 'request completed');
    expect(answered.filter((l) => spawns.has(l.reqId))).toHaveLength(2);
    for (const line of answered.filter((l) => spawns.has(l.reqId))) expect(line.key).toBeUndefined();
    expect(answered.filter((l) => l.key === 'ops')).toHaveLength(8);
    expect(answered.filter((l) => l.key === 'reader')).toHaveLength(1);
    expect(answered).toHaveLength(11);
    const text = JSON.stringify(lines);
    for (const secret of ['ops-key-0123456789abcdef', 'reader-key-0123456789ab', token.token])
      expect(text).not.toContain(secret);
  });

  it('webhooks: created and deleted, audited without the secret or the URL query', async () => {
    const created = await ops.createWebhook('https://hooks.example/receive?token=receiver-secret-42');
    await ops.deleteWebhook(created.id);
    const [made, deleted] = audits().filter((l) => String(l.action).startsWith('webhook.'));
    expect(made).toMatchObject({
      key: 'ops',
      action: 'webhook.create',
      target: created.id,
      url: 'https://hooks.example/receive',
    });
    expect(deleted).toMatchObject({ key: 'ops', action: 'webhook.delete', target: created.id });
    const text = JSON.stringify(api.logs);
    expect(text).not.toContain('receiver-secret-42');
    expect(text).not.toContain(created.secret);
  });
});
