import { DEFAULT_POOL, Keys, type RedisClient } from '@cq/coordinator';
import { Queue } from 'bullmq';
import { SPAWN_JOB, spawnJobId, spawnJobOptions, type SpawnJob } from './job.js';
import { spawnQueueShards } from './shards.js';

/** What the saga needs of a producer: put a session's spawn job on its pool's queue (idempotent per admission). */
export interface SpawnProducer {
  enqueue(job: SpawnJob): Promise<void>;
}

/** Pools whose queue objects are kept open at once (the least recently used others are closed). */
export const OPEN_POOLS = 64;

/**
 * The spawn queues of every pool: `SPAWN_QUEUE_SHARDS` BullMQ queues per pool, each in one cluster slot,
 * on one connection. A user's jobs always go to the same shard of their pool, so a retried enqueue finds
 * its job id there. The queue objects of a pool are made when it first has a job, and closed when
 * {@link OPEN_POOLS} others were used since (pools are named by tokens: their number is not bounded).
 */
export class SpawnQueues implements SpawnProducer {
  readonly #connection: RedisClient;
  readonly #keyPrefix: string;
  readonly #shards: number;
  readonly #keys: Keys;
  readonly #onError: (err: Error) => void;
  readonly #watchers = new Set<(pool: string, queues: readonly Queue[]) => void>();
  /** Open pools, least recently used first. */
  readonly #pools = new Map<string, Queue[]>();

  constructor(connection: RedisClient, keyPrefix: string, shards: number, onError: (err: Error) => void) {
    this.#connection = connection;
    this.#keyPrefix = keyPrefix;
    this.#shards = shards;
    this.#keys = new Keys(keyPrefix);
    this.#onError = onError;
    this.forPool(DEFAULT_POOL);
  }

  /** Every shard of the pool `default`, in index order. */
  get all(): readonly Queue[] {
    return this.forPool(DEFAULT_POOL);
  }

  /** The pools whose queues are open now. */
  get pools(): readonly string[] {
    return [...this.#pools.keys()];
  }

  /** Every shard of `pool`, in index order (made now when they are not open). */
  forPool(pool: string): readonly Queue[] {
    let queues = this.#pools.get(pool);
    if (queues !== undefined) {
      this.#pools.delete(pool);
      this.#pools.set(pool, queues);
      return queues;
    }
    queues = spawnQueueShards(this.#keyPrefix, this.#shards, pool).map((shard) => {
      const queue = new Queue(shard.name, { connection: this.#connection, prefix: shard.prefix });
      queue.on('error', this.#onError);
      return queue;
    });
    this.#pools.set(pool, queues);
    for (const watcher of this.#watchers) watcher(pool, queues);
    // The default pool's queues stay open (the dashboard and the metrics read them).
    while (this.#pools.size > OPEN_POOLS) {
      const oldest = [...this.#pools.keys()].find((name) => name !== DEFAULT_POOL);
      if (oldest === undefined) break;
      const closing = this.#pools.get(oldest)!;
      this.#pools.delete(oldest);
      for (const queue of closing) void queue.close().catch(() => {});
    }
    return queues;
  }

  /** Tells `watcher` of every pool's queues, those open now and those made later (the dashboard shows them). */
  watchPools(watcher: (pool: string, queues: readonly Queue[]) => void): void {
    this.#watchers.add(watcher);
    for (const [pool, queues] of this.#pools) watcher(pool, queues);
  }

  /** The shard that carries `userId`'s spawn jobs of `pool`. */
  forUser(userId: string, pool: string = DEFAULT_POOL): Queue {
    const queues = this.forPool(pool);
    return queues[this.#keys.queueShardOf(userId, queues.length)]!;
  }

  /** Adds the session's job; its id derives from user and fence, so adding it twice adds it once. */
  async enqueue(job: SpawnJob): Promise<void> {
    await this.forUser(job.userId, job.pool ?? DEFAULT_POOL).add(SPAWN_JOB, job, {
      ...spawnJobOptions,
      jobId: spawnJobId(job.userId, job.fence),
    });
  }

  /** Jobs of `pool` waiting for a host (waiting and delayed, every shard). */
  async waiting(pool: string): Promise<number> {
    const counts = await Promise.all(this.forPool(pool).map((queue) => queue.getJobCounts('waiting', 'delayed')));
    return counts.reduce((n, c) => n + (c['waiting'] ?? 0) + (c['delayed'] ?? 0), 0);
  }

  /** Closes every open pool's shards (the shared connection is the caller's). */
  async close(): Promise<void> {
    await Promise.all([...this.#pools.values()].flat().map((queue) => queue.close().catch(() => {})));
  }
}
