import { Cluster, Redis } from 'ioredis';
import { inject } from 'vitest';

/** The Redis the system under test runs on: a standalone server, or a Redis Cluster. */
export type RedisTarget = { kind: 'standalone'; url: string } | { kind: 'cluster'; seeds: string };

/**
 * The target of this test project: the cluster when the project's global setup provides one
 * (`vitest --project cluster`), else the standalone Redis.
 */
export function currentTarget(): RedisTarget {
  const seeds = inject('redisClusterNodes');
  if (seeds !== undefined) return { kind: 'cluster', seeds };
  return { kind: 'standalone', url: inject('redisUrl') };
}

/**
 * The environment variables that point the API and worker hosts at `target`. On the cluster the spawn
 * queue is split into three shards, one per master.
 */
export function targetEnv(target: RedisTarget): Record<string, string> {
  return target.kind === 'cluster'
    ? { REDIS_CLUSTER_NODES: target.seeds, SPAWN_QUEUE_SHARDS: '3' }
    : { REDIS_URL: target.url };
}

/** A client of the test's own for `target` (close it with `disconnect()`). */
export function connect(target: RedisTarget): Redis | Cluster {
  if (target.kind === 'standalone') return new Redis(target.url, { maxRetriesPerRequest: 1 });
  const nodes = target.seeds.split(',').map((seed) => {
    const [host, port] = seed.split(':');
    return { host: host!, port: Number(port) };
  });
  return new Cluster(nodes, { redisOptions: { maxRetriesPerRequest: 1 } });
}
