import type { JobsOptions } from 'bullmq';
import { POOL_PATTERN, USER_ID_PATTERN } from '@cq/coordinator';

import { z } from 'zod';

/** Name of every job on the spawn queue. */
export const SPAWN_JOB = 'spawn';

/** The payload of a spawn job: enough to claim the session; everything else is read from Redis. */
export const spawnJobSchema = z
  .object({
    userId: z.string().regex(USER_ID_PATTERN),
    sessionId: z.string().uuid(),
    fence: z.number().int().positive(),
    /** Its pool; absent on a job queued before pools: `default`. */
    pool: z.string().regex(POOL_PATTERN).optional(),
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
