import { DEFAULT_POOL, Keys } from '@cq/coordinator';

/** Name of the BullMQ queue that carries spawn jobs from the API to the worker hosts of the pool `default`. */
export const SPAWN_QUEUE = 'spawn';

/** Where one spawn-queue shard lives: the BullMQ queue name and prefix. */
export interface SpawnQueueShard {
  /**
   * Of the pool `default`: `spawn` when there is one shard, else `spawn-<index>` (the names from before
   * pools, so a deployment upgrades with its queued jobs); of another pool: `spawn.<pool>`, or
   * `spawn.<pool>.<index>` (a pool name has no dot).
   */
  readonly name: string;
  /** Hash-tagged BullMQ prefix (see {@link Keys.queuePrefix}): one slot per queue on Redis Cluster. */
  readonly prefix: string;
}

/**
 * The `count` spawn-queue shards of a pool of a key prefix; API and worker hosts must agree on the count.
 * Every pool's shards sit in the same slots (the slot of shard `i` is the same for every pool), so each
 * pool spreads over the cluster as the users it serves do.
 */
export function spawnQueueShards(keyPrefix: string, count: number, pool: string = DEFAULT_POOL): SpawnQueueShard[] {
  const keys = new Keys(keyPrefix);
  const base = pool === DEFAULT_POOL ? SPAWN_QUEUE : `${SPAWN_QUEUE}.${pool}`;
  const separator = pool === DEFAULT_POOL ? '-' : '.';
  return Array.from({ length: count }, (_, index) => ({
    name: count === 1 ? base : `${base}${separator}${index}`,
    prefix: keys.queuePrefix(index, count),
  }));
}
