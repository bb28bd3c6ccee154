import { describe, expect, it } from 'vitest';
import { type Started } from '../support/processes.js';
import { overlapsIn, spawnAgainAndAgain } from '../support/load.js';
import { startSystem } from '../support/system.js';

const DURATION_MS = Number(process.env['CHAOS_MS'] ?? 60_000);
const LEASE_MS = 2000;
const PENDING_TIMEOUT_MS = 5000;
const USERS = 20;
const HOSTS = 3;

describe('chaos: worker hosts killed and restarted while 20 users spawn again and again', async () => {
  const system = await startSystem({
    workers: HOSTS,
    apiEnv: { PENDING_TIMEOUT_MS: String(PENDING_TIMEOUT_MS), SWEEP_INTERVAL_MS: '250' },
    workerEnv: { LEASE_MS: String(LEASE_MS), SESSION_GRACE_MS: '500', SLOTS: '10' },
  });

  it(`for ${DURATION_MS / 1000} s: never two live sessions of one user, every session ends, nobody blocked longer than LEASE_MS + PENDING_TIMEOUT_MS`, async () => {
    const stopAt = performance.now() + DURATION_MS;
    let kills = 0;

    // A host is SIGKILLed and a fresh one started in its place every few seconds.
    const chaos = (async () => {
      let n = HOSTS;
      while (performance.now() < stopAt) {
        await new Promise((resolve) => setTimeout(resolve, 2500 + Math.random() * 2000));
        if (performance.now() >= stopAt) break;
        const live = system.workers.filter((w) => w.child.exitCode === null && w.child.signalCode === null);
        const victim: Started = live[Math.floor(Math.random() * live.length)]!;
        await victim.stop('SIGKILL');
        kills++;
        await system.addWorker(`host-${++n}`);
      }
    })();
    const users = Array.from({ length: USERS }, (_, i) => `chaos-${i}`);
    const [, load] = await Promise.all([chaos, spawnAgainAndAgain(system, users, stopAt, LEASE_MS + PENDING_TIMEOUT_MS + 5000)]);

    // A kill every 2.5 to 4.5 s, plus the time to start a replacement host.
    expect(kills).toBeGreaterThanOrEqual(Math.floor(DURATION_MS / 6000));
    expect(load.unended).toEqual([]);
    expect(load.admitted.length).toBeGreaterThan(USERS * 5);
    for (const ms of load.blocked) expect(ms).toBeLessThanOrEqual(LEASE_MS + PENDING_TIMEOUT_MS);

    const { overlaps, users: seen, longestGapMs } = overlapsIn(system.observed());
    expect(seen).toBe(USERS);
    expect(overlaps).toEqual([]);
    console.info(
      `chaos: ${load.admitted.length} sessions admitted, ${kills} hosts killed, longest wait from asking to running ${Math.round(Math.max(...load.blocked))} ms, longest gap between a user's sessions ${longestGapMs} ms`,
    );
  }, DURATION_MS + 60_000);
});
