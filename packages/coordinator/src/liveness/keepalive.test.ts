import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { Keepalive, LeaseLostError, type RenewAnswer } from './keepalive.js';

/** Renewals the test answers by hand: each call waits until the test resolves or rejects it. */
function renewals() {
  const pending: Array<{ resolve: (a: RenewAnswer) => void; reject: (e: Error) => void }> = [];
  const renew = vi.fn(() => new Promise<RenewAnswer>((resolve, reject) => pending.push({ resolve, reject })));
  return { renew, pending };
}

describe('Keepalive (fake timers)', () => {
  beforeEach(() =>
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout', 'setInterval', 'clearInterval', 'performance'] }),
  );
  afterEach(() => vi.useRealTimers());

  it('renews every interval and holds while renewals get through; holdsUntil moves with each, less the margin', async () => {
    const { renew, pending } = renewals();
    const keepalive = new Keepalive({ renew, intervalMs: 1000, ttlMs: 3000, marginMs: 300 }).start();
    expect(keepalive.holdsUntil).toBe(performance.now() + 3000 - 300);
    for (let i = 0; i < 10; i++) {
      await vi.advanceTimersByTimeAsync(1000);
      const sentAt = performance.now();
      pending.shift()!.resolve({ ok: true, ttlMs: 3000 });
      await vi.advanceTimersByTimeAsync(0);
      expect(keepalive.holdsUntil).toBe(sentAt + 3000 - 300);
    }
    expect(renew).toHaveBeenCalledTimes(10);
    expect(keepalive.signal.aborted).toBe(false);
    keepalive.stop();
  });

  it('aborts with lease_lost as soon as a renewal is refused', async () => {
    const { renew, pending } = renewals();
    const keepalive = new Keepalive({ renew, intervalMs: 1000, ttlMs: 3000 }).start();
    await vi.advanceTimersByTimeAsync(1000);
    pending.shift()!.resolve({ ok: false, reason: 'lease_lost' });
    await vi.advanceTimersByTimeAsync(0);
    expect(keepalive.signal.aborted).toBe(true);
    expect(keepalive.signal.reason).toBeInstanceOf(LeaseLostError);
    expect((keepalive.signal.reason as LeaseLostError).code).toBe('lease_lost');
  });

  it('with Redis unreachable, keeps trying and aborts exactly when the lease would run out, less the margin', async () => {
    const { renew, pending } = renewals();
    const errors: unknown[] = [];
    const keepalive = new Keepalive({
      renew,
      intervalMs: 1000,
      ttlMs: 3000,
      marginMs: 300,
      onError: (e) => errors.push(e),
    }).start();
    await vi.advanceTimersByTimeAsync(1000);
    pending.shift()!.reject(new Error('connection refused'));
    await vi.advanceTimersByTimeAsync(1000);
    pending.shift()!.reject(new Error('connection refused'));
    await vi.advanceTimersByTimeAsync(699);
    expect(keepalive.signal.aborted).toBe(false);
    await vi.advanceTimersByTimeAsync(1);
    expect(keepalive.signal.aborted).toBe(true);
    expect((keepalive.signal.reason as LeaseLostError).code).toBe('lease_lost');
    expect(errors).toHaveLength(2);
  });

  it('aborts with deadline_reached at the hard deadline, less the margin, however well renewals go', async () => {
    const { renew, pending } = renewals();
    const keepalive = new Keepalive({
      renew,
      intervalMs: 1000,
      ttlMs: 3000,
      deadlineInMs: 2500,
      marginMs: 300,
    }).start();
    await vi.advanceTimersByTimeAsync(1000);
    pending.shift()!.resolve({ ok: true, ttlMs: 3000, deadlineInMs: 1500 });
    await vi.advanceTimersByTimeAsync(1000);
    pending.shift()!.resolve({ ok: true, ttlMs: 3000, deadlineInMs: 500 });
    await vi.advanceTimersByTimeAsync(199);
    expect(keepalive.signal.aborted).toBe(false);
    await vi.advanceTimersByTimeAsync(1);
    expect((keepalive.signal.reason as LeaseLostError).code).toBe('deadline_reached');
  });

  it('stop() ends the renewals without aborting', async () => {
    const { renew } = renewals();
    const keepalive = new Keepalive({ renew, intervalMs: 1000, ttlMs: 3000 }).start();
    keepalive.stop();
    await vi.advanceTimersByTimeAsync(10_000);
    expect(renew).not.toHaveBeenCalled();
    expect(keepalive.signal.aborted).toBe(false);
  });
  it('renewNow() during a renewal in flight sends one more as soon as that one is answered, not two at once', async () => {
    const { renew, pending } = renewals();
    const keepalive = new Keepalive({ renew, intervalMs: 5000, ttlMs: 15_000 }).start();
    keepalive.renewNow();
    expect(renew).toHaveBeenCalledTimes(1);
    // Asked again (twice) while the first is in flight: it may have been sent before the change.
    keepalive.renewNow();
    keepalive.renewNow();
    expect(renew).toHaveBeenCalledTimes(1);
    pending.shift()!.resolve({ ok: true, ttlMs: 15_000 });
    await vi.advanceTimersByTimeAsync(0);
    expect(renew).toHaveBeenCalledTimes(2);
    pending.shift()!.resolve({ ok: true, ttlMs: 15_000 });
    await vi.advanceTimersByTimeAsync(0);
    expect(renew).toHaveBeenCalledTimes(2);
    keepalive.stop();
  });

  it('a failed renewal is tried again after retryMs, not a whole interval later; a success goes back to the interval', async () => {
    const { renew, pending } = renewals();
    const keepalive = new Keepalive({ renew, intervalMs: 5000, retryMs: 1000, ttlMs: 15_000 }).start();
    await vi.advanceTimersByTimeAsync(5000);
    pending.shift()!.reject(new Error('connection refused'));
    await vi.advanceTimersByTimeAsync(999);
    expect(renew).toHaveBeenCalledTimes(1);
    await vi.advanceTimersByTimeAsync(1);
    expect(renew).toHaveBeenCalledTimes(2);
    pending.shift()!.resolve({ ok: true, ttlMs: 15_000 });
    await vi.advanceTimersByTimeAsync(2000);
    // The next is the interval's (at 10 s), no retry in between.
    expect(renew).toHaveBeenCalledTimes(2);
    await vi.advanceTimersByTimeAsync(3000);
    expect(renew).toHaveBeenCalledTimes(3);
    expect(keepalive.signal.aborted).toBe(false);
    keepalive.stop();
  });
  it('with a cover, holds only while both the renewals and the cover do: refresh() moves the watchdog with the cover, retime() the renewals', async () => {
    const { renew, pending } = renewals();
    let cover = performance.now() + 1000;
    const keepalive = new Keepalive({
      renew,
      intervalMs: 1000,
      ttlMs: 60_000,
      marginMs: 100,
      cover: () => cover,
    }).start();
    // The cover is the earlier end: the signal would abort at it, less the margin.
    expect(keepalive.holdsUntil).toBe(cover - 100);
    keepalive.retime(20_000);
    await vi.advanceTimersByTimeAsync(800);
    cover = performance.now() + 1000;
    expect(keepalive.refresh()).toBe(cover - 100);
    // No renewal was due (every 20 s now): the cover alone kept it.
    expect(renew).not.toHaveBeenCalled();
    await vi.advanceTimersByTimeAsync(899);
    expect(keepalive.signal.aborted).toBe(false);
    await vi.advanceTimersByTimeAsync(1);
    expect(keepalive.signal.aborted).toBe(true);
    expect((keepalive.signal.reason as LeaseLostError).code).toBe('lease_lost');
    expect(pending).toHaveLength(0);
  });

  it('a cover that ends now (the host lease lost) aborts at the next refresh()', async () => {
    const { renew } = renewals();
    let cover = Number.POSITIVE_INFINITY;
    const keepalive = new Keepalive({ renew, intervalMs: 1000, ttlMs: 3000, cover: () => cover }).start();
    expect(keepalive.holdsUntil).toBe(performance.now() + 3000);
    cover = Number.NEGATIVE_INFINITY;
    keepalive.refresh();
    await vi.advanceTimersByTimeAsync(0);
    expect(keepalive.signal.aborted).toBe(true);
  });
});
