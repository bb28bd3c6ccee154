import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { RedisGauges } from './redis-gauges.js';

/** A read the test answers by hand: each call waits until the test settles it. */
function read() {
  const pending: Array<{ resolve: () => void; reject: (err: Error) => void }> = [];
  const fn = vi.fn(() => new Promise<void>((resolve, reject) => pending.push({ resolve, reject })));
  return { fn, pending };
}

describe('RedisGauges (fake timers)', () => {
  beforeEach(() => vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout', 'performance'] }));
  afterEach(() => vi.useRealTimers());

  it('runs every read together at most once per interval: refreshes within it share that round, the first after it starts the next', async () => {
    const gauges = new RedisGauges({ everyMs: 5000 });
    const slots = read();
    const queue = read();
    gauges.add('slots', slots.fn);
    gauges.add('queue', queue.fn);

    const scrapes = [gauges.refresh(), gauges.refresh(), gauges.refresh()];
    expect(slots.fn).toHaveBeenCalledTimes(1);
    expect(queue.fn).toHaveBeenCalledTimes(1);
    // Scrapes during the round wait for it: none is answered before its reads are.
    let answered = 0;
    for (const scrape of scrapes) void scrape.then(() => answered++);
    await vi.advanceTimersByTimeAsync(10);
    expect(answered).toBe(0);
    slots.pending.shift()!.resolve();
    queue.pending.shift()!.resolve();
    await vi.advanceTimersByTimeAsync(0);
    expect(answered).toBe(3);

    await vi.advanceTimersByTimeAsync(5000 - 11);
    await gauges.refresh();
    expect(slots.fn).toHaveBeenCalledTimes(1);
    await vi.advanceTimersByTimeAsync(1);
    const next = gauges.refresh();
    expect(slots.fn).toHaveBeenCalledTimes(2);
    expect(queue.fn).toHaveBeenCalledTimes(2);
    slots.pending.shift()!.resolve();
    queue.pending.shift()!.resolve();
    await next;
  });

  it('a scrape waits for a round at most the budget; a read that fails is reported and the others count', async () => {
    const failed = vi.fn();
    const gauges = new RedisGauges({ everyMs: 5000, budgetMs: 1000, onError: failed });
    const away = read();
    const broken = read();
    const fine = read();
    gauges.add('away', away.fn);
    gauges.add('broken', broken.fn);
    gauges.add('fine', fine.fn);

    let answered = false;
    void gauges.refresh().then(() => (answered = true));
    broken.pending.shift()!.reject(new Error('NOPERM'));
    fine.pending.shift()!.resolve();
    await vi.advanceTimersByTimeAsync(999);
    expect(answered).toBe(false);
    expect(failed).toHaveBeenCalledWith('broken', expect.objectContaining({ message: 'NOPERM' }));
    await vi.advanceTimersByTimeAsync(1);
    expect(answered).toBe(true);
    // The read still out is not started again within the interval.
    await gauges.refresh();
    expect(away.fn).toHaveBeenCalledTimes(1);
  });

  it('two reads may not take one name', () => {
    const gauges = new RedisGauges();
    gauges.add('slots', async () => {});
    expect(() => gauges.add('slots', async () => {})).toThrow('a Redis gauge read named slots is already added');
  });
});
