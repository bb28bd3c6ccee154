import { createHash } from 'node:crypto';
import { Agent, request } from 'node:http';
import { Redis } from 'ioredis';
import { describe, expect, inject, it } from 'vitest';
import { MAX_BODY_DEPTH } from '@cq/contract';
import { TEST_API_KEY, send, startTestApi } from './test-support/app.js';
import { cleanUp } from '@cq/test-harness';

// A small deterministic PRNG, so a failure can be replayed from its seed.
function prng(seed: number): () => number {
  let state = seed >>> 0;
  return () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const SEED = 20261121;

function fuzzCases(
  count: number,
): Array<{ method: string; path: string; headers: Record<string, string>; body?: string }> {
  const random = prng(SEED);
  const pick = <T>(items: readonly T[]): T => items[Math.floor(random() * items.length)]!;
  const int = (n: number) => Math.floor(random() * n);
  const weird = [
    '',
    ' ',
    '\u0000',
    'é',
    '😀',
    '\u202e',
    '%',
    '%zz',
    '..',
    '../..',
    '{',
    '}',
    '"',
    "'",
    '\\',
    '<script>',
    'a'.repeat(300),
    '𝕏'.repeat(50),
  ];
  const values = (): unknown =>
    pick<() => unknown>([
      () => null,
      () => true,
      () => int(1e9) - 5e8,
      () => Number.MAX_SAFE_INTEGER * 1e6,
      () => -0,
      () => 1.5,
      () => pick(weird),
      () => 'x'.repeat(int(5000)),
      () => [],
      () => ({}),
      () => [pick(weird), int(10)],
      () => ({ [pick(weird)]: pick(weird) }),
    ])();
  const nested = (depth: number): string =>
    random() < 0.5 ? '['.repeat(depth) + ']'.repeat(depth) : '{"a":'.repeat(depth) + '1' + '}'.repeat(depth);
  const bodies = (): string | undefined =>
    pick<() => string | undefined>([
      () => undefined,
      () => '',
      () => '{',
      () => '{"token": }',
      () => 'null',
      () => '[]',
      () => '"just a string"',
      () => '1e400',
      () => '{"userId": 1e400}',
      () => nested(1 + int(20_000)),
      () => '{"__proto__": {"polluted": true}, "userId": "a"}',
      () => '{"constructor": {"prototype": {"x": 1}}}',
      () => JSON.stringify({ token: values() }),
      () => JSON.stringify({ token: 'v1.' + pick(weird) + '.' + 'A'.repeat(43) }),
      () => JSON.stringify({ token: 'v1.YWxpY2U.' + 'A'.repeat(43), extra: values() }),
      () => JSON.stringify({ userId: values() }),
      () => JSON.stringify({ userId: 'fuzz', [`unknown${int(100)}`]: values() }),
      () => JSON.stringify({ userId: 'fuzz', ttlMs: values() }),
      () => JSON.stringify({ userId: 'fuzz', lifetimeMs: pick([0, -1, 1.5, 1e300, '10', null, 1e12]) }),
      () =>
        JSON.stringify({
          userId: 'fuzz',
          metadata: pick([
            [],
            'x',
            5,
            null,
            {
              deep: JSON.parse(
                nested(40).replace(/\[/g, '[').length > 0 ? '{"a":'.repeat(40) + '1' + '}'.repeat(40) : '{}',
              ),
            },
          ]),
        }),
      () => JSON.stringify({ userId: 'f'.repeat(129) }),
      () => 'x'.repeat(70_000),
      () => Buffer.from([0xff, 0xfe, 0x00, 0x41]).toString('latin1'),
    ])();
  const paths = [
    '/v1/tokens',
    '/v1/spawn',
    '/v1/users/fuzz/session',
    '/v1/users/fuzz/history',
    () => `/v1/users/${encodeURIComponent(pick(weird))}/session`,
    () => `/v1/users/${pick(weird).replace(/[%#?]/g, '')}/history`,
    () => `/v1/${pick(weird)}`,
    () => `/v1/tokens?${pick(weird)}=${pick(weird)}`,
    '/v1/users//session',
    '/v1/users/%E0%A4%A/session',
    '/%2e%2e/%2e%2e/etc/passwd',
    () => '/' + 'a/'.repeat(int(500)),
  ];
  const contentTypes = [
    'application/json',
    'application/json; charset=utf-8',
    'text/plain',
    'application/x-www-form-urlencoded',
    'multipart/form-data; boundary=x',
    'application/xml',
    '',
    'application/json; charset=latin1',
  ];
  // Every request with the real key is malformed by construction, so none of them may change anything.
  const auths = [
    '',
    'Bearer',
    'Bearer ',
    `Bearer ${TEST_API_KEY}x`,
    'Basic Zm9vOmJhcg==',
    `bearer ${'k'.repeat(9000)}`,
    `Bearer ${TEST_API_KEY}`,
  ];
  return Array.from({ length: count }, () => {
    const method = pick(['GET', 'POST', 'POST', 'POST', 'DELETE', 'PUT', 'PATCH', 'OPTIONS', 'HEAD']);
    const chosen = pick(paths);
    const path = typeof chosen === 'function' ? chosen() : chosen;
    const headers: Record<string, string> = {};
    const contentType = pick(contentTypes);
    if (contentType !== '') headers['content-type'] = contentType;
    let auth = pick(auths);
    // With the real key a DELETE of the session would be a valid request: those are not fuzz.
    if (auth === `Bearer ${TEST_API_KEY}` && method === 'DELETE') auth = `Bearer ${TEST_API_KEY}x`;
    if (auth !== '') headers['authorization'] = auth;
    // A HEAD request with a body confuses Node's own client parser, not the server: no body there.
    const body = method === 'HEAD' ? undefined : bodies();
    return { method, path, headers, ...(body === undefined ? {} : { body }) };
  });
}

const DEEP_SEED = 20260126;

/**
 * Random deep and wide JSON texts (seeded): a chain of objects and arrays, each level with a few
 * siblings (numbers, strings full of brackets, quotes and escapes, empty containers), built as text
 * without recursion. Depths from 1 to 100,000 (log-uniform); the wider, the shallower, so most fit in 64 KiB.
 */
function deepWideBodies(count: number): Array<{ text: string; depth: number }> {
  const random = prng(DEEP_SEED);
  const int = (n: number) => Math.floor(random() * n);
  const scalars = [
    '1',
    '-0.5e3',
    'true',
    'null',
    '""',
    JSON.stringify('[{"}]\\'),
    JSON.stringify('\u0000{{['),
    JSON.stringify('😀]'),
    '[]',
    '{}',
    '[[],{}]',
  ];
  return Array.from({ length: count }, () => {
    const depth = Math.max(1, Math.floor(Math.exp(random() * Math.log(100_000))));
    const width = depth > 1000 ? int(2) : int(8);
    const open: string[] = [];
    const close: string[] = [];
    for (let level = 0; level < depth; level++) {
      const siblings = Array.from({ length: int(width + 1) }, () => scalars[int(scalars.length)]!);
      if (level === 0 && random() < 0.5) {
        // Everything below is a token's metadata (JSON.stringify'd by its size check).
        open.push('{"userId":"deep","metadata":');
        close.push('}');
      } else if (random() < 0.5) {
        open.push('{' + siblings.map((v, i) => `"k${i}":${v},`).join('') + '"n":');
        close.push('}');
      } else {
        open.push('[' + siblings.map((v) => `${v},`).join(''));
        close.push(']');
      }
    }
    return { text: open.join('') + scalars[int(scalars.length)] + close.reverse().join(''), depth };
  });
}

/**
 * Raw HTTP, so paths and headers go out exactly as generated (fetch would normalise them). A server
 * may answer (413, 401, 404) and close before it has read a body the client is still writing: Node's
 * client then reports the closed socket instead of the status. Those count as -1; the test checks
 * the server's own log for errors instead, and that it still answers.
 */
function raw(
  baseUrl: string,
  c: { method: string; path: string; headers: Record<string, string>; body?: string },
): Promise<number> {
  const url = new URL(baseUrl);
  return new Promise((resolve, reject) => {
    // Node's client refuses characters outside U+0021..U+00FF in a path; send those percent-encoded.
    const path = c.path.replace(/[^\u0021-\u00ff]/gu, (ch) => encodeURIComponent(ch));
    // A kept-alive connection of its own per request: the server then reads a body it did not need
    // before answering, instead of closing on it, and a socket it closed (after a 413) is never reused.
    const agent = new Agent({ keepAlive: true, maxSockets: 1 });
    const req = request(
      { host: url.hostname, port: url.port, method: c.method, path, headers: c.headers, agent },
      (res) => {
        res.resume();
        res.on('end', () => {
          agent.destroy();
          resolve(res.statusCode ?? 0);
        });
      },
    );
    req.on('error', (err: NodeJS.ErrnoException) => {
      agent.destroy();
      if (['ECONNRESET', 'EPIPE', 'HPE_CLOSED_CONNECTION'].includes(err.code ?? '') && (c.body ?? '').length > 0)
        resolve(-1);
      else
        reject(
          new Error(
            `${err.code} for ${c.method} ${c.path.slice(0, 80)} ${JSON.stringify(c.headers).slice(0, 200)} body ${(c.body ?? '').length}: ${(c.body ?? '').slice(0, 60)}`,
          ),
        );
    });
    if (c.body !== undefined) req.end(c.body);
    else req.end();
  });
}

/**
 * Every key of the prefix and its value, as one digest; but the dashboard's per-minute counters
 * (`{stats}`), which count every request, fuzzed ones too, and are flushed by a timer.
 */
async function snapshot(redis: Redis, prefix: string): Promise<string> {
  const keys: string[] = [];
  let cursor = '0';
  do {
    const [next, batch] = await redis.scan(cursor, 'MATCH', `${prefix}:*`, 'COUNT', 1000);
    cursor = next;
    keys.push(...batch.filter((key) => !key.startsWith(`${prefix}:{stats}:`)));
  } while (cursor !== '0');
  keys.sort();
  const hash = createHash('sha256');
  for (const key of keys) hash.update(key).update((await redis.dumpBuffer(key)) ?? Buffer.alloc(0));
  return `${keys.length}:${hash.digest('hex')}`;
}

describe('fuzz', async () => {
  const api = await startTestApi({ TOKEN_LIMIT: '1000' });
  const redis = new Redis(inject('redisUrl'));
  cleanUp(() => redis.disconnect());

  it(`2,000 random and malformed requests (seed ${SEED}): no 5xx, no crash, Redis unchanged`, async () => {
    // Some state to damage: a live session and a token.
    await api.client.spawn((await api.client.issueToken({ userId: 'fuzz' })).token);
    await api.client.issueToken({ userId: 'fuzz' });
    const before = await snapshot(redis, api.config.keyPrefix);
    const cases = fuzzCases(2000);
    const statuses = new Map<number, number>();
    for (let i = 0; i < cases.length; i += 50) {
      const batch = await Promise.all(cases.slice(i, i + 50).map((c) => raw(api.baseUrl, c)));
      for (const status of batch) statuses.set(status, (statuses.get(status) ?? 0) + 1);
    }
    const serverErrors = [...statuses].filter(([status]) => status >= 500 || status === 0);
    expect(serverErrors, JSON.stringify(Object.fromEntries(statuses))).toEqual([]);
    expect([...statuses.keys()].every((s) => (s >= 200 && s < 500) || s === -1)).toBe(true);
    expect(statuses.get(-1) ?? 0, 'answers lost to a closed socket').toBeLessThan(100);
    expect(api.logs.filter((line) => Number(line['level']) >= 50)).toEqual([]);
    expect(await snapshot(redis, api.config.keyPrefix)).toBe(before);
    expect((await api.client.getSession('fuzz')).state).toBe('pending');
    expect(await api.client.ready()).toBe(true);
  });

  it(`300 random deep and wide JSON bodies (seed ${DEEP_SEED}) on the routes that take one: no 5xx, too deep is 400`, async () => {
    const routes: Array<[string, string]> = [
      ['POST', '/v1/tokens'],
      ['POST', '/v1/spawn'],
      ['PATCH', '/v1/users/deep/session'],
      ['DELETE', '/v1/users/deep/session'],
      ['POST', '/v1/users/deep/session/activity'],
      ['POST', '/v1/hosts/deep-host/drain'],
      ['POST', '/v1/webhooks'],
    ];
    const statuses = new Map<number, number>();
    for (const [i, { text, depth }] of deepWideBodies(300).entries()) {
      const [method, path] = routes[i % routes.length]!;
      const withKey = i % 3 !== 0;
      const res = await send(api.baseUrl, method, path, {
        body: text,
        headers: {
          'content-type': 'application/json',
          ...(withKey ? { authorization: `Bearer ${TEST_API_KEY}` } : {}),
        },
      });
      statuses.set(res.status, (statuses.get(res.status) ?? 0) + 1);
      const what = `${method} ${path} depth ${depth}, ${text.length} bytes: ${text.slice(0, 60)}`;
      expect(res.status, what).toBeLessThan(500);
      if (res.status >= 400)
        expect(res.body.error, what).toEqual(
          expect.objectContaining({ code: expect.any(String), message: expect.any(String) }),
        );
      const needsKey = path !== '/v1/spawn';
      if (needsKey && !withKey) expect(res.status, what).toBe(401);
      else if (Buffer.byteLength(text) > 64 * 1024) expect(res.status, what).toBe(413);
      else if (depth > MAX_BODY_DEPTH) expect(res.body.error.message, what).toContain('levels deep');
    }
    // The cases reach every kind of answer they should.
    expect([...statuses.keys()].sort(), JSON.stringify(Object.fromEntries(statuses))).toEqual(
      expect.arrayContaining([400, 401, 413]),
    );
    expect(api.logs.filter((line) => Number(line['level']) >= 50)).toEqual([]);
  });
});
