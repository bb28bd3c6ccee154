import { describe, expect, it } from 'vitest';
import { connectionPool, coordinatorsOn, elapse, issueAndAdmit, testCoordinator } from './test-support/setup.js';

const HOLD_MS = 60_000;

describe('worker capacity', () => {
  it('500 simultaneous reservations on 50 free slots: exactly 50 are held, 5 times over, and all come back', async () => {
    const coordinator = testCoordinator();
    const callers = coordinatorsOn(connectionPool(50), coordinator);
    await coordinator.workers.heartbeat({ workerId: 'big-a', slots: 30, busy: 0, startedAt: 1 }, 60_000);
    await coordinator.workers.heartbeat({ workerId: 'big-b', slots: 20, busy: 0, startedAt: 1 }, 60_000);
    for (let round = 0; round < 5; round++) {
      const ids = Array.from({ length: 500 }, (_, i) => `r${round}-s${i}`);
      const outcomes = await Promise.all(
        ids.map((id, i) => callers[i % callers.length]!.workers.reserve(id, HOLD_MS, true)),
      );
      const held = ids.filter((_, i) => outcomes[i]!.outcome === 'reserved');
      expect(held).toHaveLength(50);
      expect(outcomes.filter((o) => o.outcome === 'no_capacity')).toHaveLength(450);
      expect(await coordinator.workers.capacity()).toEqual({ total: 50, held: 50, free: 0 });
      expect(await coordinator.workers.release(held)).toBe(50);
      expect(await coordinator.workers.capacity()).toEqual({ total: 50, held: 0, free: 50 });
    }
  });

  it('without enforcement a slot is held beyond capacity, and free slots never read below 0', async () => {
    const coordinator = testCoordinator();
    await coordinator.workers.heartbeat({ workerId: 'one', slots: 1, busy: 0, startedAt: 1 }, 60_000);
    expect(await coordinator.workers.reserve('a', HOLD_MS, true)).toEqual({ outcome: 'reserved', free: 0, total: 1 });
    expect(await coordinator.workers.reserve('b', HOLD_MS, true)).toEqual({ outcome: 'no_capacity', total: 1 });
    expect(await coordinator.workers.reserve('b', HOLD_MS, false)).toMatchObject({ outcome: 'reserved', free: 0 });
    expect(await coordinator.workers.capacity()).toEqual({ total: 1, held: 2, free: 0 });
  });

  it("a pending session stopped through the coordinator gives its slot back at once; a running one's stays its host's", async () => {
    const coordinator = testCoordinator({ policy: { spawnIntervalMs: 1, spawnBurst: 100, tokenLimit: 10_000 } });
    await coordinator.workers.heartbeat({ workerId: 'stops', slots: 3, busy: 0, startedAt: 1 }, 60_000);
    const held = async (userId: string) => {
      const admitted = await issueAndAdmit(coordinator, userId);
      expect(await coordinator.workers.reserve(admitted.sessionId, HOLD_MS, true)).toMatchObject({
        outcome: 'reserved',
      });
      return admitted;
    };
    const one = await held('stop-one');
    await held('stop-bulk');
    const running = await held('stop-running');
    const claimed = await coordinator.claims.claim(running, { workerId: 'stops', leaseMs: 60_000, graceMs: 500 });
    expect(claimed.claimed).toBe(true);
    expect(await coordinator.workers.capacity()).toEqual({ total: 3, held: 3, free: 0 });

    // No HTTP route in between: the coordinator's own stop gives the hold back.
    expect(await coordinator.sessions.requestStop('stop-one')).toMatchObject({
      outcome: 'stopped',
      sessionId: one.sessionId,
    });
    expect(await coordinator.workers.capacity()).toEqual({ total: 3, held: 2, free: 1 });
    expect(await coordinator.sessions.stopMatching({ userId: 'stop-bulk' })).toMatchObject({
      matched: 1,
      stopping: 1,
    });
    expect(await coordinator.workers.capacity()).toEqual({ total: 3, held: 1, free: 2 });
    // A running session is only asked to stop: its slot is its host's until the host reports it ended.
    expect(await coordinator.sessions.requestStop('stop-running')).toMatchObject({ outcome: 'stopping' });
    expect(await coordinator.workers.capacity()).toEqual({ total: 3, held: 1, free: 2 });
  });

  it('with no live host nothing can be held', async () => {
    const coordinator = testCoordinator();
    expect(await coordinator.workers.reserve('x', HOLD_MS, true)).toEqual({ outcome: 'no_capacity', total: 0 });
  });

  it("a host's heartbeat renews the holds of its sessions and gives back those it ended", async () => {
    const coordinator = testCoordinator();
    const beat = (running: string[], ended: string[] = []) =>
      coordinator.workers.heartbeat(
        { workerId: 'h', slots: 3, busy: running.length, startedAt: 1, running, ended },
        300,
      );
    await beat([]);
    // Held briefly at admission (as if the API died before the hand-off); the host's beats keep s1 held.
    await coordinator.workers.reserve('s1', 150, true);
    await coordinator.workers.reserve('s2', 150, true);
    await beat(['s1']);
    await elapse(200);
    await beat(['s1']);
    expect(await coordinator.workers.capacity()).toEqual({ total: 3, held: 1, free: 2 });
    await beat([], ['s1']);
    expect(await coordinator.workers.capacity()).toEqual({ total: 3, held: 0, free: 3 });
  });

  it('a host whose heartbeat runs out leaves the capacity with its holds, and comes back with its next beat', async () => {
    const coordinator = testCoordinator();
    const beat = () =>
      coordinator.workers.heartbeat({ workerId: 'gone', slots: 2, busy: 1, startedAt: 1, running: ['s'] }, 150);
    await beat();
    await coordinator.workers.heartbeat({ workerId: 'stays', slots: 1, busy: 0, startedAt: 1 }, 60_000);
    expect(await coordinator.workers.capacity()).toEqual({ total: 3, held: 1, free: 2 });
    await elapse(200);
    expect(await coordinator.workers.capacity()).toEqual({ total: 1, held: 0, free: 1 });
    await beat();
    expect(await coordinator.workers.capacity()).toEqual({ total: 3, held: 1, free: 2 });
  });

  it('draining: the free slots leave at once, the host hears it at its next beat, and a new process starts active', async () => {
    const coordinator = testCoordinator();
    const beat = (running: string[], startedAt = 1) =>
      coordinator.workers.heartbeat({ workerId: 'd', slots: 4, busy: running.length, startedAt, running }, 60_000);
    expect(await beat(['s1', 's2'])).toBe('active');
    expect(await coordinator.workers.capacity()).toEqual({ total: 4, held: 2, free: 2 });
    expect(await coordinator.workers.drain('d')).toMatchObject({ workerId: 'd', state: 'draining', slots: 4, busy: 2 });
    expect(await coordinator.workers.capacity()).toEqual({ total: 2, held: 2, free: 0 });
    expect((await coordinator.workers.list())[0]).toMatchObject({ workerId: 'd', state: 'draining' });
    expect(await beat(['s1'])).toBe('draining');
    expect(await coordinator.workers.capacity()).toEqual({ total: 1, held: 2, free: 0 });
    await coordinator.workers.withdraw('d', ['s1', 's2']);
    expect(await coordinator.workers.capacity()).toEqual({ total: 0, held: 0, free: 0 });
    expect(await beat([], 2)).toBe('active');
    expect(await coordinator.workers.capacity()).toEqual({ total: 4, held: 0, free: 4 });
    expect(await coordinator.workers.drain('nobody')).toBeUndefined();
  });

  it('per pool, under real concurrency: 300 spawns for pool a with 20 free and 300 for pool b with 40 free hold exactly 20 and 40', async () => {
    const coordinator = testCoordinator();
    const callers = coordinatorsOn(connectionPool(40), coordinator);
    await coordinator.workers.heartbeat({ workerId: 'a-1', slots: 12, busy: 0, startedAt: 1, pool: 'a' }, 60_000);
    await coordinator.workers.heartbeat({ workerId: 'a-2', slots: 8, busy: 0, startedAt: 1, pool: 'a' }, 60_000);
    await coordinator.workers.heartbeat({ workerId: 'b-1', slots: 40, busy: 0, startedAt: 1, pool: 'b' }, 60_000);
    const ids = Array.from({ length: 600 }, (_, i) => `p${i}`);
    const pool = (i: number): string => (i % 2 === 0 ? 'a' : 'b');
    const outcomes = await Promise.all(
      ids.map((id, i) => callers[i % callers.length]!.workers.reserve(id, HOLD_MS, true, pool(i))),
    );
    const held = (p: string) => ids.filter((_, i) => pool(i) === p && outcomes[i]!.outcome === 'reserved');
    expect(held('a')).toHaveLength(20);
    expect(held('b')).toHaveLength(40);
    expect(await coordinator.workers.capacity('a')).toEqual({ total: 20, held: 20, free: 0 });
    expect(await coordinator.workers.capacity('b')).toEqual({ total: 40, held: 40, free: 0 });
    // The pool default has no host: nothing is held there, whatever the others hold.
    expect(await coordinator.workers.capacity()).toEqual({ total: 0, held: 0, free: 0 });
    expect(await coordinator.workers.reserve('d', HOLD_MS, true)).toEqual({ outcome: 'no_capacity', total: 0 });
    // A slot of a given back in a, and only there.
    expect(await coordinator.workers.release(held('a').slice(0, 1), 'a')).toBe(1);
    expect((await coordinator.workers.capacity('a')).free).toBe(1);
    expect((await coordinator.workers.capacity('b')).free).toBe(0);
    expect(await coordinator.workers.pools()).toEqual([
      { pool: 'a', hosts: 2, slots: 20, busy: 0, held: 19, free: 1 },
      { pool: 'b', hosts: 1, slots: 40, busy: 0, held: 40, free: 0 },
    ]);
  });

  it('a host restarted under the same id in another pool moves its slots with it; draining keeps its pool', async () => {
    const coordinator = testCoordinator();
    await coordinator.workers.heartbeat({ workerId: 'mover', slots: 5, busy: 0, startedAt: 1, pool: 'cpu' }, 60_000);
    expect((await coordinator.workers.capacity('cpu')).total).toBe(5);
    await coordinator.workers.heartbeat({ workerId: 'mover', slots: 3, busy: 0, startedAt: 2, pool: 'gpu' }, 60_000);
    expect((await coordinator.workers.capacity('cpu')).total).toBe(0);
    expect((await coordinator.workers.capacity('gpu')).total).toBe(3);
    expect(await coordinator.workers.drain('mover')).toMatchObject({ state: 'draining', pool: 'gpu' });
    expect((await coordinator.workers.capacity('gpu')).total).toBe(0);
    await coordinator.workers.withdraw('mover', [], 'gpu');
    expect(await coordinator.workers.pools()).toEqual([]);
  });
});
