import { describe, expect, it } from 'vitest';
import { WEBHOOK_DISPATCH_LEASE } from '../keys.js';
import type { Lease } from '../liveness/lease.js';
import { testCoordinator } from '../test-support/setup.js';

describe('the webhook dispatch cursor', () => {
  const coordinator = testCoordinator();
  const { leases, webhooks } = coordinator;

  async function take(): Promise<Lease> {
    const got = await leases.acquire(WEBHOOK_DISPATCH_LEASE, { leaseMs: 10_000, maxLifetimeMs: 60_000 });
    if (!got.acquired) throw new Error('the dispatch lease is held');
    return got.lease;
  }

  it('moves forward for the lease holder, and a stale holder cannot move it after a takeover', async () => {
    const first = await take();
    expect(await webhooks.setCursor('1000-5-3', first)).toBe('moved');
    expect(await webhooks.cursor()).toBe('1000-5-3');

    // The first holder's lease ends (here released; an expiry is the same to the script) and another
    // process takes it over, with a higher fence. The first has not noticed yet.
    await leases.release(first);
    const second = await take();
    expect(second.fence).toBeGreaterThan(first.fence);

    expect(await webhooks.setCursor('2000-0-0', first)).toBe('lease_lost');
    expect(await webhooks.cursor()).toBe('1000-5-3');
    expect(await webhooks.setCursor('1500-0-0', second)).toBe('moved');
    expect(await webhooks.cursor()).toBe('1500-0-0');
    await leases.release(second);
  });

  it('is not written without the lease', async () => {
    const lease = await take();
    await leases.release(lease);
    expect(await webhooks.setCursor('3000-0-0', lease)).toBe('lease_lost');
    expect(await webhooks.cursor()).toBe('1500-0-0');
  });

  it('never moves backwards, comparing ids as numbers part by part', async () => {
    const lease = await take();
    expect(await webhooks.setCursor('99999-9-9', lease)).toBe('moved');
    // Smaller as numbers though larger as strings ('9' > '1'), or equal: refused, the cursor unchanged.
    for (const behind of ['9999-9-9', '99999-8-99', '99999-9-8', '99999-9-9'])
      expect(await webhooks.setCursor(behind, lease), behind).toBe('not_forward');
    expect(await webhooks.cursor()).toBe('99999-9-9');
    // Larger as numbers though smaller as strings.
    expect(await webhooks.setCursor('99999-10-0', lease)).toBe('moved');
    expect(await webhooks.setCursor('100000-0-0', lease)).toBe('moved');
    expect(await webhooks.setCursor('100000-0-10', lease)).toBe('moved');
    expect(await webhooks.setCursor('100000-0-9', lease)).toBe('not_forward');
    expect(await webhooks.cursor()).toBe('100000-0-10');
    await leases.release(lease);
  });

  it('refuses an id that is not an event id, and a lease other than the dispatch lease, before sending anything', async () => {
    const lease = await take();
    await expect(webhooks.setCursor('1-2', lease)).rejects.toMatchObject({ code: 'invalid_argument' });
    await expect(webhooks.setCursor('9-9-9', { ...lease, resource: 'other' })).rejects.toMatchObject({
      code: 'invalid_argument',
    });
    await leases.release(lease);
  });
});
