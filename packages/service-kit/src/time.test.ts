import { setTimeout as sleep } from 'node:timers/promises';
import { describe, expect, it } from 'vitest';
import { BUDGET, attempt, retryWhile, settleWithin } from './time.js';

class Outage extends Error {}

describe('time', () => {
  it('derives every bound from the contract answer budget of 2 s', () => {
    expect(BUDGET).toEqual({ answerMs: 2000, commandMs: 1500, readyMs: 1000, connectMs: 2000 });
  });

  it('settleWithin: true when the work settles in time (failure included), false when it does not', async () => {
    expect(await settleWithin(sleep(5), 200)).toBe(true);
    expect(await settleWithin(Promise.reject(new Error('boom')), 200)).toBe(true);
    expect(await settleWithin(undefined, 200)).toBe(true);
    const started = performance.now();
    expect(await settleWithin(new Promise(() => {}), 50)).toBe(false);
    expect(performance.now() - started).toBeLessThan(500);
  });

  it('retryWhile retries only the named error, backing off, and gives up when the time is out', async () => {
    let calls = 0;
    const flaky = async (): Promise<string> => {
      if (++calls < 3) throw new Outage('down');
      return 'done';
    };
    expect(await retryWhile(Outage, flaky, { initialDelayMs: 5, maxDelayMs: 20, giveUpAfterMs: 1000 })).toBe('done');
    expect(calls).toBe(3);

    let other = 0;
    const bug = async (): Promise<never> => {
      other++;
      throw new TypeError('bug');
    };
    await expect(retryWhile(Outage, bug, { initialDelayMs: 5, maxDelayMs: 20, giveUpAfterMs: 1000 })).rejects.toThrow(
      'bug',
    );
    expect(other).toBe(1);

    const started = performance.now();
    const always = async (): Promise<never> => Promise.reject(new Outage('still down'));
    await expect(
      retryWhile(Outage, always, { initialDelayMs: 5, maxDelayMs: 20, giveUpAfterMs: 100 }),
    ).rejects.toThrow();
    expect(performance.now() - started).toBeLessThan(1000);
  });

  it('attempt runs the work at most the given number of times', async () => {
    let calls = 0;
    await expect(
      attempt(
        async () => {
          calls++;
          throw new Error('no');
        },
        3,
        5,
      ),
    ).rejects.toThrow('no');
    expect(calls).toBe(3);
  });
});
