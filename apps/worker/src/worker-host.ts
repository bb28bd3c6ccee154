import { setMaxListeners } from 'node:events';
import { Coordinator, type RedisClient } from '@cq/coordinator';
import { SPAWN_QUEUE, createRedis, queuePrefix, spawnJobSchema } from '@cq/service-kit';
import { Worker, type Job } from 'bullmq';
import type { Logger } from 'pino';
import type { WorkerConfig } from './config.js';
import { processLauncher, type SessionLauncher } from './session-process.js';
import { SessionRunner, type RunOutcome } from './session-runner.js';

/** Waits for `promise` (its failure ignored) at most `ms`. */
async function bounded(promise: Promise<unknown> | undefined, ms: number): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  await Promise.race([promise?.catch(() => {}), new Promise((resolve) => (timer = setTimeout(resolve, ms)))]);
  clearTimeout(timer);
}

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
  #queueRedis: RedisClient | undefined;
  #heartbeat: NodeJS.Timeout | undefined;
  #beat: (() => void) | undefined;
  #soon: NodeJS.Timeout | undefined;
  #busy = 0;

  constructor(options: WorkerHostOptions) {
    this.#config = options.config;
    this.#logger = options.logger.child({ workerId: options.config.workerId });
    this.#heartbeatMs = options.heartbeatMs ?? 2000;
    // Every running session listens for the shutdown: as many listeners as slots is expected.
    setMaxListeners(this.#config.slots + 10, this.#shutdown.signal);
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

  #beatSoon(): void {
    if (this.#soon !== undefined) return;
    this.#soon = setTimeout(() => {
      this.#soon = undefined;
      this.#beat?.();
    }, 250);
    this.#soon.unref();
  }

  /** Sessions running now. */
  get busy(): number {
    return this.#busy;
  }

  /** Starts taking spawn jobs and publishing the heartbeat. */
  async start(): Promise<void> {
    const connection = createRedis(this.#config, 'blocking', { logger: this.#logger, name: `cq-worker-queue:${this.#config.workerId}` });
    this.#queueRedis = connection;
    this.#worker = new Worker(SPAWN_QUEUE, (job) => this.#process(job), {
      connection,
      prefix: queuePrefix(this.#config.keyPrefix),
      concurrency: this.#config.slots,
      stalledInterval: this.#stalledIntervalMs,
      maxStalledCount: 1,
      autorun: true,
    });
    // Connection errors are logged once per outage by the connection itself.
    this.#worker.on('error', (err) => this.#logger.debug({ err: { message: err.message } }, 'queue worker error'));
    this.#worker.on('failed', (job, err) => this.#logger.warn({ jobId: job?.id, err: { message: err.message } }, 'spawn job failed'));
    const beat = (this.#beat = (): void => {
      this.#coordinator.workers
        .heartbeat({ workerId: this.#config.workerId, slots: this.#config.slots, busy: this.#busy, startedAt: this.#startedAt }, this.#heartbeatMs * 3)
        .catch((err: unknown) => this.#logger.debug({ err: { message: (err as Error).message } }, 'heartbeat failed'));
    });
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
    // Slots in use are published soon, not only at the next heartbeat (at most one extra beat per 250 ms).
    this.#busy++;
    this.#beatSoon();
    try {
      return await this.#runner.run(payload.data, this.#shutdown.signal);
    } finally {
      this.#busy--;
      if (!this.#shutdown.signal.aborted) this.#beatSoon();
    }
  }

  /**
   * Stops cleanly: takes no more jobs, stops its sessions (they end as `stopped`), waits for their end
   * to be recorded and their leases released, withdraws its heartbeat, closes its connections.
   */
  async stop(): Promise<void> {
    clearInterval(this.#heartbeat);
    clearTimeout(this.#soon);
    const worker = this.#worker;
    const closing = worker?.close();
    this.#shutdown.abort();
    // Sessions end within the grace time and their end is recorded within a lease; with Redis
    // unreachable that cannot finish, so the wait is bounded and the host exits all the same.
    const bound = this.#config.sessionGraceMs + this.#config.leaseMs + 2000;
    let timer: NodeJS.Timeout | undefined;
    const closed =
      closing === undefined ||
      (await Promise.race([closing.then(() => true), new Promise<false>((resolve) => (timer = setTimeout(() => resolve(false), bound)))]));
    clearTimeout(timer);
    if (!closed) {
      this.#logger.warn({ waitedMs: bound }, 'could not finish cleanly (is Redis reachable?); closing anyway');
      await bounded(worker?.close(true), 500);
      this.#queueRedis?.disconnect();
    } else {
      await bounded(this.#coordinator.workers.withdraw(this.#config.workerId), 1000);
    }
    if (this.#coordinatorRedis.status === 'ready') await this.#coordinatorRedis.quit().catch(() => this.#coordinatorRedis.disconnect());
    else this.#coordinatorRedis.disconnect();
  }
}
