import type { RedisClient } from '@cq/coordinator';
import { attempt } from '@cq/service-kit';
import { WaitingError, Worker, type Job } from 'bullmq';
import type { SpawnLogger } from './logger.js';
import { spawnJobSchema, type SpawnJob } from './job.js';
import { spawnQueueShards } from './shards.js';

/** Options of {@link spawnConsumers}. */
export interface SpawnConsumerOptions<R> {
  /** The blocking connection the workers share. */
  connection: RedisClient;
  keyPrefix: string;
  /** `SPAWN_QUEUE_SHARDS`. */
  shards: number;
  /** The pool whose queues these workers take jobs from (a host never polls another pool's). @defaultValue `'default'` */
  pool?: string;
  /** Jobs each shard's worker runs at once. */
  concurrency: number;
  /** How often BullMQ looks for jobs whose host died (stalled), ms. */
  stalledIntervalMs: number;
  /** Runs one job whose payload is valid; `job` and `token` serve {@link handBack}. */
  run: (payload: SpawnJob, job: Job, token: string | undefined) => Promise<R>;
  log: SpawnLogger;
}

/**
 * One BullMQ worker per spawn-queue shard of the host's pool, each taking jobs (the BRPOPLPUSH-style wait → active move)
 * and passing those with a valid payload to `run`; a job with an invalid payload is dropped with a
 * warning. A job that came back from a dead host is retried once (`maxStalledCount` 1); a fetch that
 * failed (Redis away, a failover) is tried again after a second, not BullMQ's 15.
 */
export function spawnConsumers<R>(options: SpawnConsumerOptions<R>): Worker[] {
  const { log } = options;
  return spawnQueueShards(options.keyPrefix, options.shards, options.pool).map((shard) => {
    const worker = new Worker(
      shard.name,
      async (job, token): Promise<R | { ran: false; reason: 'invalid_payload' }> => {
        const payload = spawnJobSchema.safeParse(job.data);
        if (!payload.success) {
          log.warn(
            { jobId: job.id, issue: payload.error.issues[0]?.message },
            'spawn job has an invalid payload; dropped',
          );
          return { ran: false, reason: 'invalid_payload' };
        }
        return options.run(payload.data, job, token);
      },
      {
        connection: options.connection,
        prefix: shard.prefix,
        concurrency: options.concurrency,
        stalledInterval: options.stalledIntervalMs,
        maxStalledCount: 1,
        runRetryDelay: 1000,
        autorun: true,
      },
    );
    // Connection errors are logged once per outage by the connection itself.
    worker.on('error', (err) => log.debug({ err }, 'queue worker error'));
    worker.on('failed', (job, err) => log.warn({ jobId: job?.id, err }, 'spawn job failed'));
    return worker;
  });
}

/**
 * Puts a job this host will not run back into its queue for any host, without counting an attempt,
 * and ends the job's run here (BullMQ's `WaitingError`). Should Redis not take it (an outage, a
 * failover), tries again twice; after that the job stays active until its lock runs out and BullMQ's
 * stalled-job check returns it.
 */
export async function handBack(job: Job, token: string | undefined, log: SpawnLogger): Promise<never> {
  try {
    await attempt(() => job.moveToWait(token), 3, 500);
  } catch (err) {
    log.warn({ jobId: job.id, err }, 'could not hand the job back; it returns when its lock runs out');
  }
  throw new WaitingError();
}
