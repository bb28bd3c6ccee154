import { startRedisServer } from '@cq/test-harness';
import { describe, expect, it, onTestFinished } from 'vitest';
import { jsonSpawn } from '../support/http.js';
import { alive, sessionPids, until } from '../support/processes.js';
import { startSystem } from '../support/system.js';
import { setTimeout as sleep } from 'node:timers/promises';

const LEASE_MS = 3000;
const OUTAGE_MS = 10_000;

describe('Redis unreachable for 10 s under load', () => {
  it('the API answers 503 within 2 s, hosts stop sessions they cannot renew, and everything recovers with every session ended', async () => {
    const server = await startRedisServer();
    onTestFinished(() => server.stop());
    const system = await startSystem({ redisUrl: server.url, workerEnv: { LEASE_MS: String(LEASE_MS) } });
    const { client } = system;
    const users = ['out-a', 'out-b', 'out-c'];
    const admitted = [];
    for (const userId of users) admitted.push(await client.spawn((await client.issueToken({ userId })).token));
    await until(() => users.every((u) => system.observed().some((o) => o.userId === u)), 10_000, 'sessions beating');
    const pids = users.flatMap((u) => sessionPids(u));
    expect(pids.length).toBeGreaterThanOrEqual(users.length);
    const spare = (await client.issueToken({ userId: 'out-d' })).token;

    // Redis stops answering (SIGSTOP: connections stay open, nothing comes back).
    process.kill(server.pid()!, 'SIGSTOP');
    const stoppedAt = performance.now();
    let resumed = false;
    onTestFinished(() => {
      if (!resumed) process.kill(server.pid()!, 'SIGCONT');
    });

    // Under load: requests keep coming; every one is answered 503 within 2 s.
    const answers: Array<{ status: number; ms: number }> = [];
    while (performance.now() - stoppedAt < OUTAGE_MS - 2500) {
      answers.push(...(await Promise.all(Array.from({ length: 10 }, () => jsonSpawn(system.api.baseUrl, spare)))));
    }
    expect(answers.length).toBeGreaterThan(20);
    for (const answer of answers) {
      expect(answer.status).toBe(503);
      expect(answer.ms).toBeLessThan(2000);
    }
    // No session runs on without a lease: all were stopped before their lease could have run out.
    expect(pids.some(alive)).toBe(false);
    const lastBeat = Math.max(
      ...system
        .observed()
        .filter((o) => users.includes(o.userId))
        .map((o) => o.at),
    );
    const lastRenewal = Date.now() - (performance.now() - stoppedAt);
    expect(lastBeat - lastRenewal).toBeLessThanOrEqual(LEASE_MS);

    await sleep(Math.max(0, OUTAGE_MS - (performance.now() - stoppedAt)));
    process.kill(server.pid()!, 'SIGCONT');
    resumed = true;

    // Everything recovers by itself, and every session reaches a terminal state.
    await until(async () => (await fetch(`${system.api.baseUrl}/readyz`)).status === 200, 10_000, 'API ready again');
    for (const [i, userId] of users.entries()) {
      const entry = await system.ended(userId, admitted[i]!.sessionId, 15_000);
      expect(['lost', 'stopped']).toContain(entry.state);
    }
    // Redis ran the spawns it had received while hung; the API answered them 503 and cancels them now
    // that Redis is back, so the token is valid again (a 503 leaves a valid token valid).
    await until(
      async () => (await jsonSpawn(system.api.baseUrl, spare)).status === 202,
      10_000,
      'the token works again',
    );
    await until(
      async () => (await client.findSession('out-d'))?.state === 'running',
      15_000,
      'a new session runs after the outage',
    );
  });
});
