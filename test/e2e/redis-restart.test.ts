import { startRedisServer } from '@cq/test-harness';
import { describe, expect, it, onTestFinished } from 'vitest';
import { jsonSpawn } from '../support/http.js';
import { alive, sessionPids, until } from '../support/processes.js';
import { startSystem } from '../support/system.js';
import { setTimeout as sleep } from 'node:timers/promises';

const LEASE_MS = 4000;

describe('Redis restarts with AOF everysec while tokens are outstanding and sessions run', () => {
  it.each(['SIGTERM', 'SIGKILL'] as const)(
    'after %s: used tokens stay used, sessions carry on or end as lost, API and hosts recover without a restart',
    async (signal) => {
      const server = await startRedisServer({ args: ['--appendonly', 'yes', '--appendfsync', 'everysec'] });
      onTestFinished(() => server.stop());
      const system = await startSystem({ redisUrl: server.url, workerEnv: { LEASE_MS: String(LEASE_MS) } });
      const { client } = system;

      const used = (await client.issueToken({ userId: 'aof-a' })).token;
      const outstanding = (await client.issueToken({ userId: 'aof-b' })).token;
      const running = await client.spawn(used);
      await until(async () => (await client.findSession('aof-a'))?.state === 'running', 10_000, 'running');
      // everysec: give the AOF a second to reach the disk before a crash.
      await sleep(1500);

      await server.halt(signal);
      await server.resume();
      await until(async () => (await fetch(`${system.api.baseUrl}/readyz`)).status === 200, 10_000, 'API ready again');

      // The used token is still used; the outstanding one still works.
      expect((await jsonSpawn(system.api.baseUrl, used)).status).toBe(403);
      expect((await jsonSpawn(system.api.baseUrl, outstanding)).status).toBe(202);

      // The running session either carried on (its host renewed the lease after the restart) or ended as lost.
      await until(
        async () => {
          const live = await client.findSession('aof-a');
          if (live?.sessionId === running.sessionId && live.state === 'running') return true;
          return (await client.history('aof-a')).some((h) => h.sessionId === running.sessionId && h.state === 'lost');
        },
        LEASE_MS + 5000,
        'session carried on or ended as lost',
      );
      // Whatever happened, the host keeps working: the other user's session runs.
      await until(
        () => system.observed().some((o) => o.userId === 'aof-b'),
        15_000,
        'new session running after the restart',
      );
      expect(sessionPids('aof-b').some(alive)).toBe(true);
    },
  );
});
