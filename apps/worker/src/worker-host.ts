import { Coordinator, type RedisClient } from '@cq/coordinator';
import { SPAWN_QUEUE, createRedis, queuePrefix, spawnJobSchema } from '@cq/service-kit';
import { Worker, type Job } from 'bullmq';
import type { Logger } from 'pino';
import type { WorkerConfig } from './config.js';
import { processLauncher, type SessionLauncher } from './session-process.js';
import { SessionRunner, type RunOutcome } from './session-runner.js';

/** Options of {@link WorkerHost}. */
export interface WorkerHostOptions {
  config: WorkerConfig;
  logger: Logger;
  /** How sessions run. @defaultValue processes under the supervisor, for `SESSION_COMMAND` */
  launcher?: SessionLauncher;
  /**
   * How often the host publishes its heartbeat, ms; the record lives three times as long.
   * @defaultValue 2000
   */
  heartbeatMs?: number;
  /**
   * How often BullMQ looks for jobs whose host died (stalled), ms.
   * @defaultValue 10000
   */
  stalledIntervalMs?: number;
}

/**
 * A worker host: a BullMQ worker on the spawn queue with `SLOTS` concurrency, running each job's
 * session under its lease, publishing a heartbeat, and stopping its sessions on shutdown.
 */
export class WorkerHost {
  readonly #config: WorkerConfig;
  readonly #logger: Logger;
  readonly #coordinatorRedis: RedisClient;
  readonly #coordinator: Coordinator;
  readonly #runner: SessionRunner;
  readonly #shutdown = new AbortController();
  readonly #startedAt = Date.now();
  readonly #heartbeatMs: number;
  readonly #stalledIntervalMs: number;
  #worker: Worker | undefined;
  #heartbeat: NodeJS.Timeout | undefined;
  #busy = 0;

  constructor(options: WorkerHostOptions) {
    this.#config = options.config;
    this.#logger = options.logger.child({ workerId: options.config.workerId });
    this.#heartbeatMs = options.heartbeatMs ?? 2000;
    this.#stalledIntervalMs = options.stalledIntervalMs ?? 10_000;
    this.#coordinatorRedis = createRedis(this.#config, 'requests', { logger: this.#logger, name: `cq-worker:${this.#config.workerId}` });
    this.#coordinator = new Coordinator({ redis: this.#coordinatorRedis, keyPrefix: this.#config.keyPrefix });
    this.#runner = new SessionRunner({
      coordinator: this.#coordinator,
      launcher: options.launcher ?? processLauncher(this.#config.sessionCommand),
      workerId: this.#config.workerId,
      leaseMs: this.#config.leaseMs,
      graceMs: this.#config.sessionGraceMs,
      logger: this.#logger,
    });
  }

  /** Sessions running now. */
  get busy(): number {
    return this.#busy;
  }

  /** Starts taking spawn jobs and publishing the heartbeat. */
  async start(): Promise<void> {
    const connection = createRedis(this.#config, 'blocking', { logger: this.#logger, name: `cq-worker-queue:${this.#config.workerId}` });
    this.#worker = new Worker(SPAWN_QUEUE, (job) => this.#process(job), {
      connection,
      prefix: queuePrefix(this.#config.keyPrefix),
      concurrency: this.#config.slots,
      stalledInterval: this.#stalledIntervalMs,
      maxStalledCount: 1,
      autorun: true,
    });
    this.#worker.on('error', (err) => this.#logger.warn({ err: { message: err.message } }, 'queue worker error'));
    this.#worker.on('failed', (job, err) => this.#logger.warn({ jobId: job?.id, err: { message: err.message } }, 'spawn job failed'));
    const beat = (): void => {
      this.#coordinator.workers
        .heartbeat({ workerId: this.#config.workerId, slots: this.#config.slots, busy: this.#busy, startedAt: this.#startedAt }, this.#heartbeatMs * 3)
        .catch((err: unknown) => this.#logger.debug({ err: { message: (err as Error).message } }, 'heartbeat failed'));
    };
    beat();
    this.#heartbeat = setInterval(beat, this.#heartbeatMs);
    this.#logger.info({ slots: this.#config.slots, leaseMs: this.#config.leaseMs }, 'worker host started');
  }

  async #process(job: Job): Promise<RunOutcome | { ran: false; reason: 'invalid_payload' }> {
    const payload = spawnJobSchema.safeParse(job.data);
    if (!payload.success) {
      this.#logger.warn({ jobId: job.id, issue: payload.error.issues[0]?.message }, 'spawn job has an invalid payload; dropped');
      return { ran: false, reason: 'invalid_payload' };
    }
    if (this.#shutdown.signal.aborted) throw new Error('worker host is shutting down; the job will be retried elsewhere');
    this.#busy++;
    try {
      return await this.#runner.run(payload.data, this.#shutdown.signal);
    } finally {
      this.#busy--;
    }
  }

  /**
   * Stops cleanly: takes no more jobs, stops its sessions (they end as `stopped`), waits for their end
   * to be recorded and their leases released, withdraws its heartbeat, closes its connections.
   */
  async stop(): Promise<void> {
    clearInterval(this.#heartbeat);
    const closing = this.#worker?.close();
    this.#shutdown.abort();
    await closing;
    await this.#coordinator.workers.withdraw(this.#config.workerId).catch(() => {});
    if (this.#coordinatorRedis.status === 'ready') await this.#coordinatorRedis.quit().catch(() => this.#coordinatorRedis.disconnect());
    else this.#coordinatorRedis.disconnect();
  }
}
