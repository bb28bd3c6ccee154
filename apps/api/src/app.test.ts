import { describe, expect, it } from 'vitest';
import { MAX_BODY_DEPTH, MAX_METADATA_DEPTH } from '@cq/contract';
import { jsonHeaders, send, startTestApi } from './test-support/app.js';
import { rawExchange } from './test-support/raw-http.js';

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

describe('JSON bodies', async () => {
  const api = await startTestApi();

  it('a body nested deeper than MAX_BODY_DEPTH is 400 at any depth, with or without a key (unless the key route refuses it first)', async () => {
    expect(MAX_BODY_DEPTH).toBe(64);
    const nestedObjects = (levels: number, inner = '1') => '{"a":'.repeat(levels) + inner + '}'.repeat(levels);
    const nestedArrays = (levels: number) => '['.repeat(levels) + ']'.repeat(levels);
    for (const levels of [MAX_BODY_DEPTH + 1, 1000, 6000, 10_000]) {
      const bodies = [
        // metadata nested 6,000 levels made JSON.stringify overflow the stack: a 500 RangeError.
        `{"userId":"deep","metadata":${nestedObjects(levels - 1)}}`,
        nestedObjects(levels),
        nestedArrays(levels),
      ];
      for (const body of bodies)
        for (const [path, auth] of [
          ['/v1/tokens', true],
          ['/v1/spawn', false],
          ['/v1/users/deep/session', true],
        ] as const) {
          const method = path.endsWith('/session') ? 'PATCH' : 'POST';
          const res = await send(api.baseUrl, method, path, { body, headers: jsonHeaders(auth) });
          expect(res.status, `${method} ${path} ${levels} levels: ${body.slice(0, 40)}`).toBe(400);
          expect(res.body).toEqual({
            error: {
              code: 'invalid_request',
              message: `The body is nested more than ${MAX_BODY_DEPTH} levels deep (objects and arrays); flatten it.`,
            },
          });
        }
    }
    // 100,000 levels are more than 64 KiB: a Content-Length that says so is 413 before a byte is read;
    // sent chunked (no length), the body is refused as soon as its 65th level arrives, the rest unsent.
    const huge = nestedArrays(100_000);
    const declared = await send(api.baseUrl, 'POST', '/v1/spawn', { body: huge, headers: jsonHeaders(false) });
    expect(declared.status).toBe(413);
    expect(declared.body.error.code).toBe('payload_too_large');
    const head = huge.slice(0, 1000);
    const chunked = await rawExchange(
      api.baseUrl,
      'POST /v1/spawn HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n' +
        `${head.length.toString(16)}\r\n${head}\r\n`,
    );
    expect(chunked.status).toBe(400);
    expect(chunked.body.error.message).toContain(`more than ${MAX_BODY_DEPTH} levels deep`);
    // Metadata at its own limit still fits inside a body.
    const deepest = '{"a":'.repeat(MAX_METADATA_DEPTH - 1) + '{}' + '}'.repeat(MAX_METADATA_DEPTH - 1);
    const ok = await send(api.baseUrl, 'POST', '/v1/tokens', {
      body: `{"userId":"deep","metadata":${deepest}}`,
      headers: jsonHeaders(),
    });
    expect(ok.status).toBe(201);
    const over = await send(api.baseUrl, 'POST', '/v1/tokens', {
      body: `{"userId":"deep","metadata":{"a":${deepest}}}`,
      headers: jsonHeaders(),
    });
    expect(over.status).toBe(400);
    expect(over.body.error.message).toContain(`at most ${MAX_METADATA_DEPTH} levels deep`);
  });

  it('__proto__ and constructor keys in a JSON body are 400 naming the key; a JSON error quotes no body text', async () => {
    for (const [body, key] of [
      ['{"__proto__": {"polluted": true}, "userId": "a"}', '__proto__'],
      ['{"userId": "a", "metadata": {"constructor": {"prototype": {"x": 1}}}}', 'constructor'],
      ['{"userId": "a", "metadata": {"list": [{"__proto__": null}]}}', '__proto__'],
    ]) {
      const res = await send(api.baseUrl, 'POST', '/v1/tokens', { body, headers: jsonHeaders() });
      expect(res.status, body).toBe(400);
      expect(res.body.error.code).toBe('invalid_request');
      expect(res.body.error.message).toContain(`"${key}"`);
    }
    const broken = await send(api.baseUrl, 'POST', '/v1/spawn', {
      body: '{"token": secret-looking-text}',
      headers: jsonHeaders(false),
    });
    expect(broken.status).toBe(400);
    expect(broken.body.error.code).toBe('invalid_json');
    expect(broken.body.error.message).not.toContain('secret');
  });
});
