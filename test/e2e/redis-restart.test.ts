import { copyFileSync } from 'node:fs';
import { join } from 'node:path';
import { startRedisServer } from '@cq/test-harness';
import { Redis } from 'ioredis';
import { describe, expect, it, onTestFinished } from 'vitest';
import { expectNoOverlapAfterLoss, spawnAnswer } from '../support/lost-writes.js';
import { alive, sessionPids, until } from '../support/processes.js';
import { startSystem } from '../support/system.js';

const LEASE_MS = 3000;
/** What a slot whose guard was lost with the writes waits out: LEASE_MS's default, its claims being lost too. */
const DEFAULT_WAIT_MS = 15_000 + 250;

/** `POST /v1/spawn`: status, body and Retry-After (seconds) when there is one. */
describe('Redis restarted from a snapshot taken before the last admissions: the writes since are lost', () => {
  it('no user gets a second session while the lost one runs, a brand-new user whose first ever session was lost neither; fences rise, the spent tokens stay spent, every lost session ends lost/state_lost once', async () => {
    const server = await startRedisServer({ args: ['--save', '', '--appendonly', 'no'] });
    onTestFinished(() => server.stop());
    const system = await startSystem({ redisUrl: server.url, workers: 2, workerEnv: { LEASE_MS: String(LEASE_MS) } });
    const { client } = system;
    const redis = new Redis(server.url, { maxRetriesPerRequest: 1 });
    redis.on('error', () => {});
    onTestFinished(() => redis.disconnect());
    const known = ['snap-a', 'snap-b', 'snap-c', 'snap-d', 'snap-e', 'snap-f'];
    // Newcomers: their first ever token is issued and spent after the snapshot, in the writes that are lost.
    const newcomers = ['snap-new-a', 'snap-new-b'];
    const users = [...known, ...newcomers];

    // A first, short session each but the newcomers': done before the snapshot (its claim tells the
    // user's slot the lease in use).
    for (const userId of known) {
      const first = await client.spawn((await client.issueToken({ userId, metadata: { durationMs: 100 } })).token);
      await system.ended(userId, first.sessionId, 15_000);
    }
    // Their slots are given back with their hosts' next heartbeat, after the end is recorded: every slot
    // free before the snapshot, so that the eight spawns after it find room (CI met no_capacity once).
    await until(
      async () => {
        const { hosts, freeSlots } = await client.hosts();
        return freeSlots === hosts.reduce((n, h) => n + h.slots, 0);
      },
      10_000,
      'every slot free again',
    );
    const spent = new Map<string, string>();
    for (const userId of known) spent.set(userId, (await client.issueToken({ userId })).token);
    await redis.save();
    const kept = join(server.dir, 'kept.rdb');
    copyFileSync(join(server.dir, 'dump.rdb'), kept);
    for (const userId of newcomers) spent.set(userId, (await client.issueToken({ userId })).token);

    // After the snapshot: every token is spent and its session runs. Redis is then killed and started
    // from the snapshot: it has the tokens as unspent and no trace of the sessions.
    const lost = new Map<string, { sessionId: string; fence: number }>();
    for (const userId of users) lost.set(userId, await client.spawn(spent.get(userId)!));
    for (const userId of newcomers) expect(lost.get(userId)!.fence).toBe(1);
    await until(
      () => users.every((u) => system.observed().some((o) => o.userId === u && o.fence === lost.get(u)!.fence)),
      15_000,
      'every lost session running',
    );
    await server.halt('SIGKILL');
    copyFileSync(kept, join(server.dir, 'dump.rdb'));
    await server.resume();
    const backAt = Date.now();

    // Every user at once: the spent token again, and a new one, until the new one is admitted.
    const admitted = new Map<string, { fence: number; at: number }>();
    const retryAfters = new Map<string, number[]>(users.map((u) => [u, []]));
    const fresh = new Map<string, string>();
    await until(
      async () => {
        await Promise.all(
          users
            .filter((u) => !admitted.has(u))
            .map(async (userId) => {
              const again = await spawnAnswer(system, spent.get(userId)!);
              expect([403, 503]).toContain(again.status);
              if (!fresh.has(userId)) {
                // A 503 while the API has not reconnected yet: asked again on the next round.
                const issued = await client.issueToken({ userId }).catch(() => undefined);
                if (issued === undefined) return;
                fresh.set(userId, issued.token);
              }
              const answer = await spawnAnswer(system, fresh.get(userId)!);
              if (answer.status === 202) {
                admitted.set(userId, { fence: answer.fence!, at: Date.now() });
                return;
              }
              expect(answer.status).toBe(503);
              if (answer.error?.code === 'unavailable' && answer.retryAfter !== undefined) {
                expect(answer.error?.message).toMatch(/restarted or failed over .* may have lost/);
                retryAfters.get(userId)!.push(answer.retryAfter);
              }
            }),
        );
        return admitted.size === users.length;
      },
      DEFAULT_WAIT_MS + 10_000,
      'every user admitted again',
    );
    // Refused while a lost session might run, each refusal saying how long to wait: at most the lease the
    // slot knew + 1 s, or for a newcomer, whose guard was lost too, the default lease + 1 s.
    for (const [userId, seconds] of retryAfters) {
      expect(seconds.length).toBeGreaterThan(0);
      const waitMs = newcomers.includes(userId) ? DEFAULT_WAIT_MS : LEASE_MS;
      for (const s of seconds) expect(s).toBeLessThanOrEqual(Math.ceil((waitMs + 1000) / 1000));
    }
    const waitedMs = (of: readonly string[]): number => Math.max(...of.map((u) => admitted.get(u)!.at - backAt));
    console.log(
      `admissions came back ${waitedMs(known)} ms after Redis did (lease ${LEASE_MS} ms + 1 s), ` +
        `the newcomers' ${waitedMs(newcomers)} ms (the default lease + 1 s)`,
    );

    await expectNoOverlapAfterLoss(system, users, spent, lost, admitted, LEASE_MS);
  });
});

describe('Redis restarts with AOF everysec while tokens are outstanding and sessions run', () => {
  it.each(['SIGTERM', 'SIGKILL'] as const)(
    'after %s: tokens issued before are refused (any of them may have been spent in lost writes), new ones admit after the wait, sessions carry on or end as lost, API and hosts recover without a restart',
    async (signal) => {
      const server = await startRedisServer({ args: ['--appendonly', 'yes', '--appendfsync', 'everysec'] });
      onTestFinished(() => server.stop());
      const system = await startSystem({ redisUrl: server.url, workerEnv: { LEASE_MS: String(LEASE_MS) } });
      const { client } = system;

      // A first, short session of aof-b: its slot then knows the lease in use (a slot where no session was
      // ever claimed waits out LEASE_MS's default, 15 s).
      const first = await client.spawn(
        (await client.issueToken({ userId: 'aof-b', metadata: { durationMs: 100 } })).token,
      );
      await system.ended('aof-b', first.sessionId, 15_000);
      const used = (await client.issueToken({ userId: 'aof-a' })).token;
      const outstanding = (await client.issueToken({ userId: 'aof-b' })).token;
      const running = await client.spawn(used);
      await until(async () => (await client.findSession('aof-a'))?.state === 'running', 10_000, 'running');
      // everysec: the AOF reaches the disk within a second; wait until the claim is surely there.
      await until(
        async () => system.observed().some((o) => o.userId === 'aof-a' && Date.now() - o.at > 1500),
        10_000,
        'the claim older than an AOF fsync',
      );

      await server.halt(signal);
      await server.resume();
      await until(async () => (await fetch(`${system.api.baseUrl}/readyz`)).status === 200, 10_000, 'API ready again');

      // While a session admitted before might run: 503 with Retry-After, whatever the token.
      const waiting = await spawnAnswer(system, outstanding);
      expect(waiting.status).toBe(503);
      expect(waiting.retryAfter).toBeGreaterThan(0);
      // Then the tokens issued before the restart are refused, and a new one admits.
      await until(
        async () => (await spawnAnswer(system, outstanding)).status === 403,
        LEASE_MS + 5000,
        'the wait over',
      );
      expect((await spawnAnswer(system, used)).status).toBe(403);
      const next = await client.spawn((await client.issueToken({ userId: 'aof-b' })).token);

      // The running session either carried on (its host renewed the lease after the restart) or ended as lost.
      await until(
        async () => {
          const live = await client.findSession('aof-a');
          if (live?.sessionId === running.sessionId && live.state === 'running') return true;
          return (await client.history('aof-a')).some((h) => h.sessionId === running.sessionId && h.state === 'lost');
        },
        LEASE_MS + 5000,
        'session carried on or ended as lost',
      );
      // Whatever happened, the host keeps working: the other user's session runs.
      await until(
        () => system.observed().some((o) => o.userId === 'aof-b' && o.fence === next.fence),
        15_000,
        'new session running after the restart',
      );
      expect(sessionPids('aof-b').some(alive)).toBe(true);
    },
  );
});
