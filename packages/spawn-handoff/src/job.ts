import type { JobsOptions } from 'bullmq';
import { Keys, USER_ID_PATTERN } from '@cq/coordinator';
import { z } from 'zod';

/** Name of the BullMQ queue that carries spawn jobs from the API to the worker hosts (of each shard: `spawn-<n>`). */
export const SPAWN_QUEUE = 'spawn';

/** Name of every job on the spawn queue. */
export const SPAWN_JOB = 'spawn';

/** The payload of a spawn job: enough to claim the session; everything else is read from Redis. */
export const spawnJobSchema = z
  .object({
    userId: z.string().regex(USER_ID_PATTERN),
    sessionId: z.string().uuid(),
    fence: z.number().int().positive(),
  })
  .strict();

/** A spawn job's payload. */
export type SpawnJob = z.infer<typeof spawnJobSchema>;

/**
 * The job id of a session's spawn job: from the user and the fence, so a retried enqueue of the same
 * admission cannot add a second job (BullMQ ignores an add whose job id exists).
 */
export function spawnJobId(userId: string, fence: number): string {
  return `s.${Buffer.from(userId).toString('base64url')}.${fence}`;
}

/**
 * Options of every spawn job. A claim that failed because Redis was briefly unreachable is retried
 * (claiming is idempotent: the fence must match); a crashed host's job comes back through BullMQ's
 * stalled-job check, which does not count as an attempt. Retention is bounded.
 */
export const spawnJobOptions: Readonly<JobsOptions> = Object.freeze({
  attempts: 5,
  backoff: { type: 'exponential', delay: 250 },
  removeOnComplete: { age: 3600, count: 1000 },
  removeOnFail: { age: 24 * 3600, count: 5000 },
});

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
