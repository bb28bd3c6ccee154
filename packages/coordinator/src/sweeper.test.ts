import { until, watchClient } from '@cq/test-harness';
import { describe, expect, inject, it, onTestFinished } from 'vitest';
import type { Coordinator } from './coordinator.js';
import type { Sweeper } from './sweeper.js';
import { connectionPool, coordinatorsOn, issueAndAdmit, testCoordinator } from './test-support/setup.js';

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
    // Kill this sweeper's subscription, and no other's (other files' sweepers share this Redis).
    const clients = (await base.redis.client('LIST')) as string;
    const ids = [...clients.matchAll(new RegExp(`^id=(\\d+) .* name=cq-sweep:${s.id} `, 'gm'))].map((m) => m[1]!);
    expect(ids).toHaveLength(1);
    for (const id of ids) await base.redis.client('KILL', 'ID', id);
    const sessionId = await admitUnclaimed('missed-user');
    await until(() => s.fullScans === 2, 5000, 'a second full read');
    await until(() => endedLost('missed-user', sessionId), 5000, 'the session ended lost');
  });
});

// A running session's slot would otherwise be read every sweep: one command per session per interval.
describe('a tracked slot whose first entry is not due', () => {
  const base = testCoordinator({
    policy: { tokenLimit: 10_000, spawnIntervalMs: 1, spawnBurst: 1000, pendingTimeoutMs: 60_000 },
  });

  it('is read when its event comes, then not again until that entry is due or another event of the slot comes', async () => {
    const [c] = coordinatorsOn(connectionPool(1), base);
    const s = c!.sweeper({ intervalMs: 50, scanSlotsPerSweep: 0 });
    s.start();
    onTestFinished(() => s.stop());
    await until(() => s.fullScans === 1, 5000, 'the first full read');
    const watched = await watchClient(c!.redis as never, inject('redisUrl'));
    onTestFinished(() => watched.stop());
    const index = base.keys.user('not-due-user').liveIndex;
    const reads = (): number =>
      watched.seen.filter((cmd) => cmd.args[0]?.toLowerCase() === 'zrange' && cmd.args[1] === index).length;
    const issued = await base.tokens.issue('not-due-user');
    if (issued.outcome !== 'issued') throw new Error('throttled');
    const admitted = await base.sessions.admit(issued.token);
    if (admitted.outcome !== 'admitted') throw new Error(`not admitted: ${admitted.outcome}`);
    await until(() => s.trackedSlots === 1, 2000, 'the slot tracked from its pending event');
    const sweepsThen = s.sweeps;
    await until(() => s.sweeps >= sweepsThen + 10, 5000, 'ten more sweeps');
    await watched.settle();
    // Due in a minute (the pending timeout): read once, for its event, in ten sweeps.
    expect(reads()).toBe(1);
    // Another event of the slot (the pending session stopped): read again, found empty, forgotten.
    await base.sessions.requestStop('not-due-user');
    await until(() => s.trackedSlots === 0, 2000, 'the empty slot forgotten');
    await watched.settle();
    expect(reads()).toBe(2);
  });
});

// After an outage a sweep may find thousands of users due at once: it ends them a bounded number at a
// time, and a sweeper told to stop starts no more and waits for those it started.
describe('ending many due sessions in one sweep', () => {
  const base = testCoordinator({
    policy: { tokenLimit: 10_000, spawnIntervalMs: 1, spawnBurst: 1000, pendingTimeoutMs: 50 },
  });
  const DUE = 300;

  /** `DUE` users with an unclaimed session each, every one of them overdue (in the index, due now). */
  async function overdueUsers(tag: string): Promise<string[]> {
    const users = Array.from({ length: DUE }, (_, i) => `${tag}-${i}`);
    for (let i = 0; i < users.length; i += 50)
      await Promise.all(users.slice(i, i + 50).map((userId) => issueAndAdmit(base, userId)));
    const probe = base.sweeper();
    await until(async () => (await probe.dueUsers()).length >= DUE, 5000, 'every session due');
    return users;
  }

  /**
   * A coordinator of the same deployment whose sweeps' `sweepSession` calls are counted; each call
   * first waits for `gate(call)` (resolves at once unless given), then runs the real script on Redis.
   */
  function countedCoordinator(gate: (call: number) => Promise<void> = () => Promise.resolve()): {
    c: Coordinator;
    calls: { started: number; running: number; most: number };
  } {
    const [c] = coordinatorsOn(connectionPool(1), base);
    const calls = { started: 0, running: 0, most: 0 };
    const sweepUser = c!.sessions.sweepUser.bind(c!.sessions);
    c!.sessions.sweepUser = async (userId) => {
      const call = calls.started++;
      calls.most = Math.max(calls.most, ++calls.running);
      try {
        await gate(call);
        return await sweepUser(userId);
      } finally {
        calls.running--;
      }
    };
    return { c: c!, calls };
  }

  const lostCount = async (users: readonly string[]): Promise<number> =>
    (await Promise.all(users.map((u) => base.sessions.history(u)))).filter((h) => h[0]?.state === 'lost').length;

  it('at most `concurrency` sweepSession scripts run at once, and every due user is ended', async () => {
    const users = await overdueUsers('bounded');
    const { c, calls } = countedCoordinator();
    const result = await c.sweeper({ concurrency: 16 }).sweepOnce();
    expect(result).toEqual({ due: DUE, lost: DUE });
    expect(calls.started).toBe(DUE);
    expect(calls.most).toBe(16);
    expect(await lostCount(users)).toBe(DUE);
  });

  it('stop() during a sweep starts no more scripts, and returns only once every one started has ended, a failed one included', async () => {
    const users = await overdueUsers('stopped');
    const held: Array<{ release: () => void; fail: (err: Error) => void }> = [];
    const { c, calls } = countedCoordinator(
      (call) => new Promise<void>((release, fail) => (held[call] = { release: () => release(), fail })),
    );
    const errors: unknown[] = [];
    const s = c.sweeper({ intervalMs: 20, takeTurns: false, concurrency: 16, onError: (err) => errors.push(err) });
    s.start();
    await until(() => calls.running === 16, 10_000, 'the sweep running 16 scripts');

    let runningWhenStopped: number | undefined;
    const stopped = s.stop().then(() => (runningWhenStopped = calls.running));
    // One script fails: the sweep goes on waiting for the other 15, and starts no other.
    held[0]!.fail(new Error('Connection is closed.'));
    await until(() => calls.running === 15, 1000, 'the failed call ended');
    await new Promise((resolve) => setImmediate(resolve));
    expect(runningWhenStopped).toBeUndefined();
    expect(calls.started).toBe(16);

    for (const h of held.slice(1)) h.release();
    await stopped;
    expect(runningWhenStopped).toBe(0);
    expect(calls.started).toBe(16);
    expect(calls.most).toBe(16);
    expect(errors).toHaveLength(1);
    // The 15 that ran ended their users' sessions; the rest wait for the next sweep of any sweeper.
    expect(await lostCount(users)).toBe(15);
  });
});
