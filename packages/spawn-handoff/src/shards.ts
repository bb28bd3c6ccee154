import { Keys } from '@cq/coordinator';

/** Name of the BullMQ queue that carries spawn jobs from the API to the worker hosts (of each shard: `spawn-<n>`). */
export const SPAWN_QUEUE = 'spawn';

/** Where one spawn-queue shard lives: the BullMQ queue name and prefix. */
export interface SpawnQueueShard {
  /** `spawn` when there is one shard, else `spawn-<index>`. */
  readonly name: string;
  /** Hash-tagged BullMQ prefix (see {@link Keys.queuePrefix}): one slot per queue on Redis Cluster. */
  readonly prefix: string;
}

/** The `count` spawn-queue shards of a key prefix; API and worker hosts must agree on both. */
export function spawnQueueShards(keyPrefix: string, count: number): SpawnQueueShard[] {
  const keys = new Keys(keyPrefix);
  return Array.from({ length: count }, (_, index) => ({
    name: count === 1 ? SPAWN_QUEUE : `${SPAWN_QUEUE}-${index}`,
    prefix: keys.queuePrefix(index, count),
  }));
}
