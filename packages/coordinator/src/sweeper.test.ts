import { until, watchClient } from '@cq/test-harness';
import { describe, expect, inject, it, onTestFinished } from 'vitest';
import type { Coordinator } from './coordinator.js';
import type { Sweeper } from './sweeper.js';
import { connectionPool, coordinatorsOn, testCoordinator } from './test-support/setup.js';

// The sweeper as the API runs it: in turns, reading every slot once when it takes the turn, then only
// the slots it learns of from the event channel (and a few more in turn).
describe('sweeping in turns, from the event channel', () => {
  const policy = { tokenLimit: 10_000, spawnIntervalMs: 1, spawnBurst: 1000, pendingTimeoutMs: 150 };
  const base = testCoordinator({ policy });

  /** Sweepers of one deployment (one prefix), each on a connection of its own, started now. */
  function sweepers(n: number, options: { scanSlotsPerSweep?: number } = {}): Array<{ c: Coordinator; s: Sweeper }> {
    const all = coordinatorsOn(connectionPool(n), base).map((c) => ({
      c,
      s: c.sweeper({ intervalMs: 100, ...options }),
    }));
    for (const { s } of all) s.start();
    onTestFinished(() => Promise.all(all.map(({ s }) => s.stop())).then(() => undefined));
    return all;
  }

  async function admitUnclaimed(userId: string): Promise<string> {
    const issued = await base.tokens.issue(userId);
    if (issued.outcome !== 'issued') throw new Error('throttled');
    const admitted = await base.sessions.admit(issued.token);
    if (admitted.outcome !== 'admitted') throw new Error(`not admitted: ${admitted.outcome}`);
    return admitted.sessionId;
  }

  const endedLost = async (userId: string, sessionId: string): Promise<boolean> =>
    (await base.sessions.history(userId)).some((h) => h.sessionId === sessionId && h.state === 'lost');

  it('of three sweepers one holds the turn and keeps it, reading every slot once; when it stops another takes over', async () => {
    const group = sweepers(3);
    await until(() => group.reduce((n, { s }) => n + s.sweeps, 0) >= 10, 10_000, 'ten sweeps');
    const holders = group.filter(({ s }) => s.sweeps > 0);
    expect(holders).toHaveLength(1);
    const holder = holders[0]!.s;
    expect(holder.fullScans).toBe(1);
    expect(await base.redis.get(base.keys.sweepTurn())).toBe(holder.id);

    await holder.stop();
    const rest = group.map(({ s }) => s).filter((s) => s !== holder);
    await until(() => rest.some((s) => s.sweeps > 0), 5000, 'another sweeper taking the turn');
    const next = rest.find((s) => s.sweeps > 0)!;
    expect(next.fullScans).toBe(1);
    const sweepsThen = holder.sweeps;
    await until(() => next.sweeps >= 5, 5000, 'five sweeps of the new holder');
    expect(rest.filter((s) => s.sweeps > 0)).toEqual([next]);
    expect(holder.sweeps).toBe(sweepsThen);
  });

  it('the holder learns of a new session from its event, ends it lost when overdue, and reads only the slots it tracks', async () => {
    const { c, s } = sweepers(1, { scanSlotsPerSweep: 16 })[0]!;
    await until(() => s.fullScans === 1, 5000, 'the first full read');
    const watched = await watchClient(c.redis as never, inject('redisUrl'));
    onTestFinished(() => watched.stop());
    const sweepsBefore = s.sweeps;

    const sessionId = await admitUnclaimed('tracked-user');
    await until(() => s.trackedSlots >= 1, 2000, 'the slot tracked from its pending event');
    await until(() => endedLost('tracked-user', sessionId), 5000, 'the unclaimed session ended lost');
    // Found empty once the session ended, the slot is forgotten (unless other events of it came).
    await until(() => s.trackedSlots === 0, 2000, 'the empty slot forgotten');
    await watched.settle();
    const sweeps = s.sweeps - sweepsBefore;
    const reads = watched.seen.filter((cmd) => cmd.args[0]?.toLowerCase() === 'zrange').length;
    expect(s.fullScans).toBe(1);
    expect(sweeps).toBeGreaterThan(0);
    // Each sweep reads the 16 slots of the rolling read and the tracked slot at most: never all 16384.
    expect(reads).toBeLessThanOrEqual((sweeps + 1) * 17);
  });

  it('a lost event subscription: the holder subscribes again and reads every slot again, so a session admitted meanwhile is still swept', async () => {
    const { s } = sweepers(1, { scanSlotsPerSweep: 1 })[0]!;
    await until(() => s.fullScans === 1, 5000, 'the first full read');
    // Kill the sweeper's subscription (other files' sweepers of the shared Redis just read again too).
    const clients = (await base.redis.client('LIST')) as string;
    const ids = [...clients.matchAll(/^id=(\d+) .* name=cq-sweep /gm)].map((m) => m[1]!);
    expect(ids.length).toBeGreaterThan(0);
    for (const id of ids) await base.redis.client('KILL', 'ID', id);
    const sessionId = await admitUnclaimed('missed-user');
    await until(() => s.fullScans === 2, 5000, 'a second full read');
    await until(() => endedLost('missed-user', sessionId), 5000, 'the session ended lost');
  });
});
