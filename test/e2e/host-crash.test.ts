import type { Admission } from '@cq/client';
import { Keys } from '@cq/coordinator';
import { cleanUp, startRedisServer } from '@cq/test-harness';
import { describe, expect, it, onTestFinished } from 'vitest';
import { alive, ancestorsOf, sessionPids, startWorker, until } from '../support/processes.js';
import { startSystem } from '../support/system.js';

const LEASE_MS = 3000;

/** A worker host's heartbeat record lives 3 heartbeats (2 s each). */
const HEARTBEAT_TTL_MS = 6000;

describe('a worker host dies by SIGKILL', async () => {
  // The lease is under test: the users' next spawns are admitted (CAPACITY_CHECK=false) although the only
  // host is dead, and wait for the host started afterwards. How the dead host leaves the capacity is checked too.
  const system = await startSystem({
    apiEnv: { CAPACITY_CHECK: 'false' },
    workerEnv: { LEASE_MS: String(LEASE_MS), SESSION_GRACE_MS: '5000' },
  });
  const users = ['crash-a', 'crash-b', 'crash-c'];

  it('its session processes are gone within 2 s, the sessions end as lost, and the users can spawn again within LEASE_MS + 2 s', async () => {
    const admitted: Admission[] = [];
    for (const userId of users)
      admitted.push(await system.client.spawn((await system.client.issueToken({ userId })).token));
    await until(
      () => users.every((u) => system.observed().some((o) => o.userId === u)),
      10_000,
      'all sessions beating',
    );
    // Every user's session runs as processes of this host (its descendants), with that session's fence.
    const host = system.workers[0]!;
    const pidsOf = users.map((u, i) => sessionPids(u, admitted[i]!.fence));
    for (const [i, pids] of pidsOf.entries()) {
      expect(pids, `processes of ${users[i]}'s session`).not.toEqual([]);
      for (const pid of pids) expect(ancestorsOf(pid), `ancestors of ${pid}`).toContain(host.child.pid);
    }
    const pids = pidsOf.flat();

    const killedAt = performance.now();
    await host.stop('SIGKILL');
    // Waits longer than the bound, so that a miss says by how much; the bound is checked from the kill.
    await until(() => !pids.some(alive), LEASE_MS + 5000, 'session processes gone');
    expect(performance.now() - killedAt).toBeLessThanOrEqual(2000);
    // None left, also none started after the first look (a daemon, a child of the session).
    for (const [i, userId] of users.entries()) expect(sessionPids(userId, admitted[i]!.fence)).toEqual([]);

    // Each user can spawn again as soon as the dead host's lease has run out.
    const again = await Promise.all(
      users.map(async (userId) => {
        const { token } = await system.client.issueToken({ userId });
        await until(
          async () => {
            try {
              await system.client.spawn(token);
              return true;
            } catch {
              return false;
            }
          },
          LEASE_MS + 2000,
          `${userId} spawns again`,
        );
        return performance.now() - killedAt;
      }),
    );
    for (const ms of again) expect(ms).toBeLessThanOrEqual(LEASE_MS + 2000);
    for (const [i, userId] of users.entries()) {
      const entry = (await system.client.history(userId)).find((h) => h.sessionId === admitted[i]!.sessionId);
      expect(entry).toMatchObject({ state: 'lost', reason: 'host_lost', workerId: 'host-1' });
    }

    // The dead host leaves the capacity with its sessions' slots when its heartbeat runs out.
    await until(
      async () => (await system.client.hosts()).hosts.length === 0,
      HEARTBEAT_TTL_MS + 1000 - (performance.now() - killedAt),
      'the dead host no longer listed',
    );
    expect(performance.now() - killedAt).toBeLessThanOrEqual(HEARTBEAT_TTL_MS + 1000);

    // A new host takes the users' new sessions; its slots are the capacity now, less the three it runs.
    await system.addWorker('host-2');
    await until(async () => (await system.client.hosts()).freeSlots === 4 - 3, 5000, 'host-2 holds three slots');
    await until(
      () => users.every((u) => system.observed().some((o) => o.userId === u && o.fence === 2)),
      15_000,
      'new sessions beating',
    );
  });
});

describe('a worker host stops on SIGTERM', async () => {
  const system = await startSystem({ workerEnv: { LEASE_MS: String(LEASE_MS), SESSION_GRACE_MS: '1000' } });
  const redis = system.connect();
  cleanUp(() => redis.disconnect());

  it('stops its sessions (stopped), releases their leases, withdraws its heartbeat and exits 0', async () => {
    const keys = new Keys(system.keyPrefix);
    const users = ['calm-a', 'calm-b'];
    const admitted: Admission[] = [];
    for (const userId of users)
      admitted.push(
        await system.client.spawn(
          (await system.client.issueToken({ userId, metadata: { ignoreTerm: userId === 'calm-b' } })).token,
        ),
      );
    await until(() => users.every((u) => system.observed().some((o) => o.userId === u)), 10_000, 'sessions beating');
    expect(await redis.zrange(keys.workers(), 0, -1)).toEqual(['host-1']);
    const pidsOf = users.map((u, i) => sessionPids(u, admitted[i]!.fence));
    for (const [i, pids] of pidsOf.entries()) expect(pids, `processes of ${users[i]}'s session`).not.toEqual([]);
    const pids = pidsOf.flat();

    expect(await system.workers[0]!.stop('SIGTERM')).toBe(0);
    expect(pids.some(alive)).toBe(false);
    for (const [i, userId] of users.entries()) {
      const entry = (await system.client.history(userId))[0];
      expect(entry).toMatchObject({ sessionId: admitted[i]!.sessionId, state: 'stopped' });
      expect(await redis.exists(keys.user(userId).lease)).toBe(0);
      expect(await system.client.findSession(userId)).toBeUndefined();
    }
    expect(await redis.zrange(keys.workers(), 0, -1)).toEqual([]);
  });
});

describe('a worker host whose Redis is gone', () => {
  it('still exits 0 on SIGTERM, within SESSION_GRACE_MS + LEASE_MS + 2 s', async () => {
    const server = await startRedisServer();
    onTestFinished(() => server.stop());
    const worker = await startWorker({
      REDIS_URL: server.url,
      WORKER_ID: 'orphan',
      LEASE_MS: '1000',
      SESSION_GRACE_MS: '500',
    });
    await server.halt('SIGKILL');
    const start = performance.now();
    expect(await worker.stop('SIGTERM')).toBe(0);
    expect(performance.now() - start).toBeLessThan(500 + 1000 + 2000 + 1000);
  });
});
