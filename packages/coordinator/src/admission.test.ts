import { describe, expect, it } from 'vitest';
import type { Coordinator } from './coordinator.js';
import { ScriptCode } from './errors.js';
import { loadScripts } from './script-loader.js';
import { connectionPool, coordinatorsOn, elapse, testCoordinator } from './test-support/setup.js';

async function token(
  c: Coordinator,
  userId: string,
  options: Parameters<Coordinator['tokens']['issue']>[1] = {},
): Promise<string> {
  const issued = await c.tokens.issue(userId, options);
  if (issued.outcome !== 'issued') throw new Error(`token for ${userId} was throttled`);
  return issued.token;
}

const worker = { workerId: 'host-a', leaseMs: 5000, graceMs: 1000 };

describe('admission', () => {
  const coordinator = testCoordinator({ policy: { tokenLimit: 10_000, spawnIntervalMs: 60_000, spawnBurst: 1 } });
  const sessions = coordinator.sessions;
  const claims = coordinator.claims;

  it('admits a valid token once, as a pending session with a fence and the token metadata', async () => {
    const t = await token(coordinator, 'first', { metadata: { durationMs: 10 }, lifetimeMs: 5000 });
    const admitted = await sessions.admit(t);
    expect(admitted).toMatchObject({
      outcome: 'admitted',
      userId: 'first',
      fence: 1,
      lifetimeMs: 5000,
      metadata: { durationMs: 10 },
    });
    expect(await sessions.settleAndRead('first')).toMatchObject({ state: 'pending', fence: 1, lifetimeMs: 5000 });
    expect(await sessions.admit(t)).toEqual({ outcome: 'token_invalid' });
  });

  it('checks in order: token, then live session, then throttle', async () => {
    const user = 'order';
    const a = await token(coordinator, user);
    const first = await sessions.admit(a);
    if (first.outcome !== 'admitted') throw new Error('not admitted');
    // Live session and throttle closed: the session wins.
    const b = await token(coordinator, user);
    expect(await sessions.admit(b)).toEqual({
      outcome: 'session_exists',
      userId: user,
      sessionId: first.sessionId,
      state: 'pending',
    });
    // Invalid token and live session: the token wins.
    expect(await sessions.admit(a)).toEqual({ outcome: 'token_invalid' });
    // Session gone, throttle closed: throttled with advice; the token stays valid.
    expect(await sessions.requestStop(user)).toEqual({
      outcome: 'stopped',
      sessionId: first.sessionId,
      pool: 'default',
    });
    const throttled = await sessions.admit(b);
    expect(throttled).toMatchObject({ outcome: 'throttled', rate: { allowed: false, limit: 1, remaining: 0 } });
    if (throttled.outcome !== 'throttled') throw new Error('unreachable');
    expect(throttled.rate.retryAfterMs).toBeGreaterThan(55_000);
    expect((await coordinator.tokens.consume(b)).consumed).toBe(true);
  });

  it('a lifetime asked by the token is capped by the policy at admission', async () => {
    const t = await token(coordinator, 'capped', { lifetimeMs: 1000 });
    const admitted = await sessions.admit(t, { maxLifetimeMs: 500 });
    expect(admitted).toMatchObject({ outcome: 'admitted', lifetimeMs: 500 });
  });

  it('500 simultaneous admits for one user with 500 distinct tokens: exactly one admitted, 499 tokens still valid', async () => {
    const user = 'crowd';
    const tokens = await Promise.all(Array.from({ length: 500 }, () => token(coordinator, user)));
    const admitters = coordinatorsOn(connectionPool(50), coordinator);
    await Promise.all(admitters.map((c) => c.redis.ping()));
    const outcomes = await Promise.all(tokens.map((t, i) => admitters[i % admitters.length]!.sessions.admit(t)));
    const admitted = outcomes.filter((o) => o.outcome === 'admitted');
    expect(admitted).toHaveLength(1);
    expect(outcomes.filter((o) => o.outcome === 'session_exists')).toHaveLength(499);
    const rest = tokens.filter((_, i) => outcomes[i]!.outcome !== 'admitted');
    const consumed = await Promise.all(rest.map((t) => coordinator.tokens.consume(t)));
    expect(consumed.filter((c) => c.consumed)).toHaveLength(499);
  });

  it('cancelAdmission makes the token usable again and puts the throttle back', async () => {
    const user = 'rollback';
    const t = await token(coordinator, user);
    const admitted = await sessions.admit(t);
    if (admitted.outcome !== 'admitted') throw new Error('not admitted');
    expect(await sessions.cancelAdmission(t, admitted.sessionId)).toEqual({ cancelled: true, tokenRestored: true });
    expect(await sessions.settleAndRead(user)).toBeUndefined();
    expect(await sessions.history(user)).toEqual([]);
    const again = await sessions.admit(t);
    expect(again).toMatchObject({ outcome: 'admitted', userId: user });
    if (again.outcome !== 'admitted') throw new Error('unreachable');
    expect(again.fence).toBeGreaterThan(admitted.fence);
    // A claimed session cannot be rolled back.
    const claimed = await claims.claim(again, worker);
    expect(claimed.claimed).toBe(true);
    expect(await sessions.cancelAdmission(t, again.sessionId)).toEqual({ cancelled: false, tokenRestored: false });
  });
});

describe('the spawn throttle through a cancellation', () => {
  const coordinator = testCoordinator({ policy: { tokenLimit: 10_000, spawnIntervalMs: 60_000, spawnBurst: 2 } });
  const { sessions, claims } = coordinator;

  it("goes back exactly where it was when it was not empty: the admission after it is the burst's last, the next is throttled", async () => {
    const user = 'throttle-back';
    const first = await sessions.admit(await token(coordinator, user));
    if (first.outcome !== 'admitted') throw new Error(`not admitted: ${first.outcome}`);
    expect(first.rate.remaining).toBe(1);
    const claim = await claims.claim(first, worker);
    if (!claim.claimed) throw new Error('not claimed');
    expect(await claims.finish(claim.claim, 'completed', 0)).toBe(true);

    // The second admission of the burst, then rolled back: the throttle holds one admission again.
    const t = await token(coordinator, user);
    const second = await sessions.admit(t);
    if (second.outcome !== 'admitted') throw new Error(`not admitted: ${second.outcome}`);
    expect(second.rate.remaining).toBe(0);
    expect(await sessions.cancelAdmission(t, second.sessionId)).toEqual({ cancelled: true, tokenRestored: true });

    const again = await sessions.admit(t);
    if (again.outcome !== 'admitted') throw new Error(`not admitted: ${again.outcome}`);
    expect(again.rate.remaining).toBe(0); // as the cancelled one: not 1 (emptied), not throttled (kept)
    // Both admissions of the burst are used now: the next is refused, with at most a minute to wait.
    const claimed = await claims.claim(again, worker);
    if (!claimed.claimed) throw new Error('not claimed');
    expect(await claims.finish(claimed.claim, 'completed', 0)).toBe(true);
    const refused = await sessions.admit(await token(coordinator, user));
    if (refused.outcome !== 'throttled') throw new Error(`not throttled: ${refused.outcome}`);
    expect(refused.rate.retryAfterMs).toBeGreaterThan(0);
    expect(refused.rate.retryAfterMs).toBeLessThanOrEqual(60_000);
  });

  it('300 simultaneous cancellations of one admission: exactly one rolls it back, and the throttle moves back once', async () => {
    const user = 'cancel-crowd';
    const t = await token(coordinator, user);
    const admitted = await sessions.admit(t);
    if (admitted.outcome !== 'admitted') throw new Error(`not admitted: ${admitted.outcome}`);
    expect(admitted.rate.remaining).toBe(1);
    const cancellers = coordinatorsOn(connectionPool(50), coordinator);
    await Promise.all(cancellers.map((c) => c.redis.ping()));
    const outcomes = await Promise.all(
      Array.from({ length: 300 }, (_, i) =>
        cancellers[i % cancellers.length]!.sessions.cancelAdmission(t, admitted.sessionId),
      ),
    );
    expect(outcomes.filter((o) => o.cancelled)).toHaveLength(1);
    // Moved back once: the burst is whole again (two admissions), not more.
    const again = await sessions.admit(t);
    if (again.outcome !== 'admitted') throw new Error(`not admitted: ${again.outcome}`);
    expect(again.rate.remaining).toBe(1);
  });
});

describe('an admission whose answer was lost', () => {
  const coordinator = testCoordinator({ policy: { tokenLimit: 100, spawnIntervalMs: 60_000 } });

  it('cancelled before it arrives: the late copy does nothing and the token stays valid', async () => {
    const t = await token(coordinator, 'late-copy');
    const sessionId = crypto.randomUUID();
    expect(await coordinator.sessions.cancelAdmission(t, sessionId)).toEqual({
      cancelled: false,
      tokenRestored: false,
    });
    expect(await coordinator.sessions.admit(t, {}, sessionId)).toEqual({ outcome: 'token_invalid' });
    expect(await coordinator.sessions.settleAndRead('late-copy')).toBeUndefined();
    expect(await coordinator.sessions.admit(t)).toMatchObject({ outcome: 'admitted' });
  });

  it('cancelled after it ran: the token is valid again and the throttle back where it was', async () => {
    const t = await token(coordinator, 'ran-first');
    const sessionId = crypto.randomUUID();
    expect(await coordinator.sessions.admit(t, {}, sessionId)).toMatchObject({ outcome: 'admitted', sessionId });
    expect(await coordinator.sessions.cancelAdmission(t, sessionId)).toEqual({ cancelled: true, tokenRestored: true });
    expect(await coordinator.sessions.admit(t)).toMatchObject({ outcome: 'admitted' });
  });
});

describe('session records', () => {
  const coordinator = testCoordinator({
    policy: { tokenLimit: 10_000, spawnIntervalMs: 1, spawnBurst: 1000, historyLength: 3 },
  });
  const sessions = coordinator.sessions;
  const claims = coordinator.claims;

  async function admit(user: string, options = {}) {
    const admitted = await sessions.admit(await token(coordinator, user, options));
    if (admitted.outcome !== 'admitted') throw new Error(`not admitted: ${admitted.outcome}`);
    return admitted;
  }

  it('pending → running → completed, with lease, deadline, history and exit code', async () => {
    const admitted = await admit('life', { lifetimeMs: 60_000, metadata: { x: 1 } });
    const outcome = await claims.claim(admitted, worker);
    if (!outcome.claimed) throw new Error('not claimed');
    const { claim } = outcome;
    expect(claim.deadline - claim.startedAt).toBe(60_000);
    expect(claim.metadata).toEqual({ x: 1 });
    const live = await sessions.settleAndRead('life');
    expect(live).toMatchObject({
      state: 'running',
      workerId: 'host-a',
      fence: admitted.fence,
      deadline: claim.deadline,
    });
    expect(await coordinator.redis.pttl(coordinator.keys.user('life').lease)).toBeGreaterThan(4000);
    const renewed = await claims.renew(claim);
    expect(renewed).toMatchObject({ ok: true, stopRequested: false });
    expect(await claims.finish(claim, 'completed', 0)).toBe(true);
    expect(await sessions.settleAndRead('life')).toBeUndefined();
    expect(await coordinator.redis.exists(coordinator.keys.user('life').lease)).toBe(0);
    const [entry] = await sessions.history('life');
    expect(entry).toMatchObject({
      sessionId: admitted.sessionId,
      fence: admitted.fence,
      state: 'completed',
      workerId: 'host-a',
      exitCode: 0,
      startedAt: claim.startedAt,
    });
    expect(await claims.finish(claim, 'failed', 1)).toBe(false);
  });

  it('a session its memory cap killed ends failed with reason out_of_memory, in its history and the recent endings', async () => {
    const admitted = await admit('oom');
    const outcome = await claims.claim(admitted, worker);
    if (!outcome.claimed) throw new Error('not claimed');
    expect(await claims.finish(outcome.claim, 'failed', 137, 'out_of_memory')).toBe(true);
    expect(await sessions.settleAndRead('oom')).toBeUndefined();
    const [entry] = await sessions.history('oom');
    expect(entry).toMatchObject({
      sessionId: admitted.sessionId,
      state: 'failed',
      reason: 'out_of_memory',
      exitCode: 137,
      workerId: 'host-a',
    });
    const recent = (await coordinator.redis.lrange(coordinator.keys.user('oom').ended, 0, -1)).map(
      (json) => JSON.parse(json) as { sessionId: string; reason?: string },
    );
    expect(recent.find((e) => e.sessionId === admitted.sessionId)).toMatchObject({
      userId: 'oom',
      state: 'failed',
      reason: 'out_of_memory',
    });
    // A failure without a reason records none.
    const next = await claims.claim(await admit('oom'), worker);
    if (!next.claimed) throw new Error('not claimed');
    expect(await claims.finish(next.claim, 'failed', 1)).toBe(true);
    expect((await sessions.history('oom'))[0]).not.toHaveProperty('reason');
  });

  it('out_of_memory goes with failed only: another state with it is refused, by the library and by the script', async () => {
    const admitted = await admit('oom-refused');
    const outcome = await claims.claim(admitted, worker);
    if (!outcome.claimed) throw new Error('not claimed');
    const { claim } = outcome;
    for (const state of ['completed', 'expired', 'stopped', 'lost'] as const)
      await expect(claims.finish(claim, state, 137, 'out_of_memory')).rejects.toMatchObject({
        code: 'invalid_argument',
      });
    await expect(claims.finish(claim, 'failed', 1, 'idle' as 'out_of_memory')).rejects.toMatchObject({
      code: 'invalid_argument',
    });
    // The script refuses the same on its own (bad_argument), whoever calls it.
    const finishSession = loadScripts().get('finishSession')!;
    const keys = coordinator.keys.user('oom-refused');
    const run = (state: string, reason: string) =>
      coordinator.redis.eval(
        finishSession.lua,
        finishSession.numberOfKeys,
        ...keys.ending,
        claim.sessionId,
        claim.owner,
        state,
        '137',
        claim.userId,
        3,
        reason,
        claim.fence,
        claim.startedAt,
        claim.workerId,
        JSON.stringify(claim.labels),
        claim.pool,
        coordinator.keys.eventChannel(),
      );
    expect(await run('stopped', 'out_of_memory')).toEqual([ScriptCode.BadArgument]);
    expect(await run('lost', 'out_of_memory')).toEqual([ScriptCode.BadArgument]);
    expect(await run('failed', 'idle')).toEqual([ScriptCode.BadArgument]);
    // Nothing was recorded: the session is still live, and ends as its owner says.
    expect(await sessions.settleAndRead('oom-refused')).toMatchObject({ state: 'running' });
    expect(await sessions.history('oom-refused')).toEqual([]);
    expect(await run('failed', 'out_of_memory')).toEqual([ScriptCode.Ok]);
    expect(await sessions.history('oom-refused')).toEqual([
      expect.objectContaining({ state: 'failed', reason: 'out_of_memory', exitCode: 137 }),
    ]);
  });

  it('a job is claimed once: a second claim, or one with another fence, is stale', async () => {
    const admitted = await admit('once');
    expect((await claims.claim({ ...admitted, fence: admitted.fence + 1 }, worker)).claimed).toBe(false);
    expect((await claims.claim(admitted, worker)).claimed).toBe(true);
    expect(await claims.claim(admitted, { ...worker, workerId: 'host-b' })).toEqual({
      claimed: false,
      reason: 'stale',
    });
  });

  it('a stop request reaches the owner at its next renewal; asking again changes nothing', async () => {
    const admitted = await admit('stopper');
    const outcome = await claims.claim(admitted, worker);
    if (!outcome.claimed) throw new Error('not claimed');
    expect(await sessions.requestStop('stopper')).toEqual({
      outcome: 'stopping',
      sessionId: admitted.sessionId,
      pool: 'default',
    });
    expect(await sessions.requestStop('stopper')).toEqual({
      outcome: 'stopping',
      sessionId: admitted.sessionId,
      pool: 'default',
    });
    expect(await sessions.settleAndRead('stopper')).toMatchObject({ state: 'stopping', stopRequested: 'requested' });
    expect(await claims.renew(outcome.claim)).toMatchObject({ ok: true, stopRequested: true });
    expect(await claims.finish(outcome.claim, 'stopped', 143)).toBe(true);
    expect(await sessions.requestStop('stopper')).toEqual({ outcome: 'no_session' });
  });

  it('a pending session is stopped at once, and its job then claims nothing', async () => {
    const admitted = await admit('early-stop');
    expect(await sessions.requestStop('early-stop')).toEqual({
      outcome: 'stopped',
      sessionId: admitted.sessionId,
      pool: 'default',
    });
    expect(await claims.claim(admitted, worker)).toEqual({ claimed: false, reason: 'stale' });
    expect((await sessions.history('early-stop'))[0]).toMatchObject({
      state: 'stopped',
      sessionId: admitted.sessionId,
    });
  });

  it('history keeps the newest entries up to its cap', async () => {
    const ids = [];
    for (let i = 0; i < 5; i++) {
      const admitted = await admit('many');
      ids.push(admitted.sessionId);
      await sessions.requestStop('many');
    }
    const history = await sessions.history('many');
    expect(history.map((h) => h.sessionId)).toEqual(ids.reverse().slice(0, 3));
    expect(await coordinator.redis.llen(coordinator.keys.user('many').history)).toBe(3);
  });

  it('fences strictly increase with each admission of a user', async () => {
    const fences = [];
    for (let i = 0; i < 4; i++) {
      const admitted = await admit('fences');
      fences.push(admitted.fence);
      await sessions.requestStop('fences');
    }
    expect(fences).toEqual([...fences].sort((a, b) => a - b));
    expect(new Set(fences).size).toBe(4);
  });

  it('a renewal by another owner is refused and the session lease cannot pass its hard deadline', async () => {
    const admitted = await admit('deadline', { lifetimeMs: 200 });
    const outcome = await claims.claim(admitted, { ...worker, graceMs: 100 });
    if (!outcome.claimed) throw new Error('not claimed');
    expect(await claims.renew({ ...outcome.claim, owner: 'host-b/x' })).toEqual({ ok: false, reason: 'lease_lost' });
    const renewed = await claims.renew(outcome.claim);
    if (!renewed.ok) throw new Error('refused');
    expect(renewed.leaseExpiresAt).toBe(outcome.claim.deadline + 100);
    await elapse(renewed.ttlMs + 10); // until the hard deadline
    expect((await claims.renew(outcome.claim)).ok).toBe(false);
  });
});

describe('sweep', () => {
  const coordinator = testCoordinator({
    policy: { tokenLimit: 10_000, spawnIntervalMs: 1, spawnBurst: 1000, pendingTimeoutMs: 150 },
  });
  const sessions = coordinator.sessions;
  const claims = coordinator.claims;
  const sweeper = coordinator.sweeper();

  it('ends as lost a pending session nobody claimed in time, and one whose lease expired, without any call for those users', async () => {
    const pending = await sessions.admit(await token(coordinator, 'unclaimed'));
    const running = await sessions.admit(await token(coordinator, 'abandoned'));
    if (pending.outcome !== 'admitted' || running.outcome !== 'admitted') throw new Error('not admitted');
    const claimed = await claims.claim(running, { ...worker, leaseMs: 100 });
    expect(claimed.claimed).toBe(true);
    expect((await sweeper.sweepOnce()).lost).toBe(0);
    await elapse(200); // past the pending timeout and the unrenewed lease
    const result = await sweeper.sweepOnce();
    expect(result.lost).toBe(2);
    expect((await sessions.history('unclaimed'))[0]).toMatchObject({
      state: 'lost',
      reason: 'not_claimed',
      sessionId: pending.sessionId,
    });
    expect((await sessions.history('abandoned'))[0]).toMatchObject({
      state: 'lost',
      reason: 'host_lost',
      sessionId: running.sessionId,
      workerId: 'host-a',
    });
    expect(await sessions.settleAndRead('unclaimed')).toBeUndefined();
    // A late claim of the timed-out job starts nothing.
    expect(await claims.claim(pending, worker)).toEqual({ claimed: false, reason: 'stale' });
    expect((await sweeper.sweepOnce()).due).toBe(0);
  });

  it('a healthy running session is not swept, and its index entry moves to its lease expiry', async () => {
    const admitted = await sessions.admit(await token(coordinator, 'healthy'));
    if (admitted.outcome !== 'admitted') throw new Error('not admitted');
    const outcome = await claims.claim(admitted, { ...worker, leaseMs: 10_000 });
    if (!outcome.claimed) throw new Error('not claimed');
    const shard = coordinator.keys.user('healthy').liveIndex;
    expect(Number(await coordinator.redis.zscore(shard, 'healthy'))).toBe(outcome.claim.leaseExpiresAt);
    expect((await sweeper.sweepOnce()).lost).toBe(0);
    expect((await sessions.settleAndRead('healthy'))?.state).toBe('running');
  });

  it('many sweepers at once end each overdue session exactly once', async () => {
    const users = Array.from({ length: 40 }, (_, i) => `herd-${i}`);
    for (const user of users) await sessions.admit(await token(coordinator, user));
    await elapse(200); // past the pending timeout
    const sweepers = coordinatorsOn(connectionPool(8), coordinator).map((c) => c.sweeper());
    const results = await Promise.all(sweepers.map((s) => s.sweepOnce()));
    expect(results.reduce((n, r) => n + r.lost, 0)).toBe(40);
    for (const user of users) expect((await sessions.history(user)).map((h) => h.state)).toEqual(['lost']);
  });

  it('an admission ends an overdue session first, so the user can spawn again at once', async () => {
    const first = await sessions.admit(await token(coordinator, 'lazy'));
    if (first.outcome !== 'admitted') throw new Error('not admitted');
    await elapse(200); // past the pending timeout, no sweep in between
    const second = await sessions.admit(await token(coordinator, 'lazy'));
    expect(second.outcome).toBe('admitted');
    expect((await sessions.history('lazy'))[0]).toMatchObject({
      state: 'lost',
      reason: 'not_claimed',
      sessionId: first.sessionId,
    });
  });
});

describe('reading a session', () => {
  const coordinator = testCoordinator({ policy: { tokenLimit: 100, spawnIntervalMs: 1, spawnBurst: 100 } });

  it('a running session whose lease ran out reads as gone, and its history says lost', async () => {
    const admitted = await coordinator.sessions.admit(await token(coordinator, 'dead-host'));
    if (admitted.outcome !== 'admitted') throw new Error('not admitted');
    expect((await coordinator.claims.claim(admitted, { ...worker, leaseMs: 80 })).claimed).toBe(true);
    expect((await coordinator.sessions.settleAndRead('dead-host'))?.state).toBe('running');
    await elapse(120); // the host "died": its lease is not renewed
    expect(await coordinator.sessions.settleAndRead('dead-host')).toBeUndefined();
    expect((await coordinator.sessions.history('dead-host'))[0]).toMatchObject({
      state: 'lost',
      reason: 'host_lost',
      sessionId: admitted.sessionId,
    });
  });
});

describe('worker registry', () => {
  const coordinator = testCoordinator();

  it('lists hosts with live heartbeats and forgets them when they stop or their record expires', async () => {
    await coordinator.workers.heartbeat({ workerId: 'host-a', slots: 4, busy: 1, startedAt: 1000 }, 60_000);
    await coordinator.workers.heartbeat({ workerId: 'host-b', slots: 2, busy: 0, startedAt: 2000 }, 100);
    expect((await coordinator.workers.list()).map((w) => [w.workerId, w.slots, w.busy])).toEqual([
      ['host-a', 4, 1],
      ['host-b', 2, 0],
    ]);
    await elapse(150); // host-b's record expires
    expect((await coordinator.workers.list()).map((w) => w.workerId)).toEqual(['host-a']);
    await coordinator.workers.withdraw('host-a');
    expect(await coordinator.workers.list()).toEqual([]);
  });

  it("a host's containment is read back as its heartbeat gave it; a heartbeat without one is group", async () => {
    await coordinator.workers.heartbeat(
      { workerId: 'ns-host', slots: 1, busy: 0, startedAt: 1, containment: 'namespace' },
      60_000,
    );
    await coordinator.workers.heartbeat(
      { workerId: 'pg-host', slots: 1, busy: 0, startedAt: 1, containment: 'group' },
      60_000,
    );
    await coordinator.workers.heartbeat({ workerId: 'old-host', slots: 1, busy: 0, startedAt: 1 }, 60_000);
    expect((await coordinator.workers.list()).map((w) => [w.workerId, w.containment])).toEqual([
      ['ns-host', 'namespace'],
      ['old-host', 'group'],
      ['pg-host', 'group'],
    ]);
    // The record holds it, and a drain answers it too.
    expect(await coordinator.redis.hget(coordinator.keys.worker('ns-host'), 'containment')).toBe('namespace');
    expect(await coordinator.workers.drain('ns-host')).toMatchObject({ state: 'draining', containment: 'namespace' });
    // A record written before hosts said (no field at all) reads as group.
    await coordinator.redis.hdel(coordinator.keys.worker('old-host'), 'containment');
    expect((await coordinator.workers.list()).find((w) => w.workerId === 'old-host')?.containment).toBe('group');
    expect(await coordinator.workers.drain('old-host')).toMatchObject({ containment: 'group' });
    await expect(
      coordinator.workers.heartbeat(
        { workerId: 'odd-host', slots: 1, busy: 0, startedAt: 1, containment: 'chroot' as 'group' },
        60_000,
      ),
    ).rejects.toMatchObject({ code: 'invalid_argument' });
    for (const id of ['ns-host', 'pg-host', 'old-host']) await coordinator.workers.withdraw(id);
  });

  it("a host's isolation is read back as its heartbeat gave it; a record without one is not isolated", async () => {
    await coordinator.workers.heartbeat(
      {
        workerId: 'iso-host',
        slots: 1,
        busy: 0,
        startedAt: 1,
        isolation: { network: 'none', filesystem: 'private', cpus: 0.5 },
      },
      60_000,
    );
    await coordinator.workers.heartbeat(
      {
        workerId: 'egress-host',
        slots: 1,
        busy: 0,
        startedAt: 1,
        isolation: { network: 'egress', filesystem: 'shared', cpus: 2 },
      },
      60_000,
    );
    await coordinator.workers.heartbeat({ workerId: 'old-host', slots: 1, busy: 0, startedAt: 1 }, 60_000);
    expect((await coordinator.workers.list()).map((w) => [w.workerId, w.isolation])).toEqual([
      ['egress-host', { network: 'egress', filesystem: 'shared', cpus: 2 }],
      ['iso-host', { network: 'none', filesystem: 'private', cpus: 0.5 }],
      ['old-host', { network: 'host', filesystem: 'shared', cpus: null }],
    ]);
    // The record holds it, and a drain answers it too.
    expect(await coordinator.redis.hmget(coordinator.keys.worker('iso-host'), 'network', 'filesystem', 'cpus')).toEqual(
      ['none', 'private', '0.5'],
    );
    expect(await coordinator.workers.drain('iso-host')).toMatchObject({
      state: 'draining',
      isolation: { network: 'none', filesystem: 'private', cpus: 0.5 },
    });
    // A heartbeat that changes it (the same host restarted with other settings) replaces it.
    await coordinator.workers.heartbeat(
      {
        workerId: 'egress-host',
        slots: 1,
        busy: 0,
        startedAt: 2,
        isolation: { network: 'none', filesystem: 'private', cpus: null },
      },
      60_000,
    );
    expect((await coordinator.workers.list()).find((w) => w.workerId === 'egress-host')?.isolation).toEqual({
      network: 'none',
      filesystem: 'private',
      cpus: null,
    });
    // A record written before hosts said (no fields at all) reads as not isolated, in a list and a drain.
    await coordinator.redis.hdel(coordinator.keys.worker('old-host'), 'network', 'filesystem', 'cpus');
    expect((await coordinator.workers.list()).find((w) => w.workerId === 'old-host')?.isolation).toEqual({
      network: 'host',
      filesystem: 'shared',
      cpus: null,
    });
    expect(await coordinator.workers.drain('old-host')).toMatchObject({
      isolation: { network: 'host', filesystem: 'shared', cpus: null },
    });
    const odd = (isolation: object) =>
      coordinator.workers.heartbeat(
        { workerId: 'odd-host', slots: 1, busy: 0, startedAt: 1, isolation: isolation as never },
        60_000,
      );
    for (const isolation of [
      { network: 'bridge', filesystem: 'private', cpus: null },
      { network: 'none', filesystem: 'overlay', cpus: null },
      { network: 'none', filesystem: 'private', cpus: 0 },
      { network: 'none', filesystem: 'private', cpus: -1 },
      { network: 'none', filesystem: 'private', cpus: Number.POSITIVE_INFINITY },
      { network: 'none', filesystem: 'private', cpus: '2' },
      { network: 'none', filesystem: 'private' },
    ])
      await expect(odd(isolation), JSON.stringify(isolation)).rejects.toMatchObject({ code: 'invalid_argument' });
    expect((await coordinator.workers.list()).map((w) => w.workerId)).not.toContain('odd-host');
    for (const id of ['iso-host', 'egress-host', 'old-host']) await coordinator.workers.withdraw(id);
  });
});
