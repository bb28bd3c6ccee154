import type { Keys, RedisClient } from '@cq/coordinator';
import { ConfigError } from '@cq/service-kit';
import { handBack, spawnConsumers, type SpawnJob } from '@cq/spawn-handoff';
import type { Job, Worker } from 'bullmq';
import type { Logger } from 'pino';
import type { WorkerConfig } from './config.js';
import type { Heartbeat } from './liveness/heartbeat.js';
import type { RunOutcome, SessionRunner } from './session-runner.js';

/**
 * What a spawn job answers (its BullMQ return value): its session runs on this host under its lease,
 * or how it ended without running.
 */
export type Handoff = { readonly ran: true; readonly running: true } | RunOutcome;

/** What {@link SpawnJobs} works with. */
export interface SpawnJobsDeps {
  readonly config: WorkerConfig;
  readonly runner: SessionRunner;
  readonly heartbeat: Heartbeat;
  readonly logger: Logger;
  /** Aborts when the host stops: its sessions stop, no job is taken. */
  readonly shutdown: AbortSignal;
  /** How often BullMQ looks for jobs whose host died (stalled), ms. */
  readonly stalledIntervalMs: number;
}

/**
 * The host's spawn jobs: a BullMQ worker on each spawn-queue shard, each allowed every slot. A job is
 * active only while its session is being claimed; the sessions running here stay within `SLOTS`, every
 * shard's worker paused while they fill them (a paused worker runs no stalled-job check: the hosts with
 * free slots do). Each session is followed to its end, whatever its job answered.
 */
export class SpawnJobs {
  readonly #deps: SpawnJobsDeps;
  #workers: Worker[] = [];
  #busy = 0;
  /** No job is taken any more (a drain): one fetched meanwhile is handed back. */
  #refusing = false;
  /** The sessions started here, each followed to its end (the spawn job ends at the start). */
  readonly #sessions = new Set<Promise<void>>();

  constructor(deps: SpawnJobsDeps) {
    this.#deps = deps;
  }

  /** Sessions running now. */
  get busy(): number {
    return this.#busy;
  }

  /** Starts taking jobs on `connection` (a blocking connection of its own). */
  start(connection: Parameters<typeof spawnConsumers>[0]['connection']): void {
    const { config, logger } = this.#deps;
    this.#workers = spawnConsumers({
      connection,
      keyPrefix: config.keyPrefix,
      shards: config.spawnQueueShards,
      pool: config.pool,
      concurrency: config.slots,
      stalledIntervalMs: this.#deps.stalledIntervalMs,
      run: (payload, job, token) => this.#process(payload, job, token),
      log: logger,
    });
  }

  /** Takes no more jobs (a drain); resolves once every shard's worker has closed. */
  async refuse(): Promise<void> {
    this.#refusing = true;
    await this.close();
  }

  /** Closes every shard's worker (`force`: without waiting for its jobs). */
  async close(force = false): Promise<void> {
    await Promise.all(this.#workers.map((worker) => worker.close(force)));
  }

  /** Resolves once every session started here has ended (and its end was recorded or given up). */
  async ended(): Promise<void> {
    while (this.#sessions.size > 0) await Promise.all([...this.#sessions]);
  }

  /**
   * One spawn job: the handoff. The job ends (completed) as soon as its session is claimed and running
   * under its lease, or as soon as it ended without running (stale, timed out, another pool); the
   * session then runs on here under its lease alone, with no BullMQ lock to keep (see
   * docs/scaling.md, "Keeping sessions running"). A host that dies before the claim leaves the job
   * active: BullMQ's stalled-job check gives it to another host.
   */
  async #process(payload: SpawnJob, job: Job, token: string | undefined): Promise<Handoff> {
    const { config, runner, heartbeat, logger, shutdown } = this.#deps;
    if (shutdown.aborted || this.#refusing) {
      logger.debug({ jobId: job.id, queue: job.queueName }, 'shutting down or draining; job handed back');
      return handBack(job, token, logger);
    }
    if (this.#busy >= config.slots) {
      // Another job took the last slot first: hand the job back for any host to take (no attempt is
      // counted), and fetch nothing more until a slot frees.
      this.#pauseFetching(true);
      logger.debug({ jobId: job.id, queue: job.queueName }, 'all slots busy; job handed back');
      return handBack(job, token, logger);
    }
    // The heartbeat on the tick after the claim publishes the slot in use, takes over the session's hold
    // and registers it under the host lease (one heartbeat for all the sessions started in a tick); a
    // session not started gives its hold back with the heartbeat after its end.
    this.#busy++;
    heartbeat.claimed(payload.sessionId);
    if (this.#busy >= config.slots) this.#pauseFetching(true);
    let started: (() => void) | undefined;
    const running = new Promise<'started'>((resolve) => (started = () => resolve('started')));
    const session = runner
      .run(payload, shutdown, () => {
        started?.();
        heartbeat.started(payload.sessionId, payload.userId);
      })
      .finally(() => {
        this.#busy--;
        heartbeat.ended(payload.sessionId);
        if (!shutdown.aborted && !this.#refusing) {
          this.#pauseFetching(false);
          heartbeat.soon();
        }
      });
    // Followed to its end, whatever the job's answer: the host waits for these when it drains or stops.
    const followed = session.then(
      () => undefined,
      (err: unknown) => logger.error({ err, sessionId: payload.sessionId }, 'session run failed'),
    );
    this.#sessions.add(followed);
    void followed.finally(() => this.#sessions.delete(followed));
    const first = await Promise.race([running, session]);
    return first === 'started' ? { ran: true, running: true } : first;
  }

  /** Stops (or resumes) every shard's worker fetching jobs while all slots are busy. */
  #pauseFetching(paused: boolean): void {
    for (const worker of this.#workers) {
      if (paused) void worker.pause(true);
      else if (worker.isPaused()) void worker.resume();
    }
  }
}

/**
 * Throws a {@link ConfigError} when the API on this `KEY_PREFIX` runs with another `SPAWN_QUEUE_SHARDS`:
 * this host would wait on queues that get no jobs, and the sessions would end as lost.
 */
export async function checkShards(redis: RedisClient, keys: Keys, config: WorkerConfig): Promise<void> {
  const apiShards = await redis.get(keys.queueShards()).catch(() => null);
  if (apiShards !== null && Number(apiShards) !== config.spawnQueueShards)
    throw new ConfigError(
      `SPAWN_QUEUE_SHARDS is ${config.spawnQueueShards} here but the API on KEY_PREFIX ` +
        `"${config.keyPrefix}" uses ${apiShards}: set the same value on every API instance and worker host`,
    );
}
