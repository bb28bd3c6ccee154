import type { Admission } from '@cq/client';
import { describe, expect, it } from 'vitest';
import { until, type Started } from '../support/processes.js';
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
    const admitted: Array<Admission & { at: number }> = [];
    const blocked: number[] = [];
    const unended: string[] = [];
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

    const user = async (userId: string): Promise<void> => {
      while (performance.now() < stopAt) {
        const { token } = await system.client.issueToken({ userId, metadata: { durationMs: 200 + Math.floor(Math.random() * 1300) } });
        const asked = performance.now();
        let admission: Admission | undefined;
        while (admission === undefined) {
          try {
            admission = await system.client.spawn(token);
          } catch {
            await new Promise((resolve) => setTimeout(resolve, 50));
          }
        }
        admitted.push({ ...admission, at: Date.now() });
        const fence = admission.fence;
        // Blocked: from asking until the session runs (its first beat) or ends without running.
        let waited: number | undefined;
        try {
          await until(
            async () => {
              if (waited === undefined && system.observed().some((o) => o.userId === userId && o.fence === fence)) waited = performance.now() - asked;
              return (await system.client.history(userId)).some((h) => h.sessionId === admission!.sessionId);
            },
            LEASE_MS + PENDING_TIMEOUT_MS + 5000,
            'ended',
          );
        } catch {
          unended.push(admission.sessionId);
          return;
        }
        blocked.push(waited ?? performance.now() - asked);
      }
    };
    await Promise.all([chaos, ...Array.from({ length: USERS }, (_, i) => user(`chaos-${i}`))]);

    // A kill every 2.5 to 4.5 s, plus the time to start a replacement host.
    expect(kills).toBeGreaterThanOrEqual(Math.floor(DURATION_MS / 6000));
    expect(unended).toEqual([]);
    expect(admitted.length).toBeGreaterThan(USERS * 5);
    for (const ms of blocked) expect(ms).toBeLessThanOrEqual(LEASE_MS + PENDING_TIMEOUT_MS);

    // The observer: each session process wrote "user fence time pid" every 50 ms. Per user, the
    // sessions' lifetimes (first to last beat) must never overlap.
    const spans = new Map<string, Map<number, { first: number; last: number }>>();
    for (const beat of system.observed()) {
      const perUser = spans.get(beat.userId) ?? new Map();
      spans.set(beat.userId, perUser);
      const span = perUser.get(beat.fence) ?? { first: beat.at, last: beat.at };
      span.first = Math.min(span.first, beat.at);
      span.last = Math.max(span.last, beat.at);
      perUser.set(beat.fence, span);
    }
    expect(spans.size).toBe(USERS);
    let overlaps = 0;
    for (const [userId, perUser] of spans) {
      const ordered = [...perUser.entries()].sort((a, b) => a[1].first - b[1].first);
      for (let i = 1; i < ordered.length; i++) {
        const [prevFence, prev] = ordered[i - 1]!;
        const [fence, span] = ordered[i]!;
        if (span.first <= prev.last) {
          overlaps++;
          console.error(`${userId}: fence ${fence} started at ${span.first} while fence ${prevFence} lived until ${prev.last}`);
        }
        // Fences grow in the order sessions really ran.
        expect(fence).toBeGreaterThan(prevFence);
      }
    }
    expect(overlaps).toBe(0);
    let longestGap = 0;
    for (const perUser of spans.values()) {
      const ordered = [...perUser.values()].sort((a, b) => a.first - b.first);
      for (let i = 1; i < ordered.length; i++) longestGap = Math.max(longestGap, ordered[i]!.first - ordered[i - 1]!.last);
    }
    console.info(
      `chaos: ${admitted.length} sessions admitted, ${kills} hosts killed, longest wait from asking to running ${Math.round(Math.max(...blocked))} ms, longest gap between a user's sessions ${longestGap} ms`,
    );
  }, DURATION_MS + 60_000);
});
