import { Keys } from '@cq/coordinator';
import { startRedisServer } from '@cq/test-harness';
import { Redis } from 'ioredis';
import { setTimeout as sleep } from 'node:timers/promises';
import { describe, expect, it, onTestFinished } from 'vitest';
import { alive, sessionPids, until } from '../support/processes.js';
import { startSystem, type System } from '../support/system.js';

// How long a Redis outage a running session survives, with the contract's LEASE_MS (15000), judged from
// outside: the sessions' own timestamped heartbeats, /proc, and the host lease's expiry as Redis keeps it.
// The formula (docs/failure-modes.md, "Redis is unreachable"): every outage shorter than
//   LEASE_MS − margin − heartbeat − 2 × RETRY_MS  (15000 − 1500 − 2000 − 500 = 11 s)
// ends nothing, and every one longer than LEASE_MS − margin (13.5 s) ends every running session, each
// killed before its lease could run out in Redis.
const LEASE_MS = 15_000;
const MARGIN_MS = Math.max(250, Math.ceil(LEASE_MS / 10));
const HEARTBEAT_MS = Math.min(2000, Math.floor(LEASE_MS / 3));
const RETRY_MS = 250;
const SURVIVED_MS = LEASE_MS - MARGIN_MS - HEARTBEAT_MS - 2 * RETRY_MS;
const ENDED_PAST_MS = LEASE_MS - MARGIN_MS;
const USERS = ['tol-a', 'tol-b', 'tol-c'];

/** A system of its own on a Redis with AOF (a restart keeps the writes), its three sessions running. */
async function running(): Promise<{
  system: System;
  redis: Redis;
  restart: (outageMs: number) => Promise<{ downAt: number; upAt: number; leaseExpiry: number }>;
  fences: Map<string, { sessionId: string; fence: number }>;
}> {
  const server = await startRedisServer({ args: ['--appendonly', 'yes', '--appendfsync', 'always'] });
  onTestFinished(() => server.stop());
  const system = await startSystem({ redisUrl: server.url, workerEnv: { LEASE_MS: String(LEASE_MS) } });
  const redis = new Redis(server.url, { maxRetriesPerRequest: 1 });
  redis.on('error', () => {});
  onTestFinished(() => redis.disconnect());
  const fences = new Map<string, { sessionId: string; fence: number }>();
  for (const userId of USERS)
    fences.set(userId, await system.client.spawn((await system.client.issueToken({ userId })).token));
  await until(
    () => USERS.every((u) => system.observed().some((o) => o.userId === u && o.fence === fences.get(u)!.fence)),
    10_000,
    'every session beating',
  );
  // Held under the host lease: registered by a heartbeat after the claim, held from the session's next
  // renewal (within LEASE_MS/3), which takes its own lease 20 leases ahead.
  const keys = new Keys(system.keyPrefix);
  await until(
    async () =>
      (
        await Promise.all(
          USERS.map(async (u) => Date.parse((await system.client.getSession(u)).leaseExpiresAt ?? '') - Date.now()),
        )
      ).every((ahead) => ahead > 2 * LEASE_MS),
    LEASE_MS,
    'every session held under the host lease',
  );
  const restart = async (outageMs: number): Promise<{ downAt: number; upAt: number; leaseExpiry: number }> => {
    // The worst moment for an outage to begin: just before the host's next heartbeat, so that the last
    // one that got through is a whole heartbeat old. A heartbeat is seen from outside as the host lease's
    // expiry moving in Redis.
    const expiry = async (): Promise<number> => Number((await redis.zrange(keys.hostLeases(), 0, 0, 'WITHSCORES'))[1]);
    const before = await expiry();
    await until(async () => (await expiry()) !== before, HEARTBEAT_MS * 2, 'a heartbeat');
    let beatSeenAt = Date.now();
    // Until when the host lease holds in Redis, read until just before the outage (a heartbeat seen
    // meanwhile starts the wait again): a session past it could have been swept and its user admitted again.
    let leaseExpiry = await expiry();
    await until(
      async () => {
        const now = await expiry();
        if (now !== leaseExpiry) [leaseExpiry, beatSeenAt] = [now, Date.now()];
        return Date.now() - beatSeenAt >= HEARTBEAT_MS - 150;
      },
      HEARTBEAT_MS * 3,
      'just before the next heartbeat',
    );
    const downAt = Date.now();
    await server.halt('SIGTERM');
    await sleep(Math.max(0, outageMs - (Date.now() - downAt)));
    await server.resume();
    return { downAt, upAt: Date.now(), leaseExpiry };
  };
  return { system, redis, restart, fences };
}

const beatsOf = (system: System, userId: string, fence: number): number[] =>
  system.observed().flatMap((o) => (o.userId === userId && o.fence === fence ? [o.at] : []));

describe(`a Redis outage, LEASE_MS ${LEASE_MS}`, () => {
  it(`1 s shorter than the tolerance (${SURVIVED_MS - 1000} ms, a restart with AOF): no running session ends`, async () => {
    const { system, restart, fences } = await running();
    const { upAt } = await restart(SURVIVED_MS - 1000);
    // Every session still beats well after Redis is back (past the instant any hold from before the
    // outage would have run out), runs in /proc, and is still the user's running session.
    await until(
      () => USERS.every((u) => beatsOf(system, u, fences.get(u)!.fence).some((at) => at > upAt + LEASE_MS / 3)),
      LEASE_MS,
      'every session beating after the outage',
    );
    for (const userId of USERS) {
      const { sessionId, fence } = fences.get(userId)!;
      expect(sessionPids(userId, fence).filter(alive).length).toBeGreaterThan(0);
      expect(await system.client.getSession(userId)).toMatchObject({ sessionId, state: 'running' });
      expect((await system.client.history(userId)).some((h) => h.sessionId === sessionId)).toBe(false);
    }
  }, 60_000);

  it(`past LEASE_MS − margin (${ENDED_PAST_MS + 1000} ms): every running session is killed before its lease could run out in Redis, and ends lost`, async () => {
    const { system, restart, fences } = await running();
    const { downAt, leaseExpiry } = await restart(ENDED_PAST_MS + 1000);
    await until(async () => (await fetch(`${system.api.baseUrl}/readyz`)).status === 200, 10_000, 'the API ready');
    for (const userId of USERS) {
      const { sessionId, fence } = fences.get(userId)!;
      const lastBeat = Math.max(...beatsOf(system, userId, fence));
      // Killed during the outage, before the host lease could run out (by at least the margin, less the
      // session's own beat interval).
      expect(lastBeat).toBeGreaterThan(downAt);
      expect(lastBeat).toBeLessThan(leaseExpiry);
      expect(sessionPids(userId, fence).filter(alive)).toEqual([]);
      const ended = await system.ended(userId, sessionId, LEASE_MS + 5000);
      expect(ended.state).toBe('lost');
    }
  }, 60_000);
});
