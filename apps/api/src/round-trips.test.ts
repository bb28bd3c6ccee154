import { watchClient } from '@cq/test-harness';
import type { Redis } from 'ioredis';
import { afterAll, describe, expect, inject, it } from 'vitest';
import { jsonHeaders, send, startTestApi } from './test-support/app.js';
import { setTimeout as sleep } from 'node:timers/promises';

describe('spawn rejection paths', async () => {
  const api = await startTestApi({ TOKEN_LIMIT: '1000', SPAWN_INTERVAL_MS: '60000' });
  const watch = await watchClient(api.app.redis as Redis, inject('redisUrl'));
  const queueWatch = await watchClient(api.app.spawnQueues.all[0]!.opts.connection as Redis, inject('redisUrl'));
  afterAll(async () => {
    await watch.stop();
    await queueWatch.stop();
  });
  const spawn = (token: string) =>
    send(api.baseUrl, 'POST', '/v1/spawn', { body: JSON.stringify({ token }), headers: jsonHeaders(false) });

  async function commandsFor(run: () => Promise<unknown>): Promise<string[]> {
    await watch.settle();
    await queueWatch.settle();
    const before = watch.seen.length;
    const queueBefore = queueWatch.seen.length;
    await run();
    await watch.settle();
    await queueWatch.settle();
    return [...watch.seen.slice(before), ...queueWatch.seen.slice(queueBefore)].map((s) => s.args[0]!.toLowerCase());
  }

  it('cost exactly one Redis command each (token_invalid, session_exists, throttled); a malformed token costs none', async () => {
    const first = (await api.client.issueToken({ userId: 'counted' })).token;
    const second = (await api.client.issueToken({ userId: 'counted' })).token;
    await spawn(first);

    const invalid = await commandsFor(async () => expect((await spawn(first)).status).toBe(403));
    const exists = await commandsFor(async () => expect((await spawn(second)).status).toBe(409));
    await api.client.stopSession('counted');
    const throttled = await commandsFor(async () => expect((await spawn(second)).status).toBe(429));
    const malformed = await commandsFor(async () => expect((await spawn('not-a-token')).status).toBe(403));

    for (const commands of [invalid, exists, throttled]) {
      expect(commands).toHaveLength(1);
      expect(['eval', 'evalsha']).toContain(commands[0]);
    }
    expect(malformed).toEqual([]);
  });
});

describe('guessing tokens from one address', async () => {
  const api = await startTestApi({ SPAWN_FAILURE_LIMIT: '3', SPAWN_FAILURE_WINDOW_MS: '800' });
  const watch = await watchClient(api.app.redis as Redis, inject('redisUrl'));
  afterAll(() => watch.stop());
  const guess = () =>
    send(api.baseUrl, 'POST', '/v1/spawn', {
      body: JSON.stringify({ token: `v1.${Buffer.from('victim').toString('base64url')}.${'B'.repeat(43)}` }),
      headers: jsonHeaders(false),
    });

  it('is refused with 429 once over the limit, without a Redis round trip, until the window has passed', async () => {
    for (let i = 0; i < 3; i++) expect((await guess()).status).toBe(403);
    await watch.settle();
    const before = watch.seen.length;
    const blocked = await guess();
    await watch.settle();
    expect(blocked.status).toBe(429);
    expect(blocked.body.error).toMatchObject({ code: 'throttled', retryAfterMs: expect.any(Number) });
    expect(Number(blocked.headers.get('retry-after'))).toBeGreaterThanOrEqual(1);
    expect(blocked.headers.get('ratelimit-policy')).toBe('"spawn-failures";q=3;w=1');
    expect(watch.seen.length - before).toBe(0);
    await sleep(blocked.body.error.retryAfterMs); // the claim is about this wait
    expect((await guess()).status).toBe(403);
  });
});
