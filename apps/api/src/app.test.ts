import { describe, expect, it } from 'vitest';
import { jsonHeaders, send, startTestApi } from './test-support/app.js';

describe('HTTP edges', async () => {
  const api = await startTestApi();

  it('413 for a body over 64 KiB, 400 for malformed JSON, 415 for a non-JSON body, 404 JSON for unknown routes', async () => {
    const big = await send(api.baseUrl, 'POST', '/v1/tokens', {
      body: JSON.stringify({ userId: 'a', metadata: { x: 'y'.repeat(70_000) } }),
      headers: jsonHeaders(),
    });
    expect(big.status).toBe(413);
    expect(big.body.error.code).toBe('payload_too_large');
    const malformed = await send(api.baseUrl, 'POST', '/v1/spawn', { body: '{"token": ', headers: jsonHeaders(false) });
    expect(malformed.status).toBe(400);
    expect(malformed.body.error.code).toBe('invalid_json');
    const text = await send(api.baseUrl, 'POST', '/v1/spawn', {
      body: 'token=abc',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
    });
    expect(text.status).toBe(415);
    expect(text.body.error.code).toBe('unsupported_media_type');
    const missing = await send(api.baseUrl, 'GET', '/v2/nothing');
    expect(missing.status).toBe(404);
    expect(missing.body).toEqual({ error: { code: 'not_found', message: expect.stringContaining('/v2/nothing') } });
  });

  it('GET / points to the dashboard, the OpenAPI document and the docs: JSON, or a page for a client that accepts HTML', async () => {
    const json = await send(api.baseUrl, 'GET', '/');
    expect(json.status).toBe(200);
    expect(json.body).toEqual({
      service: 'worker-coordinator',
      dashboard: '/dashboard',
      openapi: '/openapi.json',
      docs: 'docs/http-api.md in the repository',
      health: '/healthz',
    });
    const page = await send(api.baseUrl, 'GET', '/', {
      headers: { accept: 'text/html,application/xhtml+xml,*/*;q=0.8' },
    });
    expect(page.status).toBe(200);
    expect(page.headers.get('content-type')).toMatch(/^text\/html/);
    expect(page.headers.get('content-security-policy')).toContain("default-src 'none'");
    const html = String(page.body);
    expect(html).toContain('href="/dashboard"');
    expect(html).toContain('href="/openapi.json"');
    expect(html).toContain('docs/http-api.md');
    // Any other unknown path keeps the error shape.
    const other = await send(api.baseUrl, 'GET', '/index.html');
    expect(other.status).toBe(404);
    expect(other.body).toEqual({ error: { code: 'not_found', message: expect.stringContaining('/index.html') } });
  });

  it('healthz, readyz, metrics and the OpenAPI document', async () => {
    expect((await send(api.baseUrl, 'GET', '/healthz')).status).toBe(200);
    expect((await send(api.baseUrl, 'GET', '/readyz')).status).toBe(200);
    await api.client.spawn((await api.client.issueToken({ userId: 'metered' })).token);
    const metrics = await send(api.baseUrl, 'GET', '/metrics');
    expect(metrics.status).toBe(200);
    expect(metrics.body).toContain('cq_admissions_total{outcome="admitted"} 1');
    expect(metrics.body).toContain('cq_tokens_issued_total 1');
    expect(metrics.body).toContain('cq_http_request_duration_seconds_bucket');
    expect(metrics.body).toContain('cq_throttled_total');
    expect(metrics.body).toContain('cq_redis_errors_total');
    const doc = await send(api.baseUrl, 'GET', '/openapi.json');
    expect(doc.body.openapi).toMatch(/^3\./);
    expect(Object.keys(doc.body.paths)).toEqual(
      expect.arrayContaining([
        '/v1/tokens',
        '/v1/spawn',
        '/v1/users/{userId}/session',
        '/v1/users/{userId}/history',
        '/healthz',
        '/readyz',
      ]),
    );
    expect(doc.body.paths['/v1/tokens'].post.requestBody.content['application/json'].schema.required).toEqual([
      'userId',
    ]);
    const patch = doc.body.paths['/v1/users/{userId}/session'].patch;
    expect(patch.requestBody.content['application/json'].schema.required).toEqual(['lifetimeMs']);
    expect(Object.keys(patch.responses)).toEqual(expect.arrayContaining(['200', '400', '401', '404', '409']));
  });

  it('never logs a service key or a token', async () => {
    const issued = await api.client.issueToken({ userId: 'secretive' });
    await api.client.spawn(issued.token);
    await send(api.baseUrl, 'POST', '/v1/tokens', {
      body: '{"userId":"x"}',
      headers: { ...jsonHeaders(false), authorization: 'Bearer not-the-key-but-secret' },
    });
    const text = JSON.stringify(api.logs);
    expect(api.logs.length).toBeGreaterThan(0);
    expect(text).not.toContain(issued.token);
    expect(text).not.toContain(issued.token.split('.')[2]);
    expect(text).not.toContain(jsonHeaders().authorization!.slice(7));
    expect(text).not.toContain('not-the-key-but-secret');
  });
});
