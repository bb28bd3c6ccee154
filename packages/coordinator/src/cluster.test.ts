import { startRedisCluster, until, type RedisCluster, type RedisServer } from '@cq/test-harness';
import { Cluster, Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Coordinator } from './coordinator.js';
import { issueAndAdmit } from './test-support/setup.js';
import type { ScriptName } from './script-loader.js';
import { slotOf } from './slots.js';

/** The running replica that follows `master`. */
async function replicaOf(cluster: RedisCluster, master: RedisServer): Promise<RedisServer> {
  for (const server of cluster.servers) {
    if (server === master || server.pid() === undefined) continue;
    const client = new Redis(server.url, { maxRetriesPerRequest: 0 });
    try {
      if ((await client.info('replication')).includes(`master_port:${master.port}\r`)) return server;
    } finally {
      client.disconnect();
    }
  }
  throw new Error(`no replica of ${master.url}`);
}

describe('on Redis Cluster (3 masters, 3 replicas) with REDIS_WAIT_REPLICAS=1', () => {
  let cluster: RedisCluster;
  let client: Cluster;
  let coordinator: Coordinator;
  const shortfalls: Array<[ScriptName, number]> = [];

  beforeAll(async () => {
    cluster = await startRedisCluster();
    client = new Cluster([...cluster.nodes], { redisOptions: { maxRetriesPerRequest: 1 } });
    coordinator = new Coordinator({
      redis: client,
      keyPrefix: 'clu',
      policy: { spawnIntervalMs: 1, spawnBurst: 100 },
      replicaWait: {
        replicas: 1,
        timeoutMs: 1000,
        onShortfall: (script, acknowledged) => shortfalls.push([script, acknowledged]),
      },
    });
  });
  afterAll(async () => {
    await coordinator?.close();
    client?.disconnect();
    await cluster?.stop();
  });

  const admit = (userId: string) => issueAndAdmit(coordinator, userId);

  it('admits users on every master, and each admission is on its replica when admit returns', async () => {
    const users = Array.from({ length: 30 }, (_, i) => `clu-${i}`);
    const masters = new Set<RedisServer>();
    for (const userId of users) {
      await admit(userId);
      const slot = slotOf(coordinator.keys.user(userId).session);
      const master = await cluster.masterOf(slot);
      masters.add(master);
      const replica = new Redis((await replicaOf(cluster, master)).url, { maxRetriesPerRequest: 0 });
      try {
        await replica.readonly();
        expect(await replica.exists(coordinator.keys.user(userId).session)).toBe(1);
      } finally {
        replica.disconnect();
      }
    }
    expect(masters.size).toBe(3);
    expect(shortfalls).toEqual([]);
    // The dashboard's index and the sweeper read every slot's shard on its own master.
    const index = await coordinator.readIndex();
    expect(index.live.map((u) => u.userId).sort()).toEqual([...users].sort());
  });

  it('after a failover the client does not know of yet, writes follow the new master (MOVED → slots refreshed → sent again)', async () => {
    const userId = 'clu-moved';
    await admit(userId);
    const slot = slotOf(coordinator.keys.user(userId).session);
    const oldMaster = await cluster.masterOf(slot);
    const replica = await replicaOf(cluster, oldMaster);
    const admin = new Redis(replica.url, { maxRetriesPerRequest: 0 });
    try {
      // A manual failover: the replica takes over, the old master becomes its replica and answers MOVED.
      await admin.cluster('FAILOVER');
    } finally {
      admin.disconnect();
    }
    await until(async () => (await cluster.masterOf(slot)) === replica, 10_000, 'the replica taking over');
    await cluster.waitUntilOk();
    expect(await coordinator.sessions.requestStop(userId)).toMatchObject({ outcome: 'stopped' });
    expect((await coordinator.sessions.history(userId))[0]).toMatchObject({ state: 'stopped' });
    expect(shortfalls).toEqual([]);
  });
});
