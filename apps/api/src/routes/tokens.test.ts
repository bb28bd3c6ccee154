import { describe, expect, it } from 'vitest';
import { jsonHeaders, send, startTestApi } from '../test-support/app.js';

describe('POST /v1/tokens', async () => {
  const api = await startTestApi({ TOKEN_LIMIT: '3', TOKEN_WINDOW_MS: '60000', MAX_LIFETIME_MS: '60000' });
  const post = (body: unknown, headers = jsonHeaders()) =>
    send(api.baseUrl, 'POST', '/v1/tokens', { body: JSON.stringify(body), headers });

  it('201 with a token, the user and an ISO expiry', async () => {
    const res = await post({ userId: 'alice', metadata: { durationMs: 10 }, ttlMs: 5000, lifetimeMs: 1000 });
    expect(res.status).toBe(201);
    expect(res.body).toEqual({ token: expect.stringMatching(/^v1\./), userId: 'alice', expiresAt: expect.any(String) });
    const expiresIn = Date.parse(res.body.expiresAt) - Date.now();
    expect(expiresIn).toBeGreaterThan(4000);
    expect(expiresIn).toBeLessThanOrEqual(5000);
    expect(new Date(res.body.expiresAt).toISOString()).toBe(res.body.expiresAt);
    // The token is a credential: no cache may keep the answer.
    expect(res.headers.get('cache-control')).toBe('no-store');
  });

  it('401 without a service key and with a wrong one, with WWW-Authenticate', async () => {
    const missing = await post({ userId: 'alice' }, jsonHeaders(false));
    const wrong = await post(
      { userId: 'alice' },
      { ...jsonHeaders(false), authorization: 'Bearer wrong-key-0123456789' },
    );
    const basic = await post({ userId: 'alice' }, { ...jsonHeaders(false), authorization: 'Basic dGVzdDp0ZXN0' });
    for (const res of [missing, wrong, basic]) {
      expect(res.status).toBe(401);
      expect(res.body.error.code).toBe('unauthorized');
      expect(res.headers.get('www-authenticate')).toMatch(/^Bearer/);
    }
  });

  it('400 naming the field for an unknown field, a bad user id, a lifetime over the cap, bad metadata', async () => {
    const unknown = await post({ userId: 'alice', colour: 'red' });
    expect(unknown.status).toBe(400);
    expect(unknown.body.error).toMatchObject({ code: 'invalid_request', message: expect.stringContaining('"colour"') });
    const badUser = await post({ userId: 'no spaces' });
    expect(badUser.body.error.message).toContain('userId');
    const tooLong = await post({ userId: 'alice', lifetimeMs: 60_001 });
    expect(tooLong.status).toBe(400);
    expect(tooLong.body.error.message).toContain('lifetimeMs');
    const bigMeta = await post({ userId: 'alice', metadata: { blob: 'x'.repeat(5000) } });
    expect(bigMeta.status).toBe(400);
    expect(bigMeta.body.error.message).toContain('metadata');
    const deep = await post({ userId: 'alice', metadata: JSON.parse('{"a":'.repeat(100) + '1' + '}'.repeat(100)) });
    expect(deep.status).toBe(400);
    for (const res of [unknown, badUser, tooLong, bigMeta, deep]) expect(res.status).toBe(400);
  });

  it('idleTimeoutMs: 0 to MAX_LIFETIME_MS is accepted; negative, over the cap or not an integer is 400 naming it', async () => {
    for (const idleTimeoutMs of [0, 1500, 60_000])
      expect((await post({ userId: 'idler', idleTimeoutMs })).status, String(idleTimeoutMs)).toBe(201);
    for (const idleTimeoutMs of [-1, 60_001, 1.5, '1500', null]) {
      const res = await post({ userId: 'idler', idleTimeoutMs });
      expect(res.status, String(idleTimeoutMs)).toBe(400);
      expect(res.body.error).toMatchObject({
        code: 'invalid_request',
        message: expect.stringContaining('idleTimeoutMs'),
      });
    }
  });

  it('429 past TOKEN_LIMIT per window, with Retry-After, RateLimit headers and the exact retryAfterMs', async () => {
    const statuses = [];
    let last;
    for (let i = 0; i < 5; i++) {
      last = await post({ userId: 'busy' });
      statuses.push(last.status);
    }
    expect(statuses).toEqual([201, 201, 201, 429, 429]);
    const res = last!;
    expect(res.body.error.code).toBe('throttled');
    const exact = res.body.error.retryAfterMs;
    expect(exact).toBeGreaterThan(59_000);
    expect(exact).toBeLessThanOrEqual(60_000);
    expect(res.headers.get('retry-after')).toBe(String(Math.ceil(exact / 1000)));
    expect(res.headers.get('ratelimit-policy')).toBe('"tokens";q=3;w=60');
    expect(res.headers.get('ratelimit')).toBe(`"tokens";r=0;t=${Math.ceil(exact / 1000)}`);
  });
});
