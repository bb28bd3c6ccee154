import { Redis } from 'ioredis';
import { describe, expect, inject, it } from 'vitest';
import { ROOT, startNode } from '../support/processes.js';

describe('a Redis Cluster set up to lose writes', () => {
  it('stops the API and a worker host at start, with one line naming every node found (here: none keeps anything on disk)', async () => {
    const seeds = inject('redisClusterNodes');
    // The cluster's nodes as CLUSTER SLOTS lists them: its masters, and the replicas it lists too once
    // they are in sync (which, on a cluster other tests have used, they are).
    const seed = new Redis(`redis://${seeds.split(',')[0]!}`, { maxRetriesPerRequest: 1 });
    // Each range: its first and last slot, then its nodes, the master first, each [host, port, ...].
    const ranges = (await seed.call('CLUSTER', 'SLOTS')) as unknown[][];
    seed.disconnect();
    const nodesOf = (range: unknown[]): string[] =>
      range.slice(2).map((node) => {
        const [host, port] = node as [string, number];
        return `${host}:${port}`;
      });
    const masters = new Set(ranges.map((range) => nodesOf(range)[0]!));
    const all = new Set(ranges.flatMap(nodesOf));
    const common = { REDIS_CLUSTER_NODES: seeds, SPAWN_QUEUE_SHARDS: '3', REDIS_ACCEPT_RISKS: '' };
    const processes = [
      startNode(`${ROOT}apps/api/dist/main.js`, { ...common, API_KEYS: 'cluster-setup-key-0123456789', PORT: '0' }),
      startNode(`${ROOT}apps/worker/dist/main.js`, {
        ...common,
        WORKER_ID: 'cluster-setup-host',
        SESSION_CONTAINMENT: 'group',
        SESSION_NETWORK: 'host',
      }),
    ];
    for (const started of processes) {
      const { code } = await started.exited();
      const lines = started.stderr
        .join('')
        .split('\n')
        .filter((l) => l !== '');
      expect(code, lines.join('\n')).toBe(1);
      expect(lines).toHaveLength(1);
      const [line] = lines;
      // Every node the client found, in one finding (the harness's nodes have neither AOF nor save points):
      // the 3 masters at least, and nothing but nodes of the cluster (its replicas, where CLUSTER SLOTS
      // listed them to the client).
      const named = /^Redis 7\.\d+\.\d+ at ((?:127\.0\.0\.1:\d+(?:, )?)+) keeps nothing on disk/.exec(line!);
      expect(named, line).not.toBeNull();
      const nodes = named![1]!.split(', ');
      expect(masters.size).toBe(3);
      for (const master of masters) expect(nodes).toContain(master);
      for (const node of nodes) expect(all.has(node), `${node} is a node of the cluster`).toBe(true);
      expect(line).toMatch(/\(to start anyway, knowing what it costs: REDIS_ACCEPT_RISKS=no-persistence\)$/);
    }
  });
});
