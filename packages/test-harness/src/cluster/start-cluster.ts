import { createCluster } from './create-cluster.js';
import { ephemeralRange } from './ports.js';
import { clusterOf, type RedisCluster } from './redis-cluster.js';
import { startNode } from './start-node.js';

/** Options of {@link startRedisCluster}. */
export interface RedisClusterOptions {
  /**
   * How many masters share the 16384 slots (at least 3, as `redis-cli --cluster create` demands).
   * @defaultValue 3
   */
  masters?: number;
  /**
   * How many replicas follow each master.
   * @defaultValue 1
   */
  replicasPerMaster?: number;
  /**
   * `cluster-node-timeout`: how long a node may stay silent before it is thought down, in milliseconds.
   * A failover takes roughly twice this plus up to a second of election delay.
   * @defaultValue 1000
   */
  nodeTimeoutMs?: number;
  /**
   * How long the whole start (nodes, `redis-cli --cluster create`, agreement) may take, in milliseconds.
   * @defaultValue 30000
   */
  startTimeoutMs?: number;
}

/**
 * Starts a Redis Cluster of local `redis-server` processes on 127.0.0.1 (each in its own temporary
 * directory, without persistence besides `nodes.conf`), joins them with `redis-cli --cluster create`,
 * and resolves once every node agrees the cluster is ok. Nodes can be halted and resumed (their
 * `nodes.conf` makes them rejoin). Whatever was started is stopped again should the start fail.
 */
export async function startRedisCluster(options: RedisClusterOptions = {}): Promise<RedisCluster> {
  const masters = options.masters ?? 3;
  const replicas = options.replicasPerMaster ?? 1;
  const nodeTimeoutMs = options.nodeTimeoutMs ?? 1000;
  const startTimeoutMs = options.startTimeoutMs ?? 30_000;
  if (!Number.isInteger(masters) || masters < 3)
    throw new RangeError(`a Redis Cluster needs at least 3 masters, got masters: ${masters}`);
  if (!Number.isInteger(replicas) || replicas < 0)
    throw new RangeError(`replicasPerMaster must be an integer ≥ 0, got ${replicas}`);
  const deadline = Date.now() + startTimeoutMs;
  const remaining = (): number => Math.max(1, deadline - Date.now());

  const ephemeral = await ephemeralRange();
  const taken = new Set<number>();
  const count = masters * (1 + replicas);
  const started = await Promise.allSettled(
    Array.from({ length: count }, () => startNode(taken, ephemeral, nodeTimeoutMs, remaining())),
  );
  const servers = started.flatMap((r) => (r.status === 'fulfilled' ? [r.value] : []));
  const cluster = clusterOf(servers);
  try {
    const failed = started.find((r): r is PromiseRejectedResult => r.status === 'rejected');
    if (failed !== undefined) throw failed.reason;
    await createCluster(
      servers.map((s) => s.port),
      replicas,
      remaining(),
    );
    await cluster.waitUntilOk(remaining());
    return cluster;
  } catch (err) {
    await cluster.stop();
    throw err;
  }
}
