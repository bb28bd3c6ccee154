import { execFileSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { Cluster, Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it, onTestFinished } from 'vitest';
import { startRedisCluster, type RedisCluster } from './cluster/index.js';
import setup from './cluster-global-setup.js';

/** Pids of the redis-server processes this test process started and that still run (or are unreaped). */
function redisServerPids(): Set<number> {
  try {
    const out = execFileSync('pgrep', ['-P', String(process.pid), '-x', 'redis-server'], { encoding: 'utf8' });
    return new Set(out.trim().split('\n').filter(Boolean).map(Number));
  } catch {
    return new Set(); // pgrep exits 1 when nothing matches
  }
}

describe('local Redis Cluster', () => {
  let cluster: RedisCluster;
  let pids: number[] = [];

  beforeAll(async () => {
    const started = Date.now();
    cluster = await startRedisCluster();
    pids = cluster.servers.map((s) => s.pid()!);
    expect([...redisServerPids()]).toEqual(expect.arrayContaining(pids));
    console.log(`3+3 cluster started in ${Date.now() - started} ms`);
  }, 60_000);

  afterAll(async () => {
    await cluster?.stop();
    const left = redisServerPids();
    expect(pids.filter((pid) => left.has(pid))).toEqual([]);
    for (const server of cluster?.servers ?? []) expect(existsSync(server.dir)).toBe(false);
  });

  it('has 6 nodes, seeds for REDIS_CLUSTER_NODES, and serves keys of many slots through ioredis Cluster', async () => {
    expect(cluster.servers).toHaveLength(6);
    expect(cluster.seeds).toBe(cluster.servers.map((s) => `127.0.0.1:${s.port}`).join(','));
    expect(cluster.nodes).toEqual(cluster.servers.map((s) => ({ host: '127.0.0.1', port: s.port })));
    for (const s of cluster.servers) expect(s.port + 10_000).toBeLessThanOrEqual(65_535);

    const client = new Cluster([...cluster.nodes]);
    onTestFinished(() => client.disconnect());
    const keys = Array.from({ length: 200 }, (_, i) => `k:${i}`);
    await Promise.all(keys.map((k) => client.set(k, `v-${k}`)));
    expect(await Promise.all(keys.map((k) => client.get(k)))).toEqual(keys.map((k) => `v-${k}`));

    // The keys landed on every master.
    const masters = new Set(
      await Promise.all([0, 8000, 16383].map(async (slot) => (await cluster.masterOf(slot)).port)),
    );
    expect(masters.size).toBe(3);
    for (const port of masters) {
      const node = new Redis(port, '127.0.0.1');
      onTestFinished(() => node.disconnect());
      expect(await node.dbsize()).toBeGreaterThan(0);
    }
  });

  it('fails over when a master is killed, keeps a replicated key, and takes the master back as a replica', async () => {
    const client = new Cluster([...cluster.nodes]);
    client.on('error', () => {});
    onTestFinished(() => client.disconnect());
    const key = '{u:busy}x';
    const slot = await client.cluster('KEYSLOT', key);
    const before = await cluster.masterOf(slot);

    // Written on the master, and WAITed for until a replica has it.
    const direct = new Redis(before.port, '127.0.0.1');
    onTestFinished(() => direct.disconnect());
    await direct.set(key, 'survives');
    expect(await direct.call('WAIT', '1', '1000')).toBe(1);
    direct.disconnect();
    expect(await client.get(key)).toBe('survives');

    const t0 = Date.now();
    await before.halt('SIGKILL');
    // No node has noticed yet: one look says so, and names the halted master.
    await expect(cluster.waitUntilOk(0)).rejects.toThrow(
      new RegExp(`not ok within 0 ms: .*halted node\\(s\\) ${before.port}`),
    );
    await cluster.waitUntilOk(20_000);
    const promotedMs = Date.now() - t0;
    const after = await cluster.masterOf(slot);
    expect(after).not.toBe(before);
    expect(await client.get(key)).toBe('survives');
    const readMs = Date.now() - t0;

    await before.resume();
    await cluster.waitUntilOk(20_000);
    const rejoinedMs = Date.now() - t0;
    const role = new Redis(before.port, '127.0.0.1');
    onTestFinished(() => role.disconnect());
    expect(((await role.role()) as unknown[])[0]).toBe('slave');
    expect(await cluster.masterOf(slot)).toBe(after);
    expect(await client.get(key)).toBe('survives');
    console.log(
      `failover: promoted after ${promotedMs} ms, read through Cluster after ${readMs} ms, rejoined as replica after ${rejoinedMs} ms`,
    );
  }, 60_000);

  it('rejects a slot out of range', async () => {
    await expect(cluster.masterOf(16_384)).rejects.toThrow(RangeError);
  });
});

describe('cluster global setup', () => {
  it('uses REDIS_CLUSTER_NODES instead of starting a cluster', async () => {
    const saved = process.env['REDIS_CLUSTER_NODES'];
    process.env['REDIS_CLUSTER_NODES'] = '127.0.0.1:7000,127.0.0.1:7001';
    onTestFinished(() => {
      if (saved === undefined) delete process.env['REDIS_CLUSTER_NODES'];
      else process.env['REDIS_CLUSTER_NODES'] = saved;
    });
    const provided: Record<string, unknown> = {};
    const teardown = await setup({ provide: (key: string, value: unknown) => (provided[key] = value) } as never);
    expect(provided).toEqual({ redisClusterNodes: '127.0.0.1:7000,127.0.0.1:7001' });
    await teardown();
  });
});

describe('startRedisCluster', () => {
  it('says what to install when redis-cli is missing, and leaves no server behind', async () => {
    const saved = process.env['REDIS_CLI_BIN'];
    process.env['REDIS_CLI_BIN'] = '/nonexistent/redis-cli';
    onTestFinished(() => {
      if (saved === undefined) delete process.env['REDIS_CLI_BIN'];
      else process.env['REDIS_CLI_BIN'] = saved;
    });
    const before = redisServerPids();
    await expect(startRedisCluster({ masters: 3, replicasPerMaster: 0 })).rejects.toThrow(
      /apt-get install redis-server.*REDIS_CLI_BIN/,
    );
    expect([...redisServerPids()].filter((pid) => !before.has(pid))).toEqual([]);
  });
});
