import type { TestProject } from 'vitest/node';
import './provided.js';
import { startRedisCluster } from './cluster/index.js';

/**
 * Vitest global setup: one real Redis Cluster (3 masters, 3 replicas) for the whole run, stopped
 * afterwards; tests read its seed nodes with `inject('redisClusterNodes')`. When `REDIS_CLUSTER_NODES`
 * is set (`host:port,host:port,...`), that cluster is used instead and nothing is started.
 */
export default async function setup(project: TestProject): Promise<() => Promise<void>> {
  const fromEnv = process.env['REDIS_CLUSTER_NODES'];
  if (fromEnv !== undefined && fromEnv !== '') {
    project.provide('redisClusterNodes', fromEnv);
    return async () => {};
  }
  const cluster = await startRedisCluster();
  project.provide('redisClusterNodes', cluster.seeds);
  return () => cluster.stop();
}
