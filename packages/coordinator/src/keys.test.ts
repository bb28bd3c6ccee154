import { describe, expect, it } from 'vitest';
import { Keys } from './keys.js';
import { SLOT_COUNT, slotOf } from './slots.js';

describe('spawn-queue shard keys', () => {
  const keys = new Keys('cq');

  it('puts shard i of n in the middle of the i-th n-th of the slot space', () => {
    for (const n of [1, 2, 3, 7, 64]) {
      for (let i = 0; i < n; i++) {
        const slot = slotOf(`${keys.queuePrefix(i, n)}:spawn:wait`);
        expect(slot).toBeGreaterThanOrEqual((i * SLOT_COUNT) / n);
        expect(slot).toBeLessThan(((i + 1) * SLOT_COUNT) / n);
      }
    }
  });

  it("maps a user to the shard whose share of the slot space holds the user's slot", () => {
    const n = 3;
    const counts = [0, 0, 0];
    for (let u = 0; u < 3000; u++) {
      const userId = `user-${u}`;
      const shard = keys.queueShardOf(userId, n);
      counts[shard]!++;
      const userSlot = slotOf(keys.user(userId).session);
      expect(Math.floor((userSlot * n) / SLOT_COUNT)).toBe(shard);
    }
    // Spread evenly: each shard within 10% of a third.
    for (const count of counts) expect(Math.abs(count - 1000)).toBeLessThan(100);
  });

  it('refuses shard numbers outside the range, naming it', () => {
    expect(() => keys.queuePrefix(3, 3)).toThrow('shard index must be an integer from 0 to 2 (got 3)');
    expect(() => keys.queueShardOf('u', 0)).toThrow('shard count must be an integer from 1 to 16384 (got 0)');
  });
});
