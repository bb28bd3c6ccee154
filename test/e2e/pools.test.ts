import { readFileSync, existsSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { API_KEY, startSystem } from '../support/system.js';
import { until } from '../support/processes.js';

/** `POST /v1/spawn` with `token`: status and body. */
async function spawnRaw(baseUrl: string, token: string): Promise<{ status: number; body: Record<string, never> }> {
  const res = await fetch(`${baseUrl}/v1/spawn`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ token }),
  });
  return { status: res.status, body: (await res.json()) as never };
}

describe('pools: one API, a host pool for each kind of session', () => {
  it('200 sessions over two pools: each ran on a host of its own pool (its command wrote which), none elsewhere', async () => {
    const system = await startSystem({ workers: 0 });
    // Each pool's own command: it writes the pool it is, the session's user, fence and SESSION_POOL to
    // the observer (the one thing of the host a session can write), whose log the test reads.
    const record = system.observerLog;
    const command = (pool: string) => `echo "${pool} $USER_ID $FENCE $SESSION_POOL" >> ${system.observerFile}`;
    await system.addWorker('host-cpu', { POOL: 'cpu', SLOTS: '20', SESSION_COMMAND: command('cpu') });
    await system.addWorker('host-gpu', { POOL: 'gpu', SLOTS: '10', SESSION_COMMAND: command('gpu') });
    const { client } = system;
    expect((await client.hosts()).hosts.map((h) => [h.workerId, h.pool]).sort()).toEqual([
      ['host-cpu', 'cpu'],
      ['host-gpu', 'gpu'],
    ]);

    const want = new Map<string, string>();
    for (let i = 0; i < 200; i++) want.set(`pool-user-${i}`, i % 3 === 0 ? 'gpu' : 'cpu');
    // Spawned in waves: a spawn refused for a full pool (503 no_capacity naming it) is asked again later.
    const left = new Set(want.keys());
    await until(
      async () => {
        await Promise.all(
          [...left].slice(0, 40).map(async (userId) => {
            const token = (await client.issueToken({ userId, pool: want.get(userId)! })).token;
            const answer = await spawnRaw(system.api.baseUrl, token);
            if (answer.status === 202) left.delete(userId);
            else
              expect(answer.body.error).toMatchObject({
                code: 'no_capacity',
                pool: want.get(userId),
                reason: 'pool_full',
              });
          }),
        );
        return left.size === 0;
      },
      120_000,
      'every session admitted',
    );
    await until(
      () => existsSync(record) && readFileSync(record, 'utf8').trim().split('\n').length >= 200,
      60_000,
      'every session ran',
    );
    const ran = readFileSync(record, 'utf8')
      .trim()
      .split('\n')
      .map((line) => line.split(' '));
    expect(ran).toHaveLength(200);
    for (const [hostPool, userId, , sessionPool] of ran) {
      expect(hostPool, userId).toBe(want.get(userId!));
      expect(sessionPool, userId).toBe(want.get(userId!));
    }
    const pools = (await fetch(`${system.api.baseUrl}/v1/pools`, {
      headers: { authorization: `Bearer ${API_KEY}` },
    }).then((r) => r.json())) as { pools: Array<{ pool: string; hosts: number; slots: number }> };
    expect(pools.pools.map((p) => [p.pool, p.hosts, p.slots])).toEqual([
      ['cpu', 1, 20],
      ['gpu', 1, 10],
    ]);

    // A pool no host serves (a mistyped name) is not a full one: it says so, and advises a longer wait.
    const token = (await client.issueToken({ userId: 'pool-typo', pool: 'tpu' })).token;
    const res = await fetch(`${system.api.baseUrl}/v1/spawn`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ token }),
    });
    expect(res.status).toBe(503);
    expect(res.headers.get('retry-after')).toBe('10');
    const { error } = (await res.json()) as { error: { code: string; pool: string; reason: string; message: string } };
    expect(error).toMatchObject({ code: 'no_capacity', pool: 'tpu', reason: 'pool_unserved' });
    expect(error.message).toMatch(/^No live worker host takes sessions of pool tpu /);
    // Nothing of it stays: no session, and the token still works once a host serves the pool.
    await expect(client.findSession('pool-typo')).resolves.toBeUndefined();
    await system.addWorker('host-tpu', { POOL: 'tpu', SLOTS: '1', SESSION_COMMAND: command('tpu') });
    expect((await spawnRaw(system.api.baseUrl, token)).status).toBe(202);
  });
});
