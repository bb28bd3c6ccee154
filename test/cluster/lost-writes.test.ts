import { Keys, slotOf } from '@cq/coordinator';
import { cleanUp, startRedisCluster, type RedisServer } from '@cq/test-harness';
import { Redis } from 'ioredis';
import { describe, expect, it } from 'vitest';
import { expectNoOverlapAfterLoss, spawnAnswer } from '../support/lost-writes.js';
import { until } from '../support/processes.js';
import { startSystem } from '../support/system.js';

const LEASE_MS = 3000;
/** What a slot whose guard was lost with the writes waits out: LEASE_MS's default, its claims being lost too. */
const DEFAULT_WAIT_MS = 15_000 + 250;

/** The replica of `master` among `servers` (ROLE: a replica names its master's port). */
async function replicaOf(servers: readonly RedisServer[], master: RedisServer): Promise<RedisServer> {
  for (const server of servers) {
    if (server === master) continue;
    const client = new Redis(server.url, { maxRetriesPerRequest: 1 });
    const role = (await client.call('ROLE')) as unknown[];
    client.disconnect();
    if (role[0] === 'slave' && Number(role[2]) === master.port) return server;
  }
  throw new Error(`no replica of ${master.port}`);
}

describe('a Cluster failover to a replica that lacked its master’s last writes', () => {
  it('no user of that master gets a second session while a lost one runs, a brand-new user whose first ever session was lost neither; fences rise; spent tokens stay spent; lost sessions end lost/state_lost; users of the other masters are admitted throughout', async () => {
    const cluster = await startRedisCluster();
    cleanUp(() => cluster.stop());
    const system = await startSystem({
      target: { kind: 'cluster', seeds: cluster.seeds },
      workers: 2,
      workerEnv: { LEASE_MS: String(LEASE_MS), SLOTS: '10' },
    });
    const { client } = system;
    const keys = new Keys(system.keyPrefix);
    const masterOfUser = (userId: string): Promise<RedisServer> => cluster.masterOf(slotOf(keys.user(userId).session));
    const master = await masterOfUser('lw-0');
    const known: string[] = [];
    const newcomers: string[] = [];
    const elsewhere: string[] = [];
    for (let i = 0; known.length < 4 || newcomers.length < 2 || elsewhere.length < 2; i++) {
      const userId = `lw-${i}`;
      if ((await masterOfUser(userId)) === master) {
        if (known.length < 4) known.push(userId);
        else if (newcomers.length < 2) newcomers.push(userId);
      } else if (elsewhere.length < 2) elsewhere.push(userId);
    }
    const onMaster = [...known, ...newcomers];
    // A first, short session each but the newcomers': its claim tells the user's slot the lease in use.
    // A newcomer's first ever token is issued and spent only in the writes the failover loses.
    for (const userId of [...known, ...elsewhere]) {
      const first = await client.spawn((await client.issueToken({ userId, metadata: { durationMs: 100 } })).token);
      await system.ended(userId, first.sessionId, 15_000);
    }
    const spent = new Map<string, string>();
    for (const userId of known) spent.set(userId, (await client.issueToken({ userId })).token);

    // The replica is held back before the admissions: frozen, and its link stuffed with 48 MB ahead of
    // them (more than the sockets' buffers hold), so the master acknowledges them alone.
    const replica = await replicaOf(cluster.servers, master);
    process.kill(replica.pid()!, 'SIGSTOP');
    const lost = new Map<string, { sessionId: string; fence: number }>();
    try {
      const direct = new Redis(master.url, { maxRetriesPerRequest: 1 });
      const stuff = `${system.keyPrefix}:{u:${onMaster[0]}}:stuff`;
      for (const part of ['a', 'b']) await direct.set(`${stuff}:${part}`, part.repeat(24 * 1024 * 1024));
      direct.disconnect();
      for (const userId of newcomers) spent.set(userId, (await client.issueToken({ userId })).token);
      for (const userId of onMaster) lost.set(userId, await client.spawn(spent.get(userId)!));
      for (const userId of newcomers) expect(lost.get(userId)!.fence).toBe(1);
      await until(
        () => onMaster.every((u) => system.observed().some((o) => o.userId === u && o.fence === lost.get(u)!.fence)),
        15_000,
        'every session running on the master alone',
      );
    } finally {
      // The master dies with those writes; the replica comes back without them and is promoted.
      await master.halt('SIGKILL');
      process.kill(replica.pid()!, 'SIGCONT');
    }
    const killedAt = Date.now();

    // Meanwhile the users of the other masters go on: short sessions, one after another.
    let stopOthers = false;
    const othersRefused: string[] = [];
    let othersAdmitted = 0;
    const others = Promise.all(
      elsewhere.map(async (userId) => {
        while (!stopOthers) {
          const issued = await client.issueToken({ userId, metadata: { durationMs: 100 } }).catch(() => undefined);
          if (issued === undefined) continue;
          const answer = await spawnAnswer(system, issued.token);
          if (answer.status !== 202) {
            othersRefused.push(`${answer.status} ${answer.error?.message}`);
            continue;
          }
          othersAdmitted++;
          await until(
            async () => (await client.history(userId)).some((h) => h.fence === answer.fence),
            15_000,
            'the other user’s session ended',
          );
        }
      }),
    );

    await cluster.waitUntilOk(20_000);
    const promotedAt = Date.now();
    const admitted = new Map<string, { fence: number; at: number }>();
    const fresh = new Map<string, string>();
    const retryAfters = new Map<string, number[]>(onMaster.map((u) => [u, []]));
    await until(
      async () => {
        await Promise.all(
          onMaster
            .filter((u) => !admitted.has(u))
            .map(async (userId) => {
              expect([403, 503]).toContain((await spawnAnswer(system, spent.get(userId)!)).status);
              if (!fresh.has(userId)) {
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
              if (answer.retryAfter !== undefined && /failed over/.test(answer.error?.message ?? ''))
                retryAfters.get(userId)!.push(answer.retryAfter);
            }),
        );
        return admitted.size === onMaster.length;
      },
      DEFAULT_WAIT_MS + 15_000,
      'every user of the lost master admitted again',
    );
    stopOthers = true;
    await others;
    const waitedMs = (users: readonly string[]): number =>
      Math.max(...users.map((u) => admitted.get(u)!.at - promotedAt));
    console.log(
      `failover with lost writes: promoted ${promotedAt - killedAt} ms after the SIGKILL; its users admitted again ` +
        `${waitedMs(known)} ms after the promotion (lease ${LEASE_MS} ms + 1 s), the newcomers ${waitedMs(newcomers)} ms ` +
        `(the default lease + 1 s); other masters' users: ${othersAdmitted} admitted meanwhile, refused: ` +
        `${JSON.stringify(othersRefused)}`,
    );
    // Refused while a lost session might run, saying how long to wait: the lease the slot knew, or for a
    // newcomer, whose guard was lost too, the default one.
    for (const [userId, seconds] of retryAfters) {
      expect(seconds.length).toBeGreaterThan(0);
      const waitMs = newcomers.includes(userId) ? DEFAULT_WAIT_MS : LEASE_MS;
      for (const s of seconds) expect(s).toBeLessThanOrEqual(Math.ceil((waitMs + 1000) / 1000));
    }
    // The other masters' users were not held up by the wait (a refusal while the cluster itself was
    // failing over aside, none says Redis may have lost writes).
    expect(othersAdmitted).toBeGreaterThan(0);
    expect(othersRefused.filter((r) => /lost/.test(r))).toEqual([]);

    await expectNoOverlapAfterLoss(system, onMaster, spent, lost, admitted, LEASE_MS);
  }, 120_000);
});
