import { Keys, type RedisClient } from '@cq/coordinator';
import { Queue } from 'bullmq';
import { SPAWN_JOB, spawnJobId, spawnJobOptions, type SpawnJob } from './job.js';
import { spawnQueueShards } from './shards.js';

/** What the saga needs of a producer: put a session's spawn job on its queue (idempotent per admission). */
export interface SpawnProducer {
  enqueue(job: SpawnJob): Promise<void>;
}

/**
 * The spawn queue's shards (`SPAWN_QUEUE_SHARDS` BullMQ queues, each in one cluster slot) on one
 * connection. A user's jobs always go to the same shard, so a retried enqueue finds its job id there.
 */
export class SpawnQueues implements SpawnProducer {
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

  /** Adds the session's job; its id derives from user and fence, so adding it twice adds it once. */
  async enqueue(job: SpawnJob): Promise<void> {
    await this.forUser(job.userId).add(SPAWN_JOB, job, {
      ...spawnJobOptions,
      jobId: spawnJobId(job.userId, job.fence),
    });
  }

  /** Closes every shard (the shared connection is the caller's). */
  async close(): Promise<void> {
    await Promise.all(this.all.map((queue) => queue.close().catch(() => {})));
  }
}
