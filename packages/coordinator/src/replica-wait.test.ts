import { cleanUp, startRedisServer, type RedisServer, until } from '@cq/test-harness';
import { Redis } from 'ioredis';
import { beforeAll, describe, expect, it } from 'vitest';
import { Coordinator } from './coordinator.js';
import { issueAndAdmit } from './test-support/setup.js';
import type { ScriptName } from './script-loader.js';

describe('REDIS_WAIT_REPLICAS: every coordinator write waits for replicas (WAIT) in the same round trip', () => {
  const WAIT_MS = 400;
  let master: RedisServer;
  let replica: RedisServer;
  let masterClient: Redis;
  let replicaClient: Redis;
  let coordinator: Coordinator;
  const shortfalls: Array<[ScriptName, number]> = [];
  // WAIT with no write of the client's own answers at once; a real write proves the replica acknowledges.
  const acknowledged = async (): Promise<boolean> => (
    await masterClient.set('probe', '1'),
    (await masterClient.wait(1, 100)) === 1
  );

  beforeAll(async () => {
    // No 5 s pause before the first full sync (the default of repl-diskless-sync-delay).
    master = await startRedisServer({ args: ['--repl-diskless-sync-delay', '0'] });
    replica = await startRedisServer({ args: ['--replicaof', '127.0.0.1', String(master.port)] });
    masterClient = new Redis(master.url, { maxRetriesPerRequest: 1 });
    replicaClient = new Redis(replica.url, { maxRetriesPerRequest: 1 });
    await until(acknowledged, 10_000, 'the replica to sync and acknowledge writes');
    coordinator = new Coordinator({
      redis: masterClient,
      keyPrefix: 'wait',
      policy: { spawnIntervalMs: 1, spawnBurst: 100 },
      replicaWait: {
        replicas: 1,
        timeoutMs: WAIT_MS,
        onShortfall: (script, acknowledged) => shortfalls.push([script, acknowledged]),
      },
    });
  });
  cleanUp(async () => {
    const pid = replica?.pid();
    if (pid !== undefined) process.kill(pid, 'SIGCONT');
    await coordinator?.close();
    masterClient?.disconnect();
    replicaClient?.disconnect();
    await Promise.all([master?.stop(), replica?.stop()]);
  });

  const admit = (userId: string) => issueAndAdmit(coordinator, userId);

  it('an admission is on the replica when admit returns, even when the script cache was empty (EVAL fallback)', async () => {
    await masterClient.script('FLUSH');
    await admit('waited');
    // Read from the replica at once: WAIT returned only after the replica had the write.
    expect(await replicaClient.exists(coordinator.keys.user('waited').session)).toBe(1);
    expect(shortfalls).toEqual([]);
  });

  it('with the replica frozen, a write waits REDIS_WAIT_TIMEOUT_MS, still stands, and is reported as a shortfall', async () => {
    process.kill(replica.pid()!, 'SIGSTOP');
    try {
      const start = performance.now();
      const issued = await coordinator.tokens.issue('frozen');
      expect(performance.now() - start).toBeGreaterThanOrEqual(WAIT_MS - 5);
      expect(issued.outcome).toBe('issued');
      expect(shortfalls).toEqual([['issueToken', 0]]);
    } finally {
      process.kill(replica.pid()!, 'SIGCONT');
    }
    await until(acknowledged, 10_000, 'the replica to catch up');
    shortfalls.length = 0;
    await admit('thawed');
    expect(shortfalls).toEqual([]);
  });
});
