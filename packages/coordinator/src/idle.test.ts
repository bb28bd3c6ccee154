import { describe, expect, it } from 'vitest';
import type { Coordinator } from './coordinator.js';
import { InvalidArgumentError } from './errors.js';
import { SessionField } from './records.js';
import { loadScripts } from './script-loader.js';
import type { Claim } from './session-types.js';
import { connectionPool, coordinatorsOn, elapse, redisNow, testCoordinator } from './test-support/setup.js';

const worker = { workerId: 'host-a', leaseMs: 10_000, graceMs: 1000 };

/** The events of one user's stream (types and data), oldest first. */
async function eventsOf(c: Coordinator, userId: string): Promise<Array<Record<string, unknown>>> {
  const entries = await c.redis.xrange(c.keys.user(userId).events, '-', '+');
  return entries
    .map(([, fields]) => JSON.parse(fields[1]!) as Record<string, unknown>)
    .filter((e) => e['userId'] === userId);
}

describe('idle sessions', () => {
  const coordinator = testCoordinator({
    policy: { tokenLimit: 10_000, spawnIntervalMs: 1, spawnBurst: 1000, maxLifetimeMs: 60_000 },
  });
  const { sessions, claims } = coordinator;

  async function admitted(userId: string, idleTimeoutMs?: number, c: Coordinator = coordinator) {
    const issued = await c.tokens.issue(userId, idleTimeoutMs === undefined ? {} : { idleTimeoutMs });
    if (issued.outcome !== 'issued') throw new Error('throttled');
    const admission = await c.sessions.admit(issued.token);
    if (admission.outcome !== 'admitted') throw new Error(`not admitted: ${admission.outcome}`);
    return admission;
  }

  async function running(userId: string, idleTimeoutMs?: number, c: Coordinator = coordinator): Promise<Claim> {
    const outcome = await c.claims.claim(await admitted(userId, idleTimeoutMs, c), worker);
    if (!outcome.claimed) throw new Error(`not claimed: ${outcome.reason}`);
    return outcome.claim;
  }

  it("a token's idleTimeoutMs reaches its session; the clock starts when it runs (lastActivityAt = its start)", async () => {
    await admitted('idle-view', 5000);
    const pending = await sessions.settleAndRead('idle-view');
    expect(pending).toMatchObject({ state: 'pending', idleTimeoutMs: 5000 });
    expect(pending?.lastActivityAt).toBeUndefined();
    const claimed = await claims.claim(pending!, worker);
    if (!claimed.claimed) throw new Error(claimed.reason);
    expect(claimed.claim.idleTimeoutMs).toBe(5000);
    expect(await sessions.settleAndRead('idle-view')).toMatchObject({
      state: 'running',
      idleTimeoutMs: 5000,
      lastActivityAt: claimed.claim.startedAt,
    });
  });

  it('idleTimeoutMs 0 means never: no idle timeout shows, no idle instant is answered, it runs on', async () => {
    const claim = await running('idle-never', 0);
    expect(claim.idleTimeoutMs).toBe(0);
    const view = await sessions.settleAndRead('idle-never');
    expect(view?.idleTimeoutMs).toBeUndefined();
    expect(view?.lastActivityAt).toBe(claim.startedAt);
    const renewed = await claims.renew(claim);
    expect(renewed).toMatchObject({ ok: true, stopRequested: false });
    expect(renewed.ok && renewed.idleInMs).toBeUndefined();
  });

  it("the policy's idleTimeoutMs applies to a token that sets none; the token's own, even 0, wins", async () => {
    const withDefault = testCoordinator({
      policy: { tokenLimit: 10_000, spawnIntervalMs: 1, spawnBurst: 1000, maxLifetimeMs: 60_000, idleTimeoutMs: 7000 },
    });
    await admitted('idle-default', undefined, withDefault);
    expect(await withDefault.sessions.settleAndRead('idle-default')).toMatchObject({ idleTimeoutMs: 7000 });
    await admitted('idle-own', 3000, withDefault);
    expect(await withDefault.sessions.settleAndRead('idle-own')).toMatchObject({ idleTimeoutMs: 3000 });
    await admitted('idle-zero', 0, withDefault);
    expect((await withDefault.sessions.settleAndRead('idle-zero'))?.idleTimeoutMs).toBeUndefined();
  });

  it('a token refuses an idle timeout that is negative, not an integer or over the lifetime cap, naming it', async () => {
    for (const idleTimeoutMs of [-1, 1.5, 60_001, Number.NaN]) {
      const refused = await coordinator.tokens.issue('idle-bad', { idleTimeoutMs }).catch((err: unknown) => err);
      expect(refused, String(idleTimeoutMs)).toBeInstanceOf(InvalidArgumentError);
      expect((refused as Error).message).toContain('idleTimeoutMs');
    }
    expect((await coordinator.tokens.issue('idle-bad', { idleTimeoutMs: 60_000 })).outcome).toBe('issued');
  });

  it('a rolled-back admission gives the token back with its idle timeout', async () => {
    const issued = await coordinator.tokens.issue('idle-rollback', { idleTimeoutMs: 4321 });
    if (issued.outcome !== 'issued') throw new Error('throttled');
    const first = await sessions.admit(issued.token);
    if (first.outcome !== 'admitted') throw new Error(first.outcome);
    expect((await sessions.cancelAdmission(issued.token, first.sessionId)).tokenRestored).toBe(true);
    expect(await sessions.admit(issued.token)).toMatchObject({ outcome: 'admitted' });
    expect(await sessions.settleAndRead('idle-rollback')).toMatchObject({ idleTimeoutMs: 4321 });
  });

  it('a renewal before the idle timeout answers when it would be idle; the first one after stops it as idle', async () => {
    const claim = await running('idle-stop', 300);
    const sentAt = performance.now();
    const early = await claims.renew(claim);
    if (!early.ok) throw new Error(early.reason);
    expect(early.stopRequested).toBe(false);
    // Counted from the claim's start on Redis's clock: at most the timeout, less what has passed since.
    const passed = performance.now() - claim.sentAt;
    expect(early.idleInMs).toBeLessThanOrEqual(300);
    expect(early.idleInMs).toBeGreaterThanOrEqual(300 - passed - 5);

    await elapse(Math.max(0, early.idleInMs! - (performance.now() - sentAt)) + 10); // the idle timeout runs out
    const late = await claims.renew(claim);
    expect(late).toMatchObject({ ok: true, stopRequested: true, stopReason: 'idle' });
    expect(await sessions.settleAndRead('idle-stop')).toMatchObject({
      state: 'stopping',
      stopRequested: 'idle',
      lastActivityAt: claim.startedAt,
    });
    // The next renewal says the same; the stop is not asked for twice.
    expect(await claims.renew(claim)).toMatchObject({ ok: true, stopRequested: true, stopReason: 'idle' });
    const stoppingEvents = (await eventsOf(coordinator, 'idle-stop')).filter((e) => e['type'] === 'stopping');
    expect(stoppingEvents).toEqual([
      {
        type: 'stopping',
        sessionId: claim.sessionId,
        userId: 'idle-stop',
        fence: claim.fence,
        workerId: 'host-a',
        pool: 'default',
        labels: {},
        at: expect.any(Number),
      },
    ]);
    expect(stoppingEvents[0]!['at']).toBeGreaterThanOrEqual(claim.startedAt + 300);

    // Its host records it: stopped, reason idle, in the history and the terminal event.
    expect(await claims.finish(claim, 'stopped', 143, 'idle')).toBe(true);
    expect((await sessions.history('idle-stop'))[0]).toMatchObject({
      sessionId: claim.sessionId,
      state: 'stopped',
      reason: 'idle',
      exitCode: 143,
    });
    expect((await eventsOf(coordinator, 'idle-stop')).at(-1)).toMatchObject({ type: 'stopped', reason: 'idle' });
  });

  it('idle goes only with stopped: finishing failed or expired with reason idle is refused and changes nothing', async () => {
    const claim = await running('idle-reason', 0);
    for (const state of ['failed', 'expired', 'completed'] as const)
      await expect(claims.finish(claim, state, 1, 'idle')).rejects.toBeInstanceOf(InvalidArgumentError);
    // Past the library's own check, the script refuses it too.
    const finish = loadScripts().get('finishSession')!;
    const keys = coordinator.keys.user('idle-reason');
    for (const state of ['failed', 'expired'])
      expect(
        await coordinator.redis.eval(
          finish.lua,
          6,
          ...keys.ending,
          claim.sessionId,
          claim.owner,
          state,
          '1',
          'idle-reason',
          50,
          'idle',
        ),
      ).toEqual([-11]);
    expect(await sessions.settleAndRead('idle-reason')).toMatchObject({ state: 'running' });
  });

  it("the activity a renewal carries moves the last activity to Redis's now less its age, never backwards", async () => {
    const claim = await running('idle-age', 5000);
    const before = await redisNow(coordinator);
    const renewed = await claims.renew(claim, 0);
    const after = await redisNow(coordinator);
    const moved = (await sessions.settleAndRead('idle-age'))!.lastActivityAt!;
    expect(moved).toBeGreaterThanOrEqual(before);
    expect(moved).toBeLessThanOrEqual(after);
    // The answer counts the idle instant from the activity it just recorded.
    expect(renewed.ok && renewed.idleInMs).toBeGreaterThan(5000 - (after - before) - 1);
    // Activity older than what is recorded changes nothing.
    await claims.renew(claim, 60_000);
    expect((await sessions.settleAndRead('idle-age'))!.lastActivityAt).toBe(moved);
  });

  it('a host that keeps reporting activity keeps its session running past the idle timeout', async () => {
    const claim = await running('idle-busy', 200);
    const until = performance.now() + 600;
    while (performance.now() < until) {
      // The session was active just now (age 0), each renewal about 50 ms after the last.
      const renewed = await claims.renew(claim, 0);
      expect(renewed).toMatchObject({ ok: true, stopRequested: false });
      await elapse(50);
    }
    expect(await sessions.settleAndRead('idle-busy')).toMatchObject({ state: 'running' });
    await elapse(250); // then it stops being active
    expect(await claims.renew(claim)).toMatchObject({ ok: true, stopRequested: true, stopReason: 'idle' });
  });

  it("activity from the service: a running session's last activity becomes now; pending and stopping ones are left alone", async () => {
    expect(await sessions.recordActivity('idle-nobody')).toEqual({ outcome: 'no_session' });

    const pending = await admitted('idle-svc', 200);
    expect(await sessions.recordActivity('idle-svc')).toEqual({
      outcome: 'recorded',
      sessionId: pending.sessionId,
      state: 'pending',
    });
    expect((await sessions.settleAndRead('idle-svc'))?.lastActivityAt).toBeUndefined();

    const claimed = await claims.claim(pending, worker);
    if (!claimed.claimed) throw new Error(claimed.reason);
    const claim = claimed.claim;
    await elapse(150);
    const before = await redisNow(coordinator);
    const recorded = await sessions.recordActivity('idle-svc');
    expect(recorded).toMatchObject({ outcome: 'recorded', sessionId: claim.sessionId, state: 'running' });
    const at = recorded.outcome === 'recorded' ? recorded.lastActivityAt! : 0;
    expect(at).toBeGreaterThanOrEqual(before);
    expect((await sessions.settleAndRead('idle-svc'))?.lastActivityAt).toBe(at);
    // 150 + 100 ms after its start, but only 100 ms after the activity: not idle yet.
    await elapse(100);
    const renewed = await claims.renew(claim);
    expect(renewed).toMatchObject({ ok: true, stopRequested: false });

    await sessions.requestStop('idle-svc');
    expect(await sessions.recordActivity('idle-svc')).toMatchObject({ state: 'stopping', lastActivityAt: at });
    // A stop asked through the API stays one, whatever the idle clock says later.
    await elapse(250);
    expect(await claims.renew(claim)).toMatchObject({ stopRequested: true, stopReason: 'requested' });
  });

  it('activity for a session whose host is gone ends it as lost and answers no_session', async () => {
    const claim = await running('idle-orphan', 5000);
    await coordinator.redis.del(coordinator.keys.user('idle-orphan').lease);
    expect(await sessions.recordActivity('idle-orphan')).toEqual({ outcome: 'no_session' });
    expect((await sessions.history('idle-orphan'))[0]).toMatchObject({
      sessionId: claim.sessionId,
      state: 'lost',
      reason: 'host_lost',
    });
  });

  describe('races', () => {
    const pool = connectionPool(20);
    const others = coordinatorsOn(pool, coordinator);

    it('activity and renewals from 20 connections at once: the last activity only ever moves forward', async () => {
      const claim = await running('idle-storm', 60_000);
      const key = coordinator.keys.user('idle-storm').session;
      const seen: number[] = [];
      let storming = true;
      const watcher = (async () => {
        while (storming) seen.push(Number(await coordinator.redis.hget(key, SessionField.lastActivityAt)));
      })();
      await Promise.all(
        others.flatMap((other, i) =>
          Array.from({ length: 10 }, (_, j) =>
            (i + j) % 2 === 0
              ? other.sessions.recordActivity('idle-storm')
              : other.claims.renew(claim, ((i * 7 + j * 13) % 50) * 10),
          ),
        ),
      );
      storming = false;
      await watcher;
      seen.push(Number(await coordinator.redis.hget(key, SessionField.lastActivityAt)));
      expect(seen.length).toBeGreaterThan(1);
      for (let i = 1; i < seen.length; i++) expect(seen[i]).toBeGreaterThanOrEqual(seen[i - 1]!);
      expect(seen.at(-1)).toBeGreaterThanOrEqual(claim.startedAt);
    });

    it('activity racing the renewal that finds the session idle: one decision, and the answers agree with it', async () => {
      const idleTimeoutMs = 150;
      const claim = await running('idle-race', idleTimeoutMs);
      await elapse(idleTimeoutMs + 50); // idle is due: whichever script runs first decides
      const calls = others.flatMap((other, i) => [
        other.sessions.recordActivity('idle-race'),
        i % 4 === 0 ? other.claims.renew(claim) : other.sessions.recordActivity('idle-race'),
      ]);
      const answers = await Promise.all(calls);
      const activity = answers.filter((a) => 'outcome' in a);
      const renewals = answers.filter((a) => 'ok' in a);
      const stopping = (await eventsOf(coordinator, 'idle-race')).filter((e) => e['type'] === 'stopping');
      const state = (await sessions.settleAndRead('idle-race'))!.state;
      expect(stopping.length).toBeLessThanOrEqual(1);
      if (stopping.length === 1) {
        // A renewal found it idle: only activity recorded before that (and so at least the idle timeout
        // before it) was still running; every renewal says idle from then on.
        expect(state).toBe('stopping');
        const stoppedAt = stopping[0]!['at'] as number;
        for (const a of activity)
          if ('state' in a && a.state === 'running')
            expect(a.lastActivityAt).toBeLessThanOrEqual(stoppedAt - idleTimeoutMs);
        expect(renewals.some((r) => 'stopReason' in r && r.stopReason === 'idle')).toBe(true);
      } else {
        // Activity came first: no renewal stopped it.
        expect(state).toBe('running');
        for (const r of renewals) expect(r).toMatchObject({ ok: true, stopRequested: false });
      }
    });
  });
});
