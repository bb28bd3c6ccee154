import { describe, expect, it } from 'vitest';
import { elapse, issueAndAdmit, testCoordinator } from '../test-support/setup.js';

const LEASE_MS = 300;
const worker = { workerId: 'h1', leaseMs: 60_000, graceMs: 500 };

describe('host leases', () => {
  it('a heartbeat takes the lease with a fresh token and renews it after; one that ran out is never renewed again', async () => {
    const c = testCoordinator();
    const beat = (token: string, fresh: boolean) =>
      c.workers.publish(
        { workerId: 'h1', slots: 1, busy: 0, startedAt: 1, lease: { token, ttlMs: LEASE_MS, fresh } },
        3000,
      );
    // Without the fresh flag a token the registry never saw is not taken: it may have been swept.
    expect(await beat('h1/a', false)).toMatchObject({ lease: 'lost' });
    expect(await beat('h1/b', true)).toMatchObject({ state: 'active', lease: 'held' });
    for (let i = 0; i < 3; i++) {
      await elapse(LEASE_MS / 2);
      expect(await beat('h1/b', false)).toMatchObject({ lease: 'held' });
    }
    await elapse(LEASE_MS + 50);
    expect(await beat('h1/b', false)).toMatchObject({ lease: 'lost' });
    // Not even as fresh: the lease is there, run out.
    expect(await beat('h1/b', true)).toMatchObject({ lease: 'lost' });
    // A heartbeat without a lease (a host from before host leases) leaves them alone.
    expect(await c.workers.publish({ workerId: 'h1', slots: 1, busy: 0, startedAt: 1 }, 3000)).toEqual({
      state: 'active',
      lease: undefined,
      nudged: [],
      gone: [],
    });
  });

  it('the sweep ends the sessions registered under a lease that ran out as lost (host_lost), leaves the others, and forgets the lease', async () => {
    const c = testCoordinator({ policy: { spawnIntervalMs: 1, spawnBurst: 100, tokenLimit: 10_000 } });
    const claimed = async (userId: string) => {
      const admission = await issueAndAdmit(c, userId);
      const outcome = await c.claims.claim(admission, worker);
      if (!outcome.claimed) throw new Error('not claimed');
      return outcome.claim;
    };
    const dead = await claimed('u-dead');
    const alive = await claimed('u-alive');
    // A session registered but still pending (its claim not through yet) is not ended by the lease.
    const pending = await issueAndAdmit(c, 'u-pending');
    const publish = (token: string, register: { sessionId: string; userId: string }[]) =>
      c.workers.publish(
        {
          workerId: token.split('/')[0]!,
          slots: 2,
          busy: 1,
          startedAt: 1,
          lease: { token, ttlMs: LEASE_MS, fresh: true, register },
        },
        3000,
      );
    await publish('h1/dies', [
      { sessionId: dead.sessionId, userId: 'u-dead' },
      { sessionId: pending.sessionId, userId: 'u-pending' },
    ]);
    await publish('h2/lives', [{ sessionId: alive.sessionId, userId: 'u-alive' }]);
    expect(await c.workers.leaseSessions('h1/dies')).toEqual({
      [dead.sessionId]: 'u-dead',
      [pending.sessionId]: 'u-pending',
    });
    const sweeper = c.sweeper({ takeTurns: false });
    expect(await sweeper.sweepHosts()).toBe(0);
    // h2 goes on renewing; h1 does not.
    const renewH2 = () =>
      c.workers.publish(
        {
          workerId: 'h2',
          slots: 2,
          busy: 1,
          startedAt: 1,
          lease: { token: 'h2/lives', ttlMs: LEASE_MS, fresh: false },
        },
        3000,
      );
    await elapse(LEASE_MS / 2);
    expect(await renewH2()).toMatchObject({ lease: 'held' });
    await elapse(LEASE_MS / 2 + 50);
    expect(await renewH2()).toMatchObject({ lease: 'held' });
    expect(await c.workers.expiredLeases()).toEqual(['h1/dies']);
    expect(await sweeper.sweepHosts()).toBe(1);
    expect(await c.sessions.history('u-dead')).toEqual([
      expect.objectContaining({ sessionId: dead.sessionId, state: 'lost', reason: 'host_lost', workerId: 'h1' }),
    ]);
    expect(await c.sessions.settleAndRead('u-alive')).toMatchObject({ sessionId: alive.sessionId, state: 'running' });
    expect(await c.sessions.settleAndRead('u-pending')).toMatchObject({
      sessionId: pending.sessionId,
      state: 'pending',
    });
    // Forgotten: found no more, its registrations gone; the user can spawn again at once.
    expect(await c.workers.expiredLeases()).toEqual([]);
    expect(await c.workers.leaseSessions('h1/dies')).toEqual({});
    await issueAndAdmit(c, 'u-dead');
    // Its host, back, finds its lease lost and its session's end recorded.
    expect(
      await c.workers.publish(
        { workerId: 'h1', slots: 2, busy: 1, startedAt: 1, lease: { token: 'h1/dies', ttlMs: LEASE_MS, fresh: false } },
        3000,
      ),
    ).toMatchObject({ lease: 'lost' });
    expect(await c.claims.finish(dead, 'lost')).toBe(false);
  });

  it('the sweep of a lease that ran out leaves a session registered under it that another, live host claimed', async () => {
    const c = testCoordinator();
    const admission = await issueAndAdmit(c, 'u-other-host');
    const outcome = await c.claims.claim(admission, { ...worker, workerId: 'h2' });
    if (!outcome.claimed) throw new Error('not claimed');
    // h1 registers the session all the same (a heartbeat registers whatever pairs its host sends), then dies.
    await c.workers.publish(
      {
        workerId: 'h1',
        slots: 1,
        busy: 1,
        startedAt: 1,
        lease: {
          token: 'h1/gone',
          ttlMs: LEASE_MS,
          fresh: true,
          register: [{ sessionId: admission.sessionId, userId: 'u-other-host' }],
        },
      },
      3000,
    );
    await elapse(LEASE_MS + 50);
    expect(await c.workers.expiredLeases()).toEqual(['h1/gone']);
    expect(await c.sweeper({ takeTurns: false }).sweepHosts()).toBe(0);
    expect(await c.sessions.settleAndRead('u-other-host')).toMatchObject({
      sessionId: admission.sessionId,
      state: 'running',
      workerId: 'h2',
    });
    expect(await c.sessions.history('u-other-host')).toEqual([]);
    // The lease is forgotten all the same, and h2 goes on with its session.
    expect(await c.workers.expiredLeases()).toEqual([]);
    expect(await c.claims.finish(outcome.claim, 'completed', 0)).toBe(true);
  });

  it('a clean withdrawal gives the lease and its registrations back', async () => {
    const c = testCoordinator();
    await c.workers.publish(
      {
        workerId: 'h1',
        slots: 1,
        busy: 1,
        startedAt: 1,
        lease: { token: 'h1/w', ttlMs: 60_000, fresh: true, register: [{ sessionId: 's', userId: 'u' }] },
      },
      3000,
    );
    await c.workers.withdraw('h1', ['s'], 'default', 'h1/w');
    expect(await c.redis.zscore(c.keys.hostLeases(), 'h1/w')).toBeNull();
    expect(await c.workers.leaseSessions('h1/w')).toEqual({});
  });
});
