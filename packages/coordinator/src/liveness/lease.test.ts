import { Redis } from 'ioredis';
import { describe, expect, it, onTestFinished } from 'vitest';
import { startRedisServer } from '@cq/test-harness';
import { Coordinator } from '../coordinator.js';
import type { LeaseLostError } from './keepalive.js';
import { abortedWithin, elapse, testCoordinator } from '../test-support/setup.js';

describe('leases', () => {
  const coordinator = testCoordinator();
  const leases = coordinator.leases;

  it('a second acquire is refused while the lease is held, with the time it has left', async () => {
    const first = await leases.acquire('held', { leaseMs: 10_000, maxLifetimeMs: 60_000 });
    const second = await leases.acquire('held', { leaseMs: 10_000, maxLifetimeMs: 60_000 });
    expect(first.acquired).toBe(true);
    expect(second).toMatchObject({ acquired: false });
    if (second.acquired) throw new Error('unreachable');
    expect(second.retryAfterMs).toBeGreaterThan(9000);
  });

  it('a lease cannot be renewed or released by a non-owner', async () => {
    const got = await leases.acquire('owned', { leaseMs: 10_000, maxLifetimeMs: 60_000 });
    if (!got.acquired) throw new Error('not acquired');
    const impostor = { ...got.lease, owner: 'someone-else' };
    expect(await leases.renew(impostor)).toEqual({ ok: false, reason: 'lease_lost' });
    expect(await leases.release(impostor)).toBe(false);
    expect(await coordinator.redis.exists(coordinator.keys.lease('owned').lease)).toBe(1);
    expect(await leases.renew(got.lease)).toMatchObject({ ok: true });
    expect(await leases.release(got.lease)).toBe(true);
    expect(await leases.release(got.lease)).toBe(false);
  });

  it('a lease cannot be renewed past its hard deadline', async () => {
    const got = await leases.acquire('capped', { leaseMs: 10_000, maxLifetimeMs: 300 });
    if (!got.acquired) throw new Error('not acquired');
    expect(got.lease.expiresAt).toBe(got.lease.deadline);
    const renewed = await leases.renew(got.lease);
    if (!renewed.ok) throw new Error('renewal refused early');
    expect(renewed.expiresAt).toBe(got.lease.deadline);
    await elapse(got.lease.deadline - renewed.expiresAt + renewed.ttlMs + 5); // until the deadline
    expect((await leases.renew(got.lease)).ok).toBe(false);
    expect(await coordinator.redis.exists(coordinator.keys.lease('capped').lease)).toBe(0);
  });

  it('fences strictly increase across acquire → expire → acquire, and across release', async () => {
    const fences: number[] = [];
    for (let i = 0; i < 3; i++) {
      const got = await leases.acquire('fenced', { leaseMs: 60, maxLifetimeMs: 10_000 });
      if (!got.acquired) throw new Error('not acquired');
      fences.push(got.lease.fence);
      await elapse(80); // let the 60 ms lease expire on its own
      expect(await coordinator.redis.exists(coordinator.keys.lease('fenced').lease)).toBe(0);
    }
    const again = await leases.acquire('fenced', { leaseMs: 10_000, maxLifetimeMs: 10_000 });
    if (!again.acquired) throw new Error('not acquired');
    await leases.release(again.lease);
    const last = await leases.acquire('fenced', { leaseMs: 10_000, maxLifetimeMs: 10_000 });
    if (!last.acquired) throw new Error('not acquired');
    fences.push(again.lease.fence, last.lease.fence);
    for (let i = 1; i < fences.length; i++) expect(fences[i]).toBeGreaterThan(fences[i - 1]!);
  });

  it('300 simultaneous acquires from separate clients: exactly one owner', async () => {
    const others = Array.from(
      { length: 30 },
      () => new Coordinator({ redis: new Redis(coordinator.redis.options), keyPrefix: coordinator.keys.prefix }),
    );
    onTestFinished(() => others.forEach((c) => c.redis.disconnect()));
    const outcomes = await Promise.all(
      Array.from({ length: 300 }, (_, i) =>
        others[i % 30]!.leases.acquire('contended', { leaseMs: 10_000, maxLifetimeMs: 10_000 }),
      ),
    );
    expect(outcomes.filter((o) => o.acquired)).toHaveLength(1);
  });
});

describe('keepalive', () => {
  const coordinator = testCoordinator();
  const leases = coordinator.leases;

  it('keeps a lease alive well past its time to live while the owner lives', async () => {
    const got = await leases.acquire('kept', { leaseMs: 150, maxLifetimeMs: 60_000 });
    if (!got.acquired) throw new Error('not acquired');
    const keepalive = leases.keepalive(got.lease);
    await elapse(600); // four times the lease
    expect(keepalive.signal.aborted).toBe(false);
    expect(await coordinator.redis.hget(coordinator.keys.lease('kept').lease, 'o')).toBe(got.lease.owner);
    keepalive.stop();
    expect(await leases.release(got.lease)).toBe(true);
  });

  it('aborts within one renewal interval when the key is deleted behind its back', async () => {
    const got = await leases.acquire('deleted', { leaseMs: 3000, maxLifetimeMs: 60_000 });
    if (!got.acquired) throw new Error('not acquired');
    const keepalive = leases.keepalive(got.lease, { intervalMs: 1000 });
    await coordinator.redis.del(coordinator.keys.lease('deleted').lease);
    const took = await abortedWithin(keepalive.signal);
    // One interval, and room for a busy 2-core machine's event loop (the interval is long beside it).
    expect(took).toBeLessThanOrEqual(1000 + 250);
    expect((keepalive.signal.reason as LeaseLostError).code).toBe('lease_lost');
  });

  it('aborts within one renewal interval of the deadline', async () => {
    const got = await leases.acquire('deadline', { leaseMs: 3000, maxLifetimeMs: 500 });
    if (!got.acquired) throw new Error('not acquired');
    const keepalive = leases.keepalive(got.lease, { intervalMs: 200 });
    const took = await abortedWithin(keepalive.signal);
    expect(took).toBeLessThanOrEqual(500 + 200);
    expect((keepalive.signal.reason as LeaseLostError).code).toBe('deadline_reached');
    // The local view ends no later than Redis's: the key may not outlive the abort by more than a moment.
    expect(await coordinator.redis.pttl(coordinator.keys.lease('deadline').lease)).toBeLessThanOrEqual(50);
  });

  it('aborts within one renewal interval of the lease running out while Redis is stopped', async () => {
    const server = await startRedisServer();
    onTestFinished(() => server.stop());
    const redis = new Redis(server.url, { maxRetriesPerRequest: 1, commandTimeout: 200 });
    redis.on('error', () => {});
    onTestFinished(() => redis.disconnect());
    const own = new Coordinator({ redis });
    const got = await own.leases.acquire('outage', { leaseMs: 900, maxLifetimeMs: 60_000 });
    if (!got.acquired) throw new Error('not acquired');
    const errors: unknown[] = [];
    const keepalive = own.leases.keepalive(got.lease, { intervalMs: 300, onError: (err) => errors.push(err) });
    await server.halt('SIGKILL');
    const stoppedAt = performance.now();
    const took = await abortedWithin(keepalive.signal);
    // Redis last renewed it at most one interval before it stopped; the lease ran out leaseMs after that.
    // (the watchdog fires at the instant the lease runs out; what is beyond it is event-loop lag)
    expect(took).toBeLessThanOrEqual(900 + 150);
    expect(performance.now() - stoppedAt).toBeGreaterThanOrEqual(900 - 300 - 50);
    expect((keepalive.signal.reason as LeaseLostError).code).toBe('lease_lost');
    expect(errors.length).toBeGreaterThan(0);
  });
});
