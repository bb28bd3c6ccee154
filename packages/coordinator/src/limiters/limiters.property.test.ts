import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { elapse, testCoordinator } from '../test-support/setup.js';

/**
 * Property tests with real arrival sequences: fast-check draws the gaps between calls (and the
 * limits); the calls are made against real Redis at those moments. Times are measured on this side,
 * so each bound allows for a slow round trip on a busy machine (TOLERANCE, ms).
 */
const TOLERANCE = 25;

interface Call {
  readonly at: number;
  readonly allowed: boolean;
}

async function play(check: () => Promise<{ allowed: boolean }>, gaps: readonly number[]): Promise<Call[]> {
  const calls: Call[] = [];
  for (const gap of gaps) {
    if (gap > 0) await elapse(gap); // the arrival sequence is the input: its gaps are real time
    const at = performance.now();
    const { allowed } = await check();
    calls.push({ at, allowed });
  }
  return calls;
}

/** Allowed calls with `at` in [from, to]. */
const allowedIn = (calls: readonly Call[], from: number, to: number): number =>
  calls.filter((c) => c.allowed && c.at >= from && c.at <= to).length;

const sequences = fc.record({
  limit: fc.integer({ min: 1, max: 4 }),
  windowMs: fc.integer({ min: 120, max: 250 }),
  gaps: fc.array(fc.oneof(fc.constant(0), fc.integer({ min: 1, max: 60 })), { minLength: 4, maxLength: 24 }),
});

describe('limiter properties (fast-check, real Redis, real time)', () => {
  const coordinator = testCoordinator();
  let run = 0;

  it('sliding window: never more than the limit in any window, and never a rejection the limit allows', async () => {
    await fc.assert(
      fc.asyncProperty(sequences, async ({ limit, windowMs, gaps }) => {
        const limiter = coordinator.slidingWindowLimiter({ name: `p${run++}`, limit, windowMs });
        const calls = await play(() => limiter.check('u'), gaps);
        for (const call of calls) {
          // Any window that ends at an allowed call holds at most `limit` allowed calls.
          if (call.allowed)
            expect(allowedIn(calls, call.at - windowMs + TOLERANCE, call.at)).toBeLessThanOrEqual(limit);
          // A rejected call had `limit` allowed calls within the window before it.
          else expect(allowedIn(calls, call.at - windowMs - TOLERANCE, call.at)).toBeGreaterThanOrEqual(limit);
        }
      }),
      { numRuns: 12 },
    );
  });

  it('GCRA: never more than burst + elapsed / interval admitted in any span, and the first `burst` calls are always admitted', async () => {
    await fc.assert(
      fc.asyncProperty(sequences, async ({ limit: burst, windowMs: intervalMs, gaps }) => {
        const limiter = coordinator.gcraLimiter({ name: `p${run++}`, intervalMs, burst });
        const calls = await play(() => limiter.check('u'), gaps);
        const allowed = calls.filter((c) => c.allowed);
        for (let i = 0; i < allowed.length; i++) {
          for (let j = i; j < allowed.length; j++) {
            const span = allowed[j]!.at - allowed[i]!.at;
            expect(j - i + 1).toBeLessThanOrEqual(burst + Math.floor((span + TOLERANCE) / intervalMs));
          }
        }
        expect(calls.slice(0, burst).every((c) => c.allowed)).toBe(true);
      }),
      { numRuns: 12 },
    );
  });

  it('fixed window: never more than the limit in the window, and the first `limit` calls are always admitted', async () => {
    await fc.assert(
      fc.asyncProperty(sequences, async ({ limit, windowMs, gaps }) => {
        const limiter = coordinator.fixedWindowLimiter({ name: `p${run++}`, limit, windowMs });
        const calls = await play(() => limiter.check('u'), gaps);
        // The first call opens a window; within it (shrunk by the tolerance, as its end is seen from
        // this side) at most `limit` calls are admitted. Later windows open at calls this side cannot
        // place exactly, so the bound is checked on the first one.
        const opener = calls[0]!;
        expect(allowedIn(calls, opener.at, opener.at + windowMs - TOLERANCE)).toBeLessThanOrEqual(limit);
        expect(calls.slice(0, limit).every((c) => c.allowed)).toBe(true);
      }),
      { numRuns: 12 },
    );
  });
});
