import { readFileSync } from 'node:fs';
import { startRedisServer } from '@cq/test-harness';
import { Redis } from 'ioredis';
import { describe, expect, it, onTestFinished } from 'vitest';
import { jsonSpawn } from '../support/http.js';
import { API_KEY, startSystem } from '../support/system.js';
import { setTimeout as sleep } from 'node:timers/promises';

/** 45 s in CI (its time is bounded); `npm run test:soak` runs 10 minutes. */
const SOAK_MS = Number(process.env['SOAK_MS'] ?? 45_000);
const USERS = 200;
const SPAWNS_PER_SECOND = 20;

function rssMiB(pid: number): number {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  return Number(/VmRSS:\s+(\d+)/.exec(status)![1]) / 1024;
}

describe('soak', () => {
  it(
    `steady spawns for ${USERS} users for ${SOAK_MS / 1000} s: memory flat, key count bounded, no error logged`,
    async () => {
      const server = await startRedisServer();
      onTestFinished(() => server.stop());
      const redis = new Redis(server.url);
      onTestFinished(() => redis.disconnect());
      const system = await startSystem({
        redisUrl: server.url,
        workers: 2,
        // A session's output (2 keys) is kept LOG_RETENTION_MS after it ends: 10 s here, so the key count
        // settles within the soak (with the default day it grows with every session for a day).
        workerEnv: { SLOTS: '20', LEASE_MS: '3000', LOG_RETENTION_MS: '10000' },
      });
      const { client } = system;
      const processes = [system.api, ...system.workers];

      type Sample = { at: number; rss: number[]; redisMiB: number; keys: number };
      const sample = async (): Promise<Sample> => ({
        at: Date.now(),
        rss: processes.map((p) => rssMiB(p.child.pid!)),
        redisMiB: Number(/used_memory:(\d+)/.exec(await redis.info('memory'))![1]) / 2 ** 20,
        keys: await redis.dbsize(),
      });

      const stopAt = performance.now() + SOAK_MS;
      const samples: Sample[] = [];
      let admitted = 0;
      let refused = 0;
      const sampler = (async () => {
        while (performance.now() < stopAt) {
          await sleep(Math.min(5000, SOAK_MS / 12));
          samples.push(await sample());
        }
      })();
      for (let tick = 0; performance.now() < stopAt; tick++) {
        const started = performance.now();
        await Promise.all(
          Array.from({ length: SPAWNS_PER_SECOND / 4 }, async (_, i) => {
            const userId = `soak-${(tick * (SPAWNS_PER_SECOND / 4) + i) % USERS}`;
            const { token } = await client.issueToken({
              userId,
              metadata: { durationMs: 200 + ((tick + i) % 5) * 100 },
            });
            const res = await jsonSpawn(system.api.baseUrl, token);
            if (res.status === 202) admitted++;
            else refused++;
          }),
        );
        await sleep(Math.max(0, 250 - (performance.now() - started)));
      }
      await sampler;

      // Compare the second half with the first (after warm-up): no steady growth.
      const half = Math.floor(samples.length / 2);
      const firstHalf = samples.slice(1, half);
      const secondHalf = samples.slice(half);
      const peak = (list: Sample[], pick: (s: Sample) => number): number => Math.max(...list.map(pick));
      const report = {
        seconds: SOAK_MS / 1000,
        admitted,
        refused,
        rssMiB: processes.map((_, i) => ({
          first: peak(firstHalf, (s) => s.rss[i]!).toFixed(1),
          second: peak(secondHalf, (s) => s.rss[i]!).toFixed(1),
        })),
        redisMiB: {
          first: peak(firstHalf, (s) => s.redisMiB).toFixed(2),
          second: peak(secondHalf, (s) => s.redisMiB).toFixed(2),
        },
        keys: { first: peak(firstHalf, (s) => s.keys), second: peak(secondHalf, (s) => s.keys) },
      };
      console.info(`soak: ${JSON.stringify(report)}`);

      expect(admitted).toBeGreaterThan((SOAK_MS / 1000) * 2);
      for (let i = 0; i < processes.length; i++)
        expect(peak(secondHalf, (s) => s.rss[i]!)).toBeLessThan(peak(firstHalf, (s) => s.rss[i]!) * 1.25 + 10);
      expect(peak(secondHalf, (s) => s.redisMiB)).toBeLessThan(peak(firstHalf, (s) => s.redisMiB) * 1.25 + 2);
      // Keys per user (session, lease, fence, history, throttle, token rate), the queue's kept jobs (at
      // most 1,000), and 2 output keys per session running (at most 40 slots) or ended within
      // LOG_RETENTION_MS (10 s of admissions at the soak's rate).
      const outputKeys = 2 * Math.ceil((admitted / (SOAK_MS / 1000)) * 10 + 40);
      expect(peak(secondHalf, (s) => s.keys)).toBeLessThanOrEqual(USERS * 8 + 1000 + 200 + outputKeys);
      for (const p of processes) {
        expect(p.logs.filter((l) => Number(l['level']) >= 50)).toEqual([]);
        expect(p.stderr.join('')).toBe('');
      }
      const logs = JSON.stringify(processes.map((p) => p.logs));
      expect(logs).not.toContain(API_KEY);
      expect(logs).not.toMatch(/v1\.[A-Za-z0-9_-]{2,}\.[A-Za-z0-9_-]{43}/);
    },
    SOAK_MS + 120_000,
  );
});
