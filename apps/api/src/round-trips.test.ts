import { cleanUp, watchClient } from '@cq/test-harness';
import type { Redis } from 'ioredis';
import { describe, expect, inject, it } from 'vitest';
import { jsonHeaders, send, startTestApi } from './test-support/app.js';

describe('spawn rejection paths', async () => {
  const api = await startTestApi({ TOKEN_LIMIT: '1000', SPAWN_INTERVAL_MS: '60000' });
  const watch = await watchClient(api.app.redis as Redis, inject('redisUrl'));
  const queueWatch = await watchClient(api.app.spawnQueues.all[0]!.opts.connection as Redis, inject('redisUrl'));
  cleanUp(async () => {
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

describe.each(['false', 'true'])('junk tokens from one address, TRUST_PROXY=%s', async (trustProxy) => {
  const api = await startTestApi({ TRUST_PROXY: trustProxy });
  // Behind a proxy every client arrives from the proxy's address; with TRUST_PROXY the address is the
  // forwarded one. Either way the junk and the valid token come from one address here.
  const from: Record<string, string> = trustProxy === 'true' ? { 'x-forwarded-for': '203.0.113.7' } : {};
  const spawn = async (token: string) =>
    (
      await fetch(`${api.baseUrl}/v1/spawn`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', ...from },
        body: JSON.stringify({ token }),
      })
    ).status;

  it('60 junk spawns are each refused 403, and a valid token from the same address is then admitted', async () => {
    const junk = Array.from(
      { length: 60 },
      (_, i) => `v1.${Buffer.from(`victim-${i}`).toString('base64url')}.${'B'.repeat(43)}`,
    );
    for (const token of junk) expect(await spawn(token)).toBe(403);
    const { token } = await api.client.issueToken({ userId: `valid-after-junk-${trustProxy}` });
    expect(await spawn(token)).toBe(202);
  });
});
