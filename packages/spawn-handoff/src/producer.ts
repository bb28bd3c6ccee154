import { Keys, type RedisClient } from '@cq/coordinator';
import { spawnQueueShards } from '@cq/service-kit';
import { Queue } from 'bullmq';

/**
 * The spawn queue's shards (`SPAWN_QUEUE_SHARDS` BullMQ queues, each in one cluster slot) on one
 * connection. A user's jobs always go to the same shard, so a retried enqueue finds its job id there.
 */
export class SpawnQueues {
  /** Every shard, in index order. */
  readonly all: readonly Queue[];
  readonly #keys: Keys;

  constructor(connection: RedisClient, keyPrefix: string, shards: number, onError: (err: Error) => void) {
    this.#keys = new Keys(keyPrefix);
    this.all = spawnQueueShards(keyPrefix, shards).map((shard) => {
      const queue = new Queue(shard.name, { connection, prefix: shard.prefix });
      queue.on('error', onError);
      return queue;
    });
  }

  /** The shard that carries `userId`'s spawn jobs. */
  forUser(userId: string): Queue {
    return this.all[this.#keys.queueShardOf(userId, this.all.length)]!;
  }

  /** Closes every shard (the shared connection is the caller's). */
  async close(): Promise<void> {
    await Promise.all(this.all.map((queue) => queue.close().catch(() => {})));
  }
}
