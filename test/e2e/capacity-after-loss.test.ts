import { copyFileSync } from 'node:fs';
import { join } from 'node:path';
import { Keys } from '@cq/coordinator';
import { startRedisServer } from '@cq/test-harness';
import { Redis } from 'ioredis';
import { describe, expect, it, onTestFinished } from 'vitest';
import { alive, sessionPids, until } from '../support/processes.js';
import { API_KEY, startSystem, type System } from '../support/system.js';

// Capacity after Redis lost writes: Redis is restarted from a snapshot taken while sessions ran, after
// some of them ended and others started. Afterwards every pool's slots, busy and free, as GET /v1/pools,
// GET /v1/hosts and the dashboard show them, agree with what the hosts themselves run (their sessions'
// processes, seen in /proc) within a heartbeat of the hosts settling, and no pool ever runs more sessions
// than it has slots.
const LEASE_MS = 3000;
const HEARTBEAT_MS = 1000; // min(2 s, LEASE_MS / 3)
const SLOTS = { default: 3, gpu: 2 } as const;
type PoolName = keyof typeof SLOTS;

interface Seen {
  slots: number;
  busy: number;
  free: number;
}

/** Each pool as /v1/pools, /v1/hosts (its hosts' own counts) and the dashboard state show it. */
async function views(system: System): Promise<Record<'pools' | 'hosts' | 'dashboard', Record<string, Seen>>> {
  const pools = Object.fromEntries(
    (await system.client.pools()).map((p) => [p.pool, { slots: p.slots, busy: p.busy, free: p.free }]),
  );
  const hosts: Record<string, Seen> = {};
  for (const h of (await system.client.hosts()).hosts) {
    const seen = (hosts[h.pool] ??= { slots: 0, busy: 0, free: 0 });
    seen.slots += h.slots;
    seen.busy += h.busy;
    seen.free = seen.slots - seen.busy;
  }
  const res = await fetch(`${system.api.baseUrl}/dashboard/api/state`, {
    headers: { authorization: `Basic ${Buffer.from(`operator:${API_KEY}`).toString('base64')}` },
  });
  expect(res.status).toBe(200);
  const state = (await res.json()) as { pools: Array<{ pool: string } & Seen> };
  const dashboard = Object.fromEntries(
    state.pools.map((p) => [p.pool, { slots: p.slots, busy: p.busy, free: p.free }]),
  );
  return { pools, hosts, dashboard };
}

/** Waits until every host has sent `count` more heartbeats (its `heartbeatAt` in GET /v1/hosts moved). */
async function heartbeats(system: System, count: number): Promise<void> {
  const seen = async (): Promise<Map<string, string>> =>
    new Map((await system.client.hosts()).hosts.map((h) => [h.workerId, h.heartbeatAt]));
  for (let i = 0; i < count; i++) {
    const before = await seen();
    await until(
      async () => [...(await seen())].every(([id, at]) => before.has(id) && at !== before.get(id)),
      5 * HEARTBEAT_MS,
      'a heartbeat of every host',
    );
  }
}

describe('capacity after Redis restarted from an older snapshot', () => {
  it('each pool’s slots, busy and free agree with the hosts’ own sessions within a heartbeat, everywhere they are shown; no pool runs more than its slots', async () => {
    const server = await startRedisServer({ args: ['--save', '', '--appendonly', 'no'] });
    onTestFinished(() => server.stop());
    const system = await startSystem({
      redisUrl: server.url,
      workers: 0,
      workerEnv: { LEASE_MS: String(LEASE_MS) },
    });
    await system.addWorker('host-default', { SLOTS: String(SLOTS.default) });
    await system.addWorker('host-gpu', { SLOTS: String(SLOTS.gpu), POOL: 'gpu' });
    const redis = new Redis(server.url, { maxRetriesPerRequest: 1 });
    redis.on('error', () => {});
    onTestFinished(() => redis.disconnect());
    const { client } = system;
    const poolOf = new Map<string, PoolName>();
    const live = new Map<string, { sessionId: string; fence: number }>();
    const start = async (userId: string, pool: PoolName): Promise<void> => {
      poolOf.set(userId, pool);
      const session = await client.spawn((await client.issueToken({ userId, pool })).token);
      live.set(userId, session);
      await until(
        () => system.observed().some((o) => o.userId === userId && o.fence === session.fence),
        10_000,
        `${userId}'s session beating`,
      );
    };
    // What the hosts run, from outside: the users whose session's processes are alive, per pool.
    const running = (): Record<PoolName, number> => {
      const count = { default: 0, gpu: 0 };
      for (const [userId, pool] of poolOf) if (sessionPids(userId).some(alive)) count[pool]++;
      return count;
    };
    let overfull = '';
    const watch = setInterval(() => {
      const now = running();
      for (const pool of Object.keys(SLOTS) as PoolName[])
        if (now[pool] > SLOTS[pool]) overfull ||= `${pool}: ${now[pool]} running on ${SLOTS[pool]} slots`;
    }, 50);
    onTestFinished(() => clearInterval(watch));

    // Before the snapshot: two sessions on default, one on gpu.
    await start('cap-d1', 'default');
    await start('cap-d2', 'default');
    await start('cap-g1', 'gpu');
    // Their holds renewed by a periodic heartbeat before the snapshot (a hold restored while still the
    // admission's lasts until the pending timeout: docs/failure-modes.md, "Capacity").
    await heartbeats(system, 2);
    await redis.save();
    const kept = join(server.dir, 'kept.rdb');
    copyFileSync(join(server.dir, 'dump.rdb'), kept);
    // After it (lost with the restart): one of them ends, others start and fill both pools.
    await client.stopSession('cap-d1');
    await system.ended('cap-d1', live.get('cap-d1')!.sessionId);
    await start('cap-d3', 'default');
    await start('cap-d4', 'default');
    await start('cap-g2', 'gpu');
    expect(running()).toEqual({ default: 3, gpu: 2 });

    await server.halt('SIGKILL');
    copyFileSync(kept, join(server.dir, 'dump.rdb'));
    await server.resume();
    await until(async () => (await fetch(`${system.api.baseUrl}/readyz`)).status === 200, 15_000, 'the API ready');
    // The sessions started after the snapshot have no records now: their hosts end them at the next
    // renewal (the probe names another process). cap-d1 ended for good; cap-d2 and cap-g1 run on.
    await until(
      () => ['cap-d3', 'cap-d4', 'cap-g2'].every((u) => !sessionPids(u).some(alive)),
      LEASE_MS + 5000,
      'the lost sessions ended by their hosts',
    );
    const settledAt = Date.now();
    expect(running()).toEqual({ default: 1, gpu: 1 });
    // cap-d1 ended (stopped) in the writes that were lost: Redis has it running again on host-default,
    // which no longer runs it. Its host ends the record (lost), so its user may spawn again.
    await until(
      async () => (await client.history('cap-d1')).some((h) => h.sessionId === live.get('cap-d1')!.sessionId),
      3 * HEARTBEAT_MS + 2000,
      'cap-d1 in history again',
    );
    expect((await client.history('cap-d1')).find((h) => h.sessionId === live.get('cap-d1')!.sessionId)).toMatchObject({
      state: 'lost',
    });
    const want = {
      default: { slots: SLOTS.default, busy: 1, free: SLOTS.default - 1 },
      gpu: { slots: SLOTS.gpu, busy: 1, free: SLOTS.gpu - 1 },
    };
    // When each view first showed what the hosts run: the hosts' own counts (their heartbeats' `busy`)
    // come first; the pools (the held sets) and the dashboard must follow within a heartbeat.
    let last: Awaited<ReturnType<typeof views>> | undefined;
    const agreedAt: Partial<Record<'pools' | 'hosts' | 'dashboard', number>> = {};
    await until(
      async () => {
        last = await views(system);
        const at = Date.now();
        for (const [name, seen] of Object.entries(last) as Array<[keyof typeof agreedAt, Record<string, Seen>]>) {
          const agrees = JSON.stringify([seen.default, seen.gpu]) === JSON.stringify([want.default, want.gpu]);
          if (!agrees) delete agreedAt[name];
          else agreedAt[name] ??= at;
        }
        return Object.keys(agreedAt).length === 3;
      },
      3 * HEARTBEAT_MS + 2000,
      'pools, hosts and the dashboard agreeing with the hosts',
    ).catch((err: Error) => {
      throw new Error(`${err.message}: ${JSON.stringify(last)}`);
    });
    console.log(
      `capacity after the restore: the hosts' own counts right ${agreedAt.hosts! - settledAt} ms after their ` +
        `sessions ended, /v1/pools ${agreedAt.pools! - settledAt} ms, the dashboard ${agreedAt.dashboard! - settledAt} ms`,
    );
    expect(agreedAt.pools! - agreedAt.hosts!).toBeLessThanOrEqual(HEARTBEAT_MS);
    expect(agreedAt.dashboard! - agreedAt.hosts!).toBeLessThanOrEqual(HEARTBEAT_MS);
    // And they go on agreeing, over several heartbeats.
    for (let i = 0; i < 3; i++) {
      await heartbeats(system, 1);
      const seen = await views(system);
      for (const view of Object.values(seen)) expect({ default: view.default, gpu: view.gpu }).toEqual(want);
    }

    // A write replayed (an AOF loaded twice over, as the ACL-and-AOF bug of Redis 7.0 did): the totals
    // move without the hosts' shares. The sweep's recount puts them back within a second.
    const keys = new Keys(system.keyPrefix);
    // Both totals in one transaction, so no sweep's recount falls between them (CI once saw default
    // recounted before gpu's write, which then stood until the next sweep). The fault took: HINCRBY's own
    // replies are the totals it wrote (read afterwards, a sweep may already have recounted them).
    expect(
      await redis
        .multi()
        .hincrby(keys.capacity(), 'total', SLOTS.default)
        .hincrby(keys.capacity(), 'total:gpu', SLOTS.gpu)
        .exec(),
    ).toEqual([
      [null, 2 * SLOTS.default],
      [null, 2 * SLOTS.gpu],
    ]);
    await until(
      async () => {
        last = await views(system);
        return Object.values(last).every(
          (seen) => JSON.stringify([seen.default, seen.gpu]) === JSON.stringify([want.default, want.gpu]),
        );
      },
      3000,
      'the totals recounted',
    ).catch((err: Error) => {
      throw new Error(`${err.message}: ${JSON.stringify(last)}`);
    });
    for (const view of Object.values(last!)) expect({ default: view.default, gpu: view.gpu }).toEqual(want);
    expect(overfull).toBe('');
  }, 90_000);
});
