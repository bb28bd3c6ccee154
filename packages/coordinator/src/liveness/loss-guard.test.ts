import { copyFileSync } from 'node:fs';
import { join } from 'node:path';
import { cleanUp, startRedisServer, type RedisServer, until } from '@cq/test-harness';
import { Redis } from 'ioredis';
import { describe, expect, it } from 'vitest';
import { Coordinator } from '../coordinator.js';
import type { AdmitOutcome, Claim } from '../session-types.js';

/**
 * Redis that loses writes, for real: a redis-server SIGKILLed and started again from an older snapshot,
 * restarted cleanly, or replaced by a replica promoted while it lacked the master's last writes. The
 * leases are short (1 s) so that the waits they bring stay short.
 */
const LEASE_MS = 1000;
const worker = { workerId: 'host-a', leaseMs: LEASE_MS, graceMs: 500 };
const policy = { spawnIntervalMs: 1, spawnBurst: 100, tokenLimit: 10_000 };

async function started(args: readonly string[] = []): Promise<{ server: RedisServer; client: Redis; c: Coordinator }> {
  const server = await startRedisServer({ args: ['--save', '', '--appendonly', 'no', ...args] });
  const client = new Redis(server.url, { maxRetriesPerRequest: 1 });
  client.on('error', () => {});
  const c = new Coordinator({ redis: client, keyPrefix: 'loss', policy });
  cleanUp(async () => {
    await c.close().catch(() => {});
    client.disconnect();
    await server.stop();
  });
  return { server, client, c };
}

async function tokenFor(c: Coordinator, userId: string): Promise<string> {
  const issued = await c.tokens.issue(userId);
  if (issued.outcome !== 'issued') throw new Error(`no token: ${issued.outcome}`);
  return issued.token;
}

async function admitted(c: Coordinator, token: string): Promise<Extract<AdmitOutcome, { outcome: 'admitted' }>> {
  const outcome = await c.sessions.admit(token);
  if (outcome.outcome !== 'admitted') throw new Error(`not admitted: ${JSON.stringify(outcome)}`);
  return outcome;
}

/** A session admitted, claimed with a 1 s lease, and finished: the slot's guard now knows the lease in use. */
async function oneSessionCycle(c: Coordinator, userId: string): Promise<number> {
  const first = await admitted(c, await tokenFor(c, userId));
  const claim = await c.claims.claim(first, worker);
  if (!claim.claimed) throw new Error('not claimed');
  await c.claims.finish(claim.claim, 'completed', 0);
  return first.fence;
}

async function runningClaim(c: Coordinator, token: string): Promise<{ fence: number; claim: Claim }> {
  const admission = await admitted(c, token);
  const claim = await c.claims.claim(admission, worker);
  if (!claim.claimed) throw new Error('not claimed');
  return { fence: admission.fence, claim: claim.claim };
}

/** Keeps `SAVE`'s snapshot aside, to start the server from it later. */
async function snapshot(server: RedisServer, client: Redis): Promise<string> {
  await client.save();
  const kept = join(server.dir, 'kept.rdb');
  copyFileSync(join(server.dir, 'dump.rdb'), kept);
  return kept;
}

/** The Redis clock, epoch ms. */
async function redisMs(client: Redis): Promise<number> {
  const [s, us] = await client.time();
  return Number(s) * 1000 + Math.floor(Number(us) / 1000);
}

/** Waits until the Redis clock is at most `ms` into its second. */
async function earlyInASecond(client: Redis, ms: number): Promise<void> {
  await until(async () => (await redisMs(client)) % 1000 < ms, 5000, `the first ${ms} ms of a second`);
}

/** Waits until the last save (or the start) is two seconds back: a guard may then keep the process's mark. */
async function settled(client: Redis): Promise<void> {
  await until(
    async () => Math.floor((await redisMs(client)) / 1000) - (await client.lastsave()) >= 2,
    5000,
    'the last save 2 s back',
  );
}

/** How many INFO commands the scripts ran during `during` (INFO commandstats does not count itself). */
async function infoCallsDuring(client: Redis, during: () => Promise<unknown>): Promise<number> {
  await client.config('RESETSTAT');
  await during();
  return Number(/^cmdstat_info:calls=(\d+)/m.exec(await client.info('commandstats'))?.[1] ?? 0);
}

async function restartFrom(server: RedisServer, client: Redis, kept: string): Promise<void> {
  await server.halt('SIGKILL');
  copyFileSync(kept, join(server.dir, 'dump.rdb'));
  await server.resume();
  await until(async () => (await client.ping().catch(() => '')) === 'PONG', 10_000, 'Redis back');
}

describe('Redis restarted from an older snapshot (the writes since are lost)', () => {
  it('waits out the leases, refuses the tokens issued before, ends the lost session state_lost once, and fences go on rising', async () => {
    const { server, client, c } = await started();
    // The process has a mark by then: the snapshot's guard, tokens and sessions carry it.
    await settled(client);
    const user = 'snap';
    const firstFence = await oneSessionCycle(c, user);
    const spentLater = await tokenFor(c, user);
    const kept = await snapshot(server, client);
    // After the snapshot: the token is spent and its session runs. Both are lost with the restart.
    const lost = await runningClaim(c, spentLater);
    expect(lost.fence).toBe(firstFence + 1);

    await restartFrom(server, client, kept);
    const backAt = Date.now();
    // The spent token is back in Redis, as unspent; so is a token issued now. Neither admits while a
    // session admitted before the restart may still run.
    const waiting = await c.sessions.admit(spentLater);
    expect(waiting).toMatchObject({ outcome: 'state_uncertain' });
    const { retryAfterMs, since } = waiting as Extract<AdmitOutcome, { outcome: 'state_uncertain' }>;
    // Until the restart (to the second) plus the longest lease claimed in the slot plus 1 s.
    expect(retryAfterMs).toBeGreaterThan(0);
    expect(retryAfterMs).toBeLessThanOrEqual(LEASE_MS + 1000);
    expect(since).toBeGreaterThan(backAt - 2000);
    expect(since).toBeLessThanOrEqual(Date.now());
    const fresh = await tokenFor(c, user);
    expect(await c.sessions.admit(fresh)).toMatchObject({ outcome: 'state_uncertain' });

    // The lost session's host learns of the loss at its next renewal and stops it; its end is recorded
    // as lost/state_lost, once, however often the host reports it.
    expect(await c.claims.renew(lost.claim)).toMatchObject({ ok: false });
    expect(await c.claims.finish(lost.claim, 'lost')).toBe(true);
    expect(await c.claims.finish(lost.claim, 'lost')).toBe(false);
    const ends = (await c.sessions.history(user)).filter((h) => h.sessionId === lost.claim.sessionId);
    expect(ends).toEqual([
      expect.objectContaining({ state: 'lost', reason: 'state_lost', fence: lost.fence, workerId: 'host-a' }),
    ]);

    // The token spent in the lost writes is never admitted again, neither during the wait nor after it.
    let afterWait: AdmitOutcome | undefined;
    await until(
      async () => (afterWait = await c.sessions.admit(spentLater)).outcome !== 'state_uncertain',
      retryAfterMs + 5000,
      'the wait over',
    );
    expect(Date.now()).toBeGreaterThanOrEqual(backAt + retryAfterMs - 1000);
    expect(afterWait).toEqual({ outcome: 'token_invalid', issuedBeforeLoss: true });
    // The one issued after the restart is admitted.
    const next = await admitted(c, fresh);
    // The fence counter went back to its snapshot's value; the fence still rises past the lost one.
    expect(next.fence).toBeGreaterThan(lost.fence);
    expect(Number(await client.get(c.keys.user(user).fence))).toBe(next.fence);
  });

  it('a session that was pending in the snapshot and claimed in the lost writes is not started again', async () => {
    const { server, client, c } = await started();
    await settled(client);
    const user = 'pend';
    await oneSessionCycle(c, user);
    const admission = await admitted(c, await tokenFor(c, user));
    const kept = await snapshot(server, client);
    const claim = await c.claims.claim(admission, worker); // lost with the restart
    expect(claim.claimed).toBe(true);
    await restartFrom(server, client, kept);

    // Redis holds the session as pending again, its job as not yet taken: another host's claim ends it.
    expect(await c.claims.claim(admission, { ...worker, workerId: 'host-b' })).toEqual({
      claimed: false,
      reason: 'stale',
    });
    expect(await c.sessions.settleAndRead(user)).toBeUndefined();
    expect((await c.sessions.history(user))[0]).toMatchObject({
      sessionId: admission.sessionId,
      state: 'lost',
      reason: 'state_lost',
    });
    // The host that ran it reports its end: already recorded, nothing more.
    if (!claim.claimed) throw new Error('unreachable');
    expect(await c.claims.finish(claim.claim, 'lost')).toBe(false);
    expect((await c.sessions.history(user)).filter((h) => h.sessionId === admission.sessionId)).toHaveLength(1);
  });
});

describe('a session held under its host lease, when Redis loses writes', () => {
  it('the probe answers another process after the restart, the session is refused its renewal there, and the gone host lease is taken up again while the guard waits, with no lease found run out meanwhile', async () => {
    const { server, client, c } = await started();
    await settled(client);
    const user = 'held';
    await oneSessionCycle(c, user);
    const token = await tokenFor(c, user);
    const beat = (fresh: boolean, register: { sessionId: string; userId: string }[] = []) =>
      c.workers.publish(
        {
          workerId: 'host-a',
          slots: 1,
          busy: 1,
          startedAt: 1,
          lease: { token: 'host-a/l1', ttlMs: LEASE_MS, fresh, register },
        },
        3000,
      );
    // The host took its lease before the snapshot: the {workers} slot's guard knows this process then.
    expect(await beat(true)).toMatchObject({ lease: 'held' });
    const kept = await snapshot(server, client);
    // After the snapshot: the session is claimed and held under the host lease; all lost with the restart.
    const { claim } = await runningClaim(c, token);
    expect(await beat(false, [{ sessionId: claim.sessionId, userId: user }])).toMatchObject({ lease: 'held' });
    const held = await c.claims.renew(claim, undefined, { leaseMs: 20 * LEASE_MS, run: true });
    if (!held.ok) throw new Error('not renewed');
    const before = held.run!;
    expect(before).toMatch(/^[0-9a-f]{40}$/);
    expect(await c.claims.probe(user)).toBe(before);

    await restartFrom(server, client, kept);
    // Another process keeps the slot now: the host renews the session there, which finds it gone.
    const after = await c.claims.probe(user);
    expect(after).toMatch(/^[0-9a-f]{40}$/);
    expect(after).not.toBe(before);
    expect(await c.claims.renew(claim, undefined, { leaseMs: 20 * LEASE_MS, run: true })).toEqual({
      ok: false,
      reason: 'lease_lost',
    });
    // The host lease went with the writes: while the {workers} guard waits, no lease is found run out,
    // and the host's next heartbeat takes it up again rather than losing it.
    expect(await c.workers.expiredLeases()).toEqual([]);
    expect(await beat(false)).toMatchObject({ lease: 'held' });
  });
});

describe('a token issued in the second Redis restarts in', () => {
  it('is refused too: uptime counts whole seconds, and the restart is taken at the end of its second', async () => {
    const { server, client, c } = await started();
    await oneSessionCycle(c, 'second');
    // Late in a second: the token, the snapshot and the restart all fall in it.
    await until(
      async () => (await redisMs(client)) % 1000 >= 400 && (await redisMs(client)) % 1000 < 500,
      5000,
      'mid-second',
    );
    const token = await tokenFor(c, 'second');
    const issuedIn = Math.floor((await redisMs(client)) / 1000);
    const kept = await snapshot(server, client);
    await restartFrom(server, client, kept);
    const restartedIn = Math.floor((await redisMs(client)) / 1000);
    // Checked early in the next second, when "now less the uptime" would fall before the token.
    await until(async () => Math.floor((await redisMs(client)) / 1000) > restartedIn, 5000, 'the next second');
    expect(issuedIn).toBe(restartedIn);
    let outcome: AdmitOutcome | undefined;
    await until(
      async () => (outcome = await c.sessions.admit(token)).outcome !== 'state_uncertain',
      LEASE_MS + 5000,
      'the wait over',
    );
    expect(outcome).toEqual({ outcome: 'token_invalid', issuedBeforeLoss: true });
  });
});

describe('a slot whose Redis process was confirmed', () => {
  it('does not ask INFO again while the process is the same: its mark (LASTSAVE) stands in for it; a save costs one INFO and loses nothing', async () => {
    const { client, c } = await started();
    await settled(client);
    await oneSessionCycle(c, 'cheap'); // the first call confirms the process and keeps its mark
    expect(await client.hget(c.keys.user('cheap').guard, 'mark')).toBe(String(await client.lastsave()));
    expect(await infoCallsDuring(client, () => oneSessionCycle(c, 'cheap'))).toBe(0);

    // A save moves LASTSAVE: the next call asks INFO, finds the same process, and admits.
    await client.save();
    expect(await infoCallsDuring(client, () => oneSessionCycle(c, 'cheap'))).toBeGreaterThan(0);
    await settled(client);
    await oneSessionCycle(c, 'cheap');
    expect(await infoCallsDuring(client, () => oneSessionCycle(c, 'cheap'))).toBe(0);
  });

  it('a claim whose lease is longer than its stamp says raises the slot’s: the wait after a loss covers it', async () => {
    const { server, client, c } = await started();
    await settled(client);
    await oneSessionCycle(c, 'longer'); // the slot knows 1 s leases; the next tokens' stamps say so
    const [first, second] = [await tokenFor(c, 'longer'), await tokenFor(c, 'longer')];
    const claim = await c.claims.claim(await admitted(c, first), { ...worker, leaseMs: 4000 });
    if (!claim.claimed) throw new Error('not claimed');
    expect(await client.hget(c.keys.user('longer').guard, 'lease')).toBe('4000');
    await c.claims.finish(claim.claim, 'completed', 0);
    // A claim of 2 s whose stamp says 1 s leaves the slot's 4 s as it is: a stamp's lease may be behind.
    const shorter = await c.claims.claim(await admitted(c, second), { ...worker, leaseMs: 2000 });
    if (!shorter.claimed) throw new Error('not claimed');
    expect(await client.hget(c.keys.user('longer').guard, 'lease')).toBe('4000');
    await c.claims.finish(shorter.claim, 'completed', 0);
    // A restart from this state waits out the 4 s lease, not the 1 s one the stamp said.
    await restartFrom(server, client, await snapshot(server, client));
    const waiting = await c.sessions.admit(await tokenFor(c, 'longer'));
    expect(waiting).toMatchObject({ outcome: 'state_uncertain' });
    expect((waiting as Extract<AdmitOutcome, { outcome: 'state_uncertain' }>).retryAfterMs).toBeGreaterThan(3000);
  });

  it('a restart in the very second of the last save is still told apart: a mark is kept only once its save is 2 s back', async () => {
    const { server, client, c } = await started();
    await settled(client);
    await oneSessionCycle(c, 'same-second'); // a mark of the start is kept
    await earlyInASecond(client, 150);
    await client.save();
    const savedIn = await client.lastsave();
    // In the second of the save: the guard is confirmed by INFO, and its mark dropped (not kept again).
    await oneSessionCycle(c, 'same-second');
    expect(await client.hget(c.keys.user('same-second').guard, 'mark')).toBeNull();
    const spent = await tokenFor(c, 'same-second');
    const kept = await snapshot(server, client);
    const lost = await runningClaim(c, spent); // lost with the restart
    await restartFrom(server, client, kept);
    // The new process's LASTSAVE is its start: the very second of the old one's last save.
    expect(await client.lastsave()).toBe(savedIn);

    expect(await c.sessions.admit(await tokenFor(c, 'same-second'))).toMatchObject({ outcome: 'state_uncertain' });
    expect(await c.claims.renew(lost.claim)).toMatchObject({ ok: false });
  });
});

describe('a clean restart (SHUTDOWN SAVE: nothing lost)', () => {
  it('pays the same wait: nothing Redis keeps tells it from a restart that lost writes', async () => {
    const { server, client, c } = await started();
    await settled(client);
    await oneSessionCycle(c, 'clean');
    const token = await tokenFor(c, 'clean');
    await client.save();
    await server.halt('SIGTERM');
    await server.resume();
    await until(async () => (await client.ping().catch(() => '')) === 'PONG', 10_000, 'Redis back');
    expect(await c.sessions.admit(token)).toMatchObject({ outcome: 'state_uncertain' });
  });
});

describe('a slot never used, on a Redis that started from nothing on disk', () => {
  it('admits at once, from fence 1: a guard is started without a wait', async () => {
    const { client, c } = await started();
    expect(await admitted(c, await tokenFor(c, 'fresh'))).toMatchObject({ fence: 1 });
    expect(await client.hget(c.keys.user('fresh').guard, 'until')).toBeNull();
  });
});

/** The default lease a slot waits out when no claim told it the lease in use (LEASE_MS's default). */
const DEFAULT_WAIT_MS = 15_000 + 250;

describe('a user whose first ever token and session were in the writes a restart lost (no guard survives)', () => {
  it('waits out the default lease from the restart, the lost session is refused its renewal, and the next fence is above the lost one', async () => {
    const { server, client, c } = await started();
    await oneSessionCycle(c, 'someone-else'); // the snapshot holds data: this Redis starts from disk
    const kept = await snapshot(server, client);
    const lost = await runningClaim(c, await tokenFor(c, 'brand-new'));
    expect(lost.fence).toBe(1);
    const killedAt = Date.now();
    await restartFrom(server, client, kept);
    const backAt = Date.now();
    expect(await client.exists(c.keys.user('brand-new').guard)).toBe(0);

    const waiting = await c.sessions.admit(await tokenFor(c, 'brand-new'));
    expect(waiting).toMatchObject({ outcome: 'state_uncertain' });
    const { retryAfterMs } = waiting as Extract<AdmitOutcome, { outcome: 'state_uncertain' }>;
    // From the restart (taken at the end of the second it started in), whatever the restart took here.
    expect(retryAfterMs).toBeGreaterThan(DEFAULT_WAIT_MS - (Date.now() - killedAt) - 1000);
    expect(retryAfterMs).toBeLessThanOrEqual(DEFAULT_WAIT_MS);
    expect(await c.claims.renew(lost.claim)).toMatchObject({ ok: false });
    let next: AdmitOutcome | undefined;
    const token = await tokenFor(c, 'brand-new');
    await until(
      async () => (next = await c.sessions.admit(token)).outcome !== 'state_uncertain',
      DEFAULT_WAIT_MS + 5000,
      'the wait over',
    );
    expect(Date.now()).toBeGreaterThanOrEqual(backAt + retryAfterMs - 100);
    expect(next).toMatchObject({ outcome: 'admitted' });
    expect((next as Extract<AdmitOutcome, { outcome: 'admitted' }>).fence).toBeGreaterThan(lost.fence);
  }, 30_000);
});

describe('a user whose first ever session was in the writes a promoted replica lacked', () => {
  it('waits out the default lease from the promotion, and the fence floor is set', async () => {
    const master = await started(['--repl-diskless-sync-delay', '0']);
    const replica = await started(['--replicaof', '127.0.0.1', String(master.server.port)]);
    await until(async () => (await master.client.wait(1, 100)) === 1, 10_000, 'the replica in sync');
    await replica.client.replicaof('127.0.0.1', '1'); // cut off: it gets none of what follows
    const lost = await runningClaim(master.c, await tokenFor(master.c, 'first-timer'));
    await master.server.halt('SIGKILL');
    await replica.client.replicaof('NO', 'ONE');

    const waiting = await replica.c.sessions.admit(await tokenFor(replica.c, 'first-timer'));
    expect(waiting).toMatchObject({ outcome: 'state_uncertain' });
    const { retryAfterMs } = waiting as Extract<AdmitOutcome, { outcome: 'state_uncertain' }>;
    expect(retryAfterMs).toBeGreaterThan(DEFAULT_WAIT_MS - 1000);
    expect(retryAfterMs).toBeLessThanOrEqual(DEFAULT_WAIT_MS);
    const floor = Number(await replica.client.hget(replica.c.keys.user('first-timer').guard, 'floor'));
    expect(floor).toBeGreaterThan(lost.fence);
    expect(floor).toBeGreaterThan((await redisMs(replica.client)) - 60_000);
  });
});

describe('a replica promoted without the master’s last writes', () => {
  it('waits from the promotion, and the fences go on rising', async () => {
    const master = await started(['--repl-diskless-sync-delay', '0']);
    const replica = await started(['--replicaof', '127.0.0.1', String(master.server.port)]);
    const user = 'promoted';
    // Both last saved in one second: LASTSAVE alone cannot tell them apart. The master, with a replica
    // connected, keeps no mark, so every call of its asks INFO.
    await until(async () => (await master.client.wait(1, 100)) === 1, 10_000, 'the replica in sync');
    await earlyInASecond(master.client, 500);
    await Promise.all([master.client.save(), replica.client.save()]);
    expect(await replica.client.lastsave()).toBe(await master.client.lastsave());
    await settled(master.client);
    await oneSessionCycle(master.c, user);
    expect(await master.client.hget(master.c.keys.user(user).guard, 'mark')).toBeNull();
    const held = await tokenFor(master.c, user);
    // Everything so far reached the replica; then the replica is cut off and the master goes on alone.
    await until(async () => (await master.client.wait(1, 100)) === 1, 10_000, 'the replica in sync');
    await replica.client.replicaof('127.0.0.1', '1'); // points it nowhere: it keeps its data, gets no more
    const lost = await runningClaim(master.c, held);
    await master.server.halt('SIGKILL');
    await replica.client.replicaof('NO', 'ONE');

    const promotedAt = Date.now();
    const waiting = await replica.c.sessions.admit(await tokenFor(replica.c, user));
    expect(waiting).toMatchObject({ outcome: 'state_uncertain' });
    const { retryAfterMs } = waiting as Extract<AdmitOutcome, { outcome: 'state_uncertain' }>;
    expect(retryAfterMs).toBeGreaterThan(LEASE_MS);
    expect(retryAfterMs).toBeLessThanOrEqual(LEASE_MS + 1000);
    // The token held back is on the replica, unspent; it was issued before the promotion: refused.
    let afterWait: AdmitOutcome | undefined;
    await until(
      async () => (afterWait = await replica.c.sessions.admit(held)).outcome !== 'state_uncertain',
      retryAfterMs + 5000,
      'the wait over',
    );
    expect(Date.now()).toBeGreaterThanOrEqual(promotedAt + retryAfterMs - 100);
    expect(afterWait).toEqual({ outcome: 'token_invalid', issuedBeforeLoss: true });
    const next = await admitted(replica.c, await tokenFor(replica.c, user));
    expect(next.fence).toBeGreaterThan(lost.fence);
  });
});
