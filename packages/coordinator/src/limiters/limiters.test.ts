import { describe, expect, it } from 'vitest';
import type { Coordinator } from '../coordinator.js';
import { connectionPool, coordinatorsOn, elapse, testCoordinator } from '../test-support/setup.js';
import type { RateLimiter } from './limiters.js';

type Make = (c: Coordinator, name: string, limit: number, windowMs: number) => RateLimiter;

const kinds: Array<[string, Make]> = [
  [
    'gcra',
    (c, name, limit, windowMs) => c.gcraLimiter({ name, burst: limit, intervalMs: Math.ceil(windowMs / limit) }),
  ],
  ['fixed window', (c, name, limit, windowMs) => c.fixedWindowLimiter({ name, limit, windowMs })],
  ['sliding window', (c, name, limit, windowMs) => c.slidingWindowLimiter({ name, limit, windowMs })],
];

describe.each(kinds)('%s limiter', (kind, make) => {
  const coordinator = testCoordinator();
  const name = kind.replace(' ', '-');

  it('1,000 simultaneous calls against a limit of 5 per window: exactly 5 allowed', async () => {
    const callers = coordinatorsOn(connectionPool(50), coordinator).map((c) => make(c, name, 5, 60_000));
    const results = await Promise.all(
      Array.from({ length: 1000 }, (_, i) => callers[i % callers.length]!.check('seed-attack')),
    );
    expect(results.filter((r) => r.allowed)).toHaveLength(5);
    const remaining = results
      .filter((r) => r.allowed)
      .map((r) => r.remaining)
      .sort();
    expect(remaining).toEqual([0, 1, 2, 3, 4]);
    for (const rejected of results.filter((r) => !r.allowed)) {
      expect(rejected).toMatchObject({ limit: 5, remaining: 0 });
      expect(rejected.retryAfterMs).toBeGreaterThan(0);
    }
  });

  it('a rejected call consumes no quota: retry advice stays the same after many rejections', async () => {
    const limiter = make(coordinator, name, 2, 60_000);
    await limiter.check('no-quota');
    await limiter.check('no-quota');
    const first = await limiter.check('no-quota');
    for (let i = 0; i < 50; i++) await limiter.check('no-quota');
    const later = await limiter.check('no-quota');
    expect(first.allowed).toBe(false);
    expect(later.allowed).toBe(false);
    // Only time passed between the two: the advice shrank by at most that, never grew.
    expect(later.retryAfterMs).toBeLessThanOrEqual(first.retryAfterMs);
    expect(first.retryAfterMs - later.retryAfterMs).toBeLessThan(1000);
  });

  it('a call immediately after a rejection is rejected; a call retryAfterMs later is allowed', async () => {
    const limiter = make(coordinator, name, 3, 600);
    const id = 'retry-advice';
    let rejected;
    for (;;) {
      const r = await limiter.check(id);
      if (!r.allowed) {
        rejected = r;
        break;
      }
    }
    expect((await limiter.check(id)).allowed).toBe(false);
    expect(rejected.retryAfterMs).toBeGreaterThan(0);
    expect(rejected.retryAfterMs).toBeLessThanOrEqual(601);
    await elapse(rejected.retryAfterMs); // the claim is about this exact wait
    const after = await limiter.check(id);
    expect(after.allowed).toBe(true);
  });

  it('separate ids have separate quotas', async () => {
    const limiter = make(coordinator, name, 1, 60_000);
    expect((await limiter.check('id-a')).allowed).toBe(true);
    expect((await limiter.check('id-b')).allowed).toBe(true);
    expect((await limiter.check('id-a')).allowed).toBe(false);
  });
});

describe('gcra limiter', () => {
  const coordinator = testCoordinator();

  it('allows a burst, then one call per interval, with exact advice', async () => {
    const limiter = coordinator.gcraLimiter({ name: 'burst', intervalMs: 400, burst: 2 });
    const [a, b, c] = [await limiter.check('u'), await limiter.check('u'), await limiter.check('u')];
    expect([a.allowed, b.allowed, c.allowed]).toEqual([true, true, false]);
    expect(a.remaining).toBe(1);
    expect(b.remaining).toBe(0);
    expect(c.retryAfterMs).toBeGreaterThan(300);
    expect(c.retryAfterMs).toBeLessThanOrEqual(400);
    await elapse(c.retryAfterMs);
    expect((await limiter.check('u')).allowed).toBe(true);
    expect((await limiter.check('u')).allowed).toBe(false);
  });

  it('the limiter key expires once the quota is full again', async () => {
    const limiter = coordinator.gcraLimiter({ name: 'ttl', intervalMs: 5000 });
    await limiter.check('u');
    const pttl = await coordinator.redis.pttl(coordinator.keys.limiter('ttl', 'u'));
    expect(pttl).toBeGreaterThan(4000);
    expect(pttl).toBeLessThanOrEqual(5000);
  });
});

describe('sliding window limiter', () => {
  const coordinator = testCoordinator();

  it('keeps at most limit entries, whatever the traffic', async () => {
    const limiter = coordinator.slidingWindowLimiter({ name: 'cap', limit: 7, windowMs: 60_000 });
    await Promise.all(Array.from({ length: 300 }, () => limiter.check('u')));
    expect(await coordinator.redis.zcard(coordinator.keys.limiter('cap', 'u'))).toBe(7);
  });
});
