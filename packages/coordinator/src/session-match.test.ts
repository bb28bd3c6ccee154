import { until } from '@cq/test-harness';
import { describe, expect, it } from 'vitest';
import { InvalidArgumentError } from './errors.js';
import type { Claim } from './session-types.js';
import { issueAndAdmit, redisNow, testCoordinator } from './test-support/setup.js';

const worker = { workerId: 'host-a', leaseMs: 10_000, graceMs: 1000 };

describe('a change that names its session (?sessionId=) acts on that session only', () => {
  const coordinator = testCoordinator({
    policy: { tokenLimit: 10_000, spawnIntervalMs: 1, spawnBurst: 1000, maxLifetimeMs: 60_000 },
  });
  const { sessions, claims } = coordinator;

  async function running(userId: string): Promise<Claim> {
    const outcome = await claims.claim(await issueAndAdmit(coordinator, userId), worker);
    if (!outcome.claimed) throw new Error(`not claimed: ${outcome.reason}`);
    return outcome.claim;
  }

  /** A user whose first session ended and whose second (the successor) now runs. */
  async function replaced(userId: string): Promise<{ stale: string; successor: Claim }> {
    const first = await running(userId);
    await sessions.requestStop(userId);
    expect(await claims.finish(first, 'stopped', 0)).toBe(true);
    return { stale: first.sessionId, successor: await running(userId) };
  }

  /** Every field of the user's session and lease hashes, as Redis holds them. */
  async function records(userId: string): Promise<Array<Record<string, string>>> {
    const keys = coordinator.keys.user(userId);
    return [await coordinator.redis.hgetall(keys.session), await coordinator.redis.hgetall(keys.lease)];
  }

  it('a stale sessionId after the session was replaced does not stop, extend or mark activity on the successor', async () => {
    const { stale, successor } = await replaced('match-stale');
    const before = await records('match-stale');
    // Time moves on, so an activity recorded now would show in the records.
    const act = Number(before[0]!['act']);
    await until(async () => (await redisNow(coordinator)) > act, 1000, 'the Redis clock passing the last activity');

    const mismatch = { outcome: 'session_mismatch', sessionId: stale, liveSessionId: successor.sessionId };
    expect(await sessions.requestStop('match-stale', { sessionId: stale })).toEqual(mismatch);
    expect(await sessions.setLifetime('match-stale', 1000, undefined, { sessionId: stale })).toEqual(mismatch);
    expect(await sessions.recordActivity('match-stale', { sessionId: stale })).toEqual(mismatch);

    expect(await records('match-stale')).toEqual(before);
    expect(await sessions.settleAndRead('match-stale')).toMatchObject({
      sessionId: successor.sessionId,
      state: 'running',
      deadline: successor.deadline,
      lastActivityAt: act,
    });
    expect(await claims.renew(successor)).toMatchObject({
      ok: true,
      stopRequested: false,
      deadline: successor.deadline,
    });
  });

  it('naming the live session acts as without a name: activity, then the lifetime, then the stop', async () => {
    const { successor } = await replaced('match-live');
    const named = { sessionId: successor.sessionId };
    const act = successor.startedAt;
    await until(async () => (await redisNow(coordinator)) > act, 1000, 'the Redis clock passing the start');

    const recorded = await sessions.recordActivity('match-live', named);
    expect(recorded).toMatchObject({ outcome: 'recorded', sessionId: successor.sessionId, state: 'running' });
    expect(recorded.outcome === 'recorded' && recorded.lastActivityAt! > act).toBe(true);
    const changed = await sessions.setLifetime('match-live', 5000, undefined, named);
    expect(changed).toMatchObject({ outcome: 'changed', session: { sessionId: successor.sessionId } });
    expect(changed.outcome === 'changed' && changed.session.deadline! < successor.deadline).toBe(true);
    expect(await sessions.requestStop('match-live', named)).toEqual({
      outcome: 'stopping',
      sessionId: successor.sessionId,
      pool: 'default',
    });
  });

  it('a stale sessionId leaves a pending successor pending (a stop would end it at once)', async () => {
    const first = await running('match-pending');
    await sessions.requestStop('match-pending');
    expect(await claims.finish(first, 'stopped', 0)).toBe(true);
    const successor = await issueAndAdmit(coordinator, 'match-pending');
    const before = await records('match-pending');

    expect(await sessions.requestStop('match-pending', { sessionId: first.sessionId })).toEqual({
      outcome: 'session_mismatch',
      sessionId: first.sessionId,
      liveSessionId: successor.sessionId,
    });
    expect(await records('match-pending')).toEqual(before);
    expect(await sessions.settleAndRead('match-pending')).toMatchObject({
      sessionId: successor.sessionId,
      state: 'pending',
    });
    expect((await sessions.history('match-pending')).map((entry) => entry.sessionId)).toEqual([first.sessionId]);
  });

  it('with no live session, a named session is a mismatch (no live one), an unnamed one no_session', async () => {
    const first = await running('match-none');
    await sessions.requestStop('match-none');
    expect(await claims.finish(first, 'stopped', 0)).toBe(true);
    const named = { sessionId: first.sessionId };
    const mismatch = { outcome: 'session_mismatch', sessionId: first.sessionId };

    expect(await sessions.requestStop('match-none', named)).toEqual(mismatch);
    expect(await sessions.setLifetime('match-none', 1000, undefined, named)).toEqual(mismatch);
    expect(await sessions.recordActivity('match-none', named)).toEqual(mismatch);
    expect(await sessions.requestStop('match-none')).toEqual({ outcome: 'no_session' });
  });

  it('an empty or malformed sessionId is refused before anything is sent', async () => {
    await expect(sessions.requestStop('match-bad', { sessionId: '' })).rejects.toBeInstanceOf(InvalidArgumentError);
    await expect(sessions.recordActivity('match-bad', { sessionId: 'a{b}' })).rejects.toBeInstanceOf(
      InvalidArgumentError,
    );
  });
});
