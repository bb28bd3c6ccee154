import { describe, expect, it } from 'vitest';
import { MAX_BODY_DEPTH, MAX_METADATA_DEPTH } from '@cq/contract';
import { TEST_API_KEY, jsonHeaders, send, startTestApi } from './test-support/app.js';
import { inlineRefs } from './test-support/openapi.js';
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
    expect(missing.body).toEqual({
      error: { code: 'not_found', message: 'There is no route for this method and path.' },
    });
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
    expect(other.body).toEqual({
      error: { code: 'not_found', message: 'There is no route for this method and path.' },
    });
  });

  it('healthz, readyz, metrics and the OpenAPI document', async () => {
    expect((await send(api.baseUrl, 'GET', '/healthz')).status).toBe(200);
    expect((await send(api.baseUrl, 'GET', '/readyz')).status).toBe(200);
    await api.client.spawn((await api.client.issueToken({ userId: 'metered' })).token);
    const metrics = await send(api.baseUrl, 'GET', '/metrics');
    expect(metrics.status).toBe(200);
    expect(metrics.body).toContain('cq_admissions_total{outcome="admitted",pool="default"} 1');
    expect(metrics.body).toContain('cq_tokens_issued_total 1');
    expect(metrics.body).toContain('cq_http_request_duration_seconds_bucket');
    expect(metrics.body).toContain('cq_throttled_total');
    expect(metrics.body).toContain('cq_redis_errors_total');
    const doc = await send(api.baseUrl, 'GET', '/openapi.json');
    expect(doc.body.openapi).toMatch(/^3\./);
    doc.body = inlineRefs(doc.body);
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
    // labels, lifetimeMs or both: neither is required on its own.
    expect(patch.requestBody.content['application/json'].schema.required).toBeUndefined();
    expect(Object.keys(patch.requestBody.content['application/json'].schema.properties).sort()).toEqual([
      'labels',
      'lifetimeMs',
    ]);
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

describe('the HTTP edge in the error format', async () => {
  const api = await startTestApi({}, { requestTimeoutMs: 400 });
  const byDefault = await startTestApi();

  it('a body that stalls, or headers that do, are answered 408 in the error format within the bound (10 s by default)', async () => {
    // Headers by Node's headers timeout; bodies by the API's own bound (app.ts): Node's request timeout is
    // off on the server, which also carries the session proxy's uploads.
    expect(byDefault.app.server.headersTimeout).toBe(10_000);
    expect(byDefault.app.server.requestTimeout).toBe(0);
    for (const request of [
      // Content-Length: 100, a few bytes of it, then nothing.
      'POST /v1/spawn HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{"tok',
      'PATCH /v1/users/slow/session HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n' +
        `Authorization: Bearer ${TEST_API_KEY}\r\nContent-Length: 100\r\n\r\n{"life`,
      // Headers that never end.
      'GET /healthz HTTP/1.1\r\nHost: x\r\nX-Slow: 1\r\n',
    ]) {
      const answer = await rawExchange(api.baseUrl, request, 5000);
      expect(answer.status, request).toBe(408);
      expect(answer.headers['content-type']).toMatch(/^application\/json/);
      expect(answer.body).toEqual({
        error: {
          code: 'request_timeout',
          message: 'The request did not arrive in full (headers and body) within 400 ms; send it again, faster.',
        },
      });
      expect(answer.elapsedMs).toBeGreaterThanOrEqual(350);
      expect(answer.elapsedMs).toBeLessThan(3000);
    }
    // The API goes on answering.
    expect((await send(api.baseUrl, 'GET', '/healthz')).status).toBe(200);
  });

  it('without PROXY_SECRET, a request for a session’s origin is 503 proxy_not_configured, naming the variable', async () => {
    const res = await rawExchange(
      api.baseUrl,
      'GET / HTTP/1.1\r\nHost: 8080-0f1e2d3c-4b5a-4697-8877-665544332211.localhost:3000\r\nConnection: close\r\n\r\n',
    );
    expect(res.status).toBe(503);
    expect(res.body.error.code).toBe('proxy_not_configured');
    expect(res.body.error.message).toContain('PROXY_SECRET');
  });

  it("Fastify's own refusals use the error format and never repeat the path: 404, 405 with Allow, bad encoding, 414", async () => {
    const cases: Array<[string, string, number, string]> = [
      ['GET', '/v2/secret-path-text', 404, 'not_found'],
      ['DELETE', '/v1/tokens', 405, 'method_not_allowed'],
      ['PUT', '/v1/users/secret-path-text/session', 405, 'method_not_allowed'],
      ['GET', '/v1/users/secret-path-text%E0%A4%A/session', 400, 'invalid_request'],
      ['GET', `/v1/users/secret-path-text${'a'.repeat(300)}/session`, 414, 'uri_too_long'],
    ];
    for (const [method, path, status, code] of cases) {
      const res = await rawExchange(api.baseUrl, `${method} ${path} HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n`);
      expect(res.status, `${method} ${path}`).toBe(status);
      expect(res.body, `${method} ${path}`).toEqual({ error: { code, message: expect.any(String) } });
      expect(res.body.error.message).not.toContain('secret-path-text');
      expect(res.body.error.message).not.toContain('/v1');
    }
    const tokens = await send(api.baseUrl, 'GET', '/v1/tokens');
    expect(tokens.status).toBe(405);
    expect(tokens.headers.get('allow')).toBe('POST');
    const session = await send(api.baseUrl, 'PUT', '/v1/users/someone/session');
    expect(session.headers.get('allow')).toBe('DELETE, GET, HEAD, PATCH');
    // An unknown path is still 404, whatever the method.
    expect((await send(api.baseUrl, 'POST', '/v1/users/someone/nothing')).status).toBe(404);
  });

  it('routes that take no body refuse any field in one, naming it', async () => {
    const cases: Array<[string, string]> = [
      ['DELETE', '/v1/users/someone/session'],
      ['POST', '/v1/hosts/some-host/drain'],
      ['DELETE', `/v1/webhooks/wh_${'0'.repeat(24)}`],
      ['POST', '/v1/users/someone/session/activity'],
    ];
    for (const [method, path] of cases) {
      const res = await send(api.baseUrl, method, path, { body: '{"force": true}', headers: jsonHeaders() });
      expect(res.status, `${method} ${path}`).toBe(400);
      expect(res.body.error).toEqual({ code: 'invalid_request', message: 'Unknown field "force" in body.' });
      // No body, or an empty one, is still fine (404: nothing of that name).
      for (const body of [undefined, '{}'])
        expect(
          (await send(api.baseUrl, method, path, { ...(body === undefined ? {} : { body }), headers: jsonHeaders() }))
            .status,
          `${method} ${path} ${body}`,
        ).toBe(404);
    }
  });
});
