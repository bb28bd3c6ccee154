import { describe, expect, it } from 'vitest';
import { InvalidArgumentError } from './errors.js';
import type { LeaseLostError } from './liveness/keepalive.js';
import { LeaseField } from './records.js';
import type { Claim } from './session-types.js';
import { abortedWithin, elapse, issueAndAdmit, redisNow, testCoordinator } from './test-support/setup.js';

const worker = { workerId: 'host-a', leaseMs: 5000, graceMs: 1000 };

describe("changing a session's lifetime", () => {
  const coordinator = testCoordinator({
    policy: { tokenLimit: 10_000, spawnIntervalMs: 1, spawnBurst: 1000, maxLifetimeMs: 60_000 },
  });
  const { sessions, claims } = coordinator;

  async function running(userId: string, options = worker, lifetimeMs?: number): Promise<Claim> {
    const issued = await coordinator.tokens.issue(userId, lifetimeMs === undefined ? {} : { lifetimeMs });
    if (issued.outcome !== 'issued') throw new Error('throttled');
    const admitted = await sessions.admit(issued.token);
    if (admitted.outcome !== 'admitted') throw new Error(`not admitted: ${admitted.outcome}`);
    const outcome = await claims.claim(admitted, options);
    if (!outcome.claimed) throw new Error(`not claimed: ${outcome.reason}`);
    return outcome.claim;
  }

  const hardDeadline = async (userId: string): Promise<number> =>
    Number(await coordinator.redis.hget(coordinator.keys.user(userId).lease, LeaseField.hardDeadline));

  it('a running session now ends at now + lifetimeMs, and its lease hard deadline moves with it', async () => {
    const claim = await running('longer', worker, 10_000);
    expect(await hardDeadline('longer')).toBe(claim.deadline + worker.graceMs);
    const before = await redisNow(coordinator);
    const outcome = await sessions.setLifetime('longer', 50_000);
    const after = await redisNow(coordinator);
    if (outcome.outcome !== 'changed') throw new Error(outcome.outcome);
    const { deadline } = outcome.session;
    expect(deadline).toBeGreaterThanOrEqual(before + 50_000);
    expect(deadline).toBeLessThanOrEqual(after + 50_000);
    expect(deadline! - claim.deadline).toBeGreaterThanOrEqual(40_000);
    expect(outcome.session).toMatchObject({ state: 'running', lifetimeMs: deadline! - claim.startedAt });
    expect(await hardDeadline('longer')).toBe(deadline! + worker.graceMs);
    expect(await sessions.settleAndRead('longer')).toMatchObject({ deadline });

    // The owner learns both at its next renewal.
    const renewed = await claims.renew(claim);
    if (!renewed.ok) throw new Error(renewed.reason);
    expect(renewed.deadline).toBe(deadline);
    expect(renewed.lifetimeLeftMs).toBeLessThanOrEqual(50_000);
    expect(renewed.lifetimeLeftMs).toBeGreaterThan(49_000);
    expect(renewed.deadlineInMs).toBe(renewed.lifetimeLeftMs + worker.graceMs);
  });

  it('a shorter lifetime moves the hard deadline sooner; the lease is capped by it at the next renewal', async () => {
    const claim = await running('shorter');
    const outcome = await sessions.setLifetime('shorter', 500);
    if (outcome.outcome !== 'changed') throw new Error(outcome.outcome);
    const { deadline } = outcome.session;
    expect(deadline! - (await redisNow(coordinator))).toBeLessThanOrEqual(500);
    expect(await hardDeadline('shorter')).toBe(deadline! + worker.graceMs);
    // Until its owner hears of it, the lease keeps the life the owner knows of (a host cut off from
    // Redis now still kills its session before the lease runs out)...
    expect(await coordinator.redis.pttl(coordinator.keys.user('shorter').lease)).toBeGreaterThan(worker.graceMs + 500);
    // ...and the renewal that tells the owner caps it by the new hard deadline.
    const renewed = await claims.renew(claim);
    if (!renewed.ok) throw new Error(renewed.reason);
    expect(renewed.leaseExpiresAt).toBe(deadline! + worker.graceMs);
    expect(await coordinator.redis.pttl(coordinator.keys.user('shorter').lease)).toBeLessThanOrEqual(
      500 + worker.graceMs,
    );
  });

  it("the owner's keepalive aborts at the new, sooner hard deadline", async () => {
    const claim = await running('keepalive', { ...worker, graceMs: 300 });
    const keepalive = claims.keepalive(claim, { intervalMs: 100 });
    try {
      await sessions.setLifetime('keepalive', 200);
      // Hard deadline: 200 + 300 ms from now, long before the lease (5 s) or the old deadline (60 s).
      const tookMs = await abortedWithin(keepalive.signal);
      expect((keepalive.signal.reason as LeaseLostError).code).toBe('deadline_reached');
      expect(tookMs).toBeGreaterThanOrEqual(400);
      expect(tookMs).toBeLessThan(1500);
    } finally {
      keepalive.stop();
    }
  });

  it('beyond its start + the cap: lifetime_too_long with the largest lifetimeMs allowed, and nothing changes', async () => {
    const claim = await running('capped');
    await elapse(50); // the session has run a while: less than the whole cap is left
    const before = await redisNow(coordinator);
    const refused = await sessions.setLifetime('capped', 60_000);
    const after = await redisNow(coordinator);
    if (refused.outcome !== 'lifetime_too_long') throw new Error(refused.outcome);
    expect(refused.largestLifetimeMs).toBeLessThanOrEqual(claim.startedAt + 60_000 - before);
    expect(refused.largestLifetimeMs).toBeGreaterThanOrEqual(claim.startedAt + 60_000 - after);
    expect(refused.largestLifetimeMs).toBeLessThan(60_000);
    expect((await sessions.settleAndRead('capped'))?.deadline).toBe(claim.deadline);
    expect(await hardDeadline('capped')).toBe(claim.deadline + worker.graceMs);
    // The largest allowed (less the time the next call takes) is accepted and ends exactly at the cap or before.
    const outcome = await sessions.setLifetime('capped', refused.largestLifetimeMs - 100);
    if (outcome.outcome !== 'changed') throw new Error(outcome.outcome);
    expect(outcome.session.deadline).toBeLessThanOrEqual(claim.startedAt + 60_000);
  });

  it('a pending session gets the lifetime it will have once claimed, at most the cap', async () => {
    const admitted = await issueAndAdmit(coordinator, 'waiting');
    expect(await sessions.setLifetime('waiting', 60_001)).toEqual({
      outcome: 'lifetime_too_long',
      largestLifetimeMs: 60_000,
    });
    const outcome = await sessions.setLifetime('waiting', 1234);
    expect(outcome).toMatchObject({ outcome: 'changed', session: { state: 'pending', lifetimeMs: 1234 } });
    if (outcome.outcome === 'changed') expect(outcome.session.deadline).toBeUndefined();
    const claimed = await claims.claim(admitted, worker);
    if (!claimed.claimed) throw new Error(claimed.reason);
    expect(claimed.claim.lifetimeMs).toBe(1234);
    expect(claimed.claim.deadline - claimed.claim.startedAt).toBe(1234);
  });

  it('no live session: no_session, also when its host died (the session is first ended as lost)', async () => {
    expect(await sessions.setLifetime('nobody', 1000)).toEqual({ outcome: 'no_session' });
    const admitted = await issueAndAdmit(coordinator, 'dead-host');
    expect((await claims.claim(admitted, { ...worker, leaseMs: 80 })).claimed).toBe(true);
    await elapse(120); // the host "died": its lease is not renewed
    expect(await sessions.setLifetime('dead-host', 1000)).toEqual({ outcome: 'no_session' });
    expect((await sessions.history('dead-host'))[0]).toMatchObject({
      sessionId: admitted.sessionId,
      state: 'lost',
      reason: 'host_lost',
    });
  });

  it('a stopping session is left alone: its stop is under way', async () => {
    const claim = await running('stopping');
    await sessions.requestStop('stopping');
    expect(await sessions.setLifetime('stopping', 1000)).toEqual({ outcome: 'stopping', sessionId: claim.sessionId });
    expect((await sessions.settleAndRead('stopping'))?.deadline).toBe(claim.deadline);
  });

  it('refuses a lifetime that is not a positive integer without a round trip', async () => {
    await expect(sessions.setLifetime('anyone', 0)).rejects.toBeInstanceOf(InvalidArgumentError);
    await expect(sessions.setLifetime('anyone', 1.5)).rejects.toBeInstanceOf(InvalidArgumentError);
  });
});
