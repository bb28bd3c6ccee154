import { describe, expect, it } from 'vitest';
import { FailedAttemptLimiter } from './failed-attempts.js';

describe('FailedAttemptLimiter', () => {
  it('blocks an address after `limit` failures within the window, says for how long, and forgets it after', () => {
    const limiter = new FailedAttemptLimiter({ limit: 3, windowMs: 1000 });
    for (let i = 0; i < 3; i++) {
      expect(limiter.check('a', 100 + i)).toBeUndefined();
      limiter.fail('a', 100 + i);
    }
    expect(limiter.check('a', 500)).toEqual({ retryAfterMs: 600 });
    expect(limiter.check('b', 500)).toBeUndefined();
    expect(limiter.check('a', 1100)).toBeUndefined();
    limiter.fail('a', 1100);
    expect(limiter.check('a', 1101)).toBeUndefined();
  });

  it('remembers at most maxAddresses, forgetting the oldest first', () => {
    const limiter = new FailedAttemptLimiter({ limit: 1, windowMs: 10_000, maxAddresses: 2 });
    limiter.fail('a', 0);
    limiter.fail('b', 1);
    limiter.fail('c', 2);
    expect(limiter.check('a', 3)).toBeUndefined();
    expect(limiter.check('b', 3)).toEqual({ retryAfterMs: 9998 });
    expect(limiter.check('c', 3)).toEqual({ retryAfterMs: 9999 });
  });
});
