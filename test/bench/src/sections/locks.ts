// The locks section of npm run bench: Locks.
import { Coordinator } from '@cq/coordinator';
import { Mutex } from 'redis-semaphore';
import Redlock from 'redlock';
import { type Bench, fmt, ratio } from '../bench.js';
import { measure, medianOf, type Sample } from '../measure.js';

export async function benchLocksSection(bench: Bench): Promise<void> {
  const { runs: RUNS, seconds: SECONDS, client, out, target, results } = bench;
  // The coordinator this section measures.
  const ours = new Coordinator({ redis: client(), keyPrefix: 'bench' });
  await ours.preload();
  const LOCK_CALLERS = 50;
  out(
    `## Locks: acquire + release pairs (${LOCK_CALLERS} callers, one resource each, median of ${RUNS} × ${SECONDS} s)`,
  );
  out();
  out('| lock | pairs/s | p50 ms | p99 ms | ours vs it |');
  out('| --- | ---: | ---: | ---: | ---: |');
  const redlockClient = client();
  const semaphoreClient = client();
  const redlock = new Redlock([redlockClient], { retryCount: 0 });
  const locks: Record<string, (caller: number) => Promise<unknown>> = {
    'ours: lease (fenced)': async (caller) => {
      const got = await ours.leases.acquire(`lock-${caller}`, { leaseMs: 10_000, maxLifetimeMs: 60_000 });
      if (got.acquired) await ours.leases.release(got.lease);
    },
    'redlock (1 instance)': async (caller) => {
      const lock = await redlock.acquire([`redlock-${caller}`], 10_000);
      await lock.release();
    },
    "redis-semaphore's Mutex": async (caller) => {
      const mutex = new Mutex(semaphoreClient, `mutex-${caller}`, {
        lockTimeout: 10_000,
        refreshInterval: 0,
        acquireAttemptsLimit: 1,
      });
      if (await mutex.tryAcquire()) await mutex.release();
    },
  };
  const lockSamples: Record<string, Sample> = {};
  for (const [name, pair] of Object.entries(locks))
    lockSamples[name] = await medianOf(RUNS, () => measure(LOCK_CALLERS, SECONDS * 1000, (caller) => pair(caller)));
  const oursLock = lockSamples['ours: lease (fenced)']!;
  for (const [name, s] of Object.entries(lockSamples)) {
    out(
      `| ${name} | ${fmt(s.opsPerSec)} | ${fmt(s.p50, 2)} | ${fmt(s.p99, 2)} | ${name.startsWith('ours') ? '–' : ratio(oursLock.opsPerSec, s.opsPerSec)} |`,
    );
    if (!name.startsWith('ours')) target(`lock pairs/s ≥ 1.5× ${name}`, oursLock.opsPerSec / s.opsPerSec, 1.5);
  }
  results['locks'] = lockSamples;
  redlockClient.disconnect();
  semaphoreClient.disconnect();
  out();
}
