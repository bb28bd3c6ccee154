import { setMaxListeners } from 'node:events';
import { rmSync } from 'node:fs';
import { Coordinator, HostChannel, closeRedis, type Isolation, type RedisClient } from '@cq/coordinator';
import { ConfigError, REQUEST_TIMEOUT_MS, RedisSetup, createRedis, replicaWaitOf, settleWithin } from '@cq/service-kit';
import { handBack, spawnConsumers, type SpawnJob } from '@cq/spawn-handoff';
import type { Job, Worker } from 'bullmq';
import type { Logger } from 'pino';
import type { WorkerConfig } from './config.js';
import { prepareCgroups, type CgroupLayout } from './cgroups.js';
import { probeContainment, type PlannedContainment } from './containment.js';
import { containmentRequest, isolationOf, logContainment } from './containment-log.js';
import { hostDir, pruneSessionDirs } from './isolation.js';
import { Heartbeat } from './liveness/heartbeat.js';
import { HostLease } from './liveness/host-lease.js';
import { RuntimeLauncher, type SessionLauncher } from './session-process.js';
import { SessionRunner, type RunOutcome } from './session-runner.js';

/**
 * What a spawn job answers (its BullMQ return value): its session runs on this host under its lease,
 * or how it ended without running.
 */
export type Handoff = { readonly ran: true; readonly running: true } | RunOutcome;

/** Options of {@link WorkerHost}. */
export interface WorkerHostOptions {
  config: WorkerConfig;
  logger: Logger;
  /** How sessions run. @defaultValue processes of the session runtime, for `SESSION_COMMAND` */
  launcher?: SessionLauncher;
  /**
   * How sessions are contained, found out once (see {@link probeContainment}).
   * @defaultValue probed from the configuration at {@link WorkerHost.start} (throws when it cannot be had)
   */
  containment?: PlannedContainment;
  /**
   * How the host keeps its sessions apart, as its heartbeat tells (`GET /v1/hosts`).
   * @defaultValue `{network: 'host', filesystem: 'shared', cpus: null}`: not isolated
   */
  isolation?: Isolation;
  /**
   * How often the host publishes its heartbeat (which renews its host lease), ms; the record lives three
   * times as long. Never more than a third of `LEASE_MS`.
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
 * A worker host: a BullMQ worker on each spawn-queue shard, running each job's session under its
 * lease, at most `SLOTS` at once over all shards, publishing a heartbeat, and stopping its sessions on
 * shutdown.
 */

export class WorkerHost {
  readonly #config: WorkerConfig;
  readonly #logger: Logger;
  readonly #coordinatorRedis: RedisClient;
  /** The checks of the Redis behind `#coordinatorRedis`, at start and after each reconnect. */
  readonly #redisSetup: RedisSetup;
  readonly #coordinator: Coordinator;
  readonly #options: WorkerHostOptions;
  /** Set by {@link WorkerHost.start}, with the launcher and the sessions' cgroups. */
  #containment: PlannedContainment | undefined;
  #launcher: SessionLauncher | undefined;
  #cgroups: CgroupLayout | undefined;
  readonly #shutdown = new AbortController();
  readonly #startedAt = Date.now();
  readonly #heartbeatMs: number;
  readonly #stalledIntervalMs: number;
  #workers: Worker[] = [];
  #queueRedis: RedisClient | undefined;
  /** The host's own channel: stops and lifetime changes reach its sessions without waiting for a renewal. */
  #channel: HostChannel | undefined;
  /** The host lease, and until when it holds. */
  readonly #lease: HostLease;
  /** The heartbeat, and the sessions it batches; set by {@link WorkerHost.start}. */
  #heartbeat: Heartbeat | undefined;
  #busy = 0;
  /** The sessions this host started, each followed to its end (the spawn job ends at the start). */
  readonly #sessions = new Set<Promise<void>>();
  #draining: Promise<void> | undefined;
  #drainedResolve: (() => void) | undefined;
  readonly #drained = new Promise<void>((resolve) => (this.#drainedResolve = resolve));

  constructor(options: WorkerHostOptions) {
    this.#options = options;
    this.#config = options.config;
    this.#logger = options.logger.child({ workerId: options.config.workerId });
    this.#heartbeatMs = Math.max(1, Math.min(options.heartbeatMs ?? 2000, Math.floor(options.config.leaseMs / 3)));
    this.#lease = new HostLease(options.config.workerId, options.config.leaseMs, this.#logger);
    // Every running session listens for the shutdown: as many listeners as slots is expected.
    setMaxListeners(this.#config.slots + 10, this.#shutdown.signal);
    this.#stalledIntervalMs = options.stalledIntervalMs ?? 10_000;
    // Connected by start(): a constructor builds, start() acts.
    this.#coordinatorRedis = createRedis(this.#config, 'requests', {
      logger: this.#logger,
      name: `cq-worker:${this.#config.workerId}`,
      lazyConnect: true,
    });
    this.#redisSetup = new RedisSetup({
      client: this.#coordinatorRedis,
      keyPrefix: this.#config.keyPrefix,
      accept: this.#config.redisAcceptRisks,
      logger: this.#logger,
    });
    const replicaWait = replicaWaitOf(this.#config, this.#logger);
    this.#coordinator = new Coordinator({
      redis: this.#coordinatorRedis,
      keyPrefix: this.#config.keyPrefix,
      timeoutMs: REQUEST_TIMEOUT_MS,
      ...(replicaWait === undefined ? {} : { replicaWait }),
    });
  }

  /** Sessions running now. */
  get busy(): number {
    return this.#busy;
  }

  /**
   * Prepares the sessions' containment (probes it unless given, and makes the caps' cgroups), then starts
   * taking spawn jobs and publishing the heartbeat. Throws a {@link ConfigError} where the containment
   * asked for cannot be had (a cap that cannot be enforced here), and when the API on this `KEY_PREFIX`
   * runs with another `SPAWN_QUEUE_SHARDS`: this host would wait on queues that get no jobs, and the
   * sessions would end as lost; and when Redis refuses the credentials of `REDIS_URL` or is set up to lose
   * writes that `REDIS_ACCEPT_RISKS` does not accept (see {@link RedisSetup}).
   */
  async start(): Promise<void> {
    const containment = (this.#containment ??= probeContainment(containmentRequest(this.#config)));
    pruneSessionDirs(this.#config.sessionsDir);
    this.#cgroups = prepareCgroups({
      memoryMb: this.#config.sessionMemoryMb,
      pidsMax: this.#config.sessionPidsMax,
      cpus: this.#config.sessionCpus,
    });
    const launcher = (this.#launcher =
      this.#options.launcher ??
      new RuntimeLauncher({
        command: this.#config.sessionCommand,
        logger: this.#logger,
        containment: containment.plan,
        cgroups: this.#cgroups,
        outputRate: this.#config.logRateBytes,
      }));
    const runner = new SessionRunner({
      coordinator: this.#coordinator,
      launcher,
      workerId: this.#config.workerId,
      pool: this.#config.pool,
      leaseMs: this.#config.leaseMs,
      graceMs: this.#config.sessionGraceMs,
      output: { keepLines: this.#config.logKeepLines, retentionMs: this.#config.logRetentionMs },
      logger: this.#logger,
    });
    this.#channel = new HostChannel(this.#coordinatorRedis, this.#coordinator.keys, this.#config.workerId, {
      onNudge: (userId) => runner.nudge(userId),
      onSubscribed: () => runner.renewAll(),
      onError: (err) => this.#logger.debug({ err }, "the host's channel is down; reopening it"),
    });
    this.#channel.open();
    // A first connection that fails is retried like any lost one (the retry strategy); start goes on
    // (the Redis is checked when it comes), unless Redis refuses the credentials or is set up to lose
    // writes: a ConfigError, one line.
    if (this.#coordinatorRedis.status === 'wait') this.#coordinatorRedis.connect().catch(() => {});
    await this.#redisSetup.start();
    const apiShards = await this.#coordinatorRedis.get(this.#coordinator.keys.queueShards()).catch(() => null);
    if (apiShards !== null && Number(apiShards) !== this.#config.spawnQueueShards) {
      throw new ConfigError(
        `SPAWN_QUEUE_SHARDS is ${this.#config.spawnQueueShards} here but the API on KEY_PREFIX ` +
          `"${this.#config.keyPrefix}" uses ${apiShards}: set the same value on every API instance and worker host`,
      );
    }
    await launcher.open?.();
    const connection = createRedis(this.#config, 'blocking', {
      logger: this.#logger,
      name: `cq-worker-queue:${this.#config.workerId}`,
    });
    this.#queueRedis = connection;
    // One worker per shard, each allowed every slot. A job is active only while its session is being
    // claimed; #process keeps the sessions running here within SLOTS, pausing every shard's worker while
    // they fill them (a paused worker runs no stalled-job check: the hosts with free slots do).
    this.#workers = spawnConsumers({
      connection,
      keyPrefix: this.#config.keyPrefix,
      shards: this.#config.spawnQueueShards,
      pool: this.#config.pool,
      concurrency: this.#config.slots,
      stalledIntervalMs: this.#stalledIntervalMs,
      run: (payload, job, token) => this.#process(runner, payload, job, token),
      log: this.#logger,
    });
    const heartbeat = (this.#heartbeat = new Heartbeat({
      coordinator: this.#coordinator,
      runner,
      lease: this.#lease,
      logger: this.#logger,
      heartbeatMs: this.#heartbeatMs,
      leaseMs: this.#config.leaseMs,
      describe: () => ({
        workerId: this.#config.workerId,
        slots: this.#config.slots,
        busy: this.#busy,
        startedAt: this.#startedAt,
        containment: containment.plan.mode,
        isolation: this.#options.isolation ?? isolationOf(containment.plan, this.#config.sessionCpus),
        pool: this.#config.pool,
      }),
      onDrainAsked: () => void this.drain('asked through the API'),
    }));
    heartbeat.start();
    logContainment(this.#logger, containment, this.#config, this.#cgroups);
    this.#logger.info(
      { slots: this.#config.slots, leaseMs: this.#config.leaseMs, pool: this.#config.pool },
      'worker host started',
    );
  }

  /**
   * Drains: takes no new sessions (a job fetched meanwhile is handed back for another host), lets the
   * running ones end on their own, and resolves once they have (their ends recorded). Then the host
   * can stop with nothing left to stop. Started by `POST /v1/hosts/{workerId}/drain` (heard with the
   * next heartbeat) or by SIGTSTP; calling it again returns the same promise.
   */
  drain(reason: string): Promise<void> {
    this.#draining ??= (async () => {
      this.#logger.info(
        { reason, busy: this.#busy },
        'draining: taking no new sessions; exiting once the running ones have ended',
      );
      this.#heartbeat?.soon();
      await Promise.all(this.#workers.map((worker) => worker.close()));
      await this.#sessionsEnded();
      this.#drainedResolve?.();
    })();
    return this.#draining;
  }

  /** Resolves once the host has drained (see {@link WorkerHost.drain}), however the drain was asked for. */
  get drained(): Promise<void> {
    return this.#drained;
  }

  /**
   * One spawn job: the handoff. The job ends (completed) as soon as its session is claimed and running
   * under its lease, or as soon as it ended without running (stale, timed out, another pool); the
   * session then runs on here under its lease alone, with no BullMQ lock to keep (see
   * docs/scaling.md, "Keeping sessions running"). A host that dies before the claim leaves the job
   * active: BullMQ's stalled-job check gives it to another host.
   */
  async #process(runner: SessionRunner, payload: SpawnJob, job: Job, token: string | undefined): Promise<Handoff> {
    if (this.#shutdown.signal.aborted || this.#draining !== undefined) {
      this.#logger.debug({ jobId: job.id, queue: job.queueName }, 'shutting down or draining; job handed back');
      return handBack(job, token, this.#logger);
    }
    if (this.#busy >= this.#config.slots) {
      // Another job took the last slot first: hand the job back for any host to take (no attempt is
      // counted), and fetch nothing more until a slot frees.
      this.#pauseFetching(true);
      this.#logger.debug({ jobId: job.id, queue: job.queueName }, 'all slots busy; job handed back');
      return handBack(job, token, this.#logger);
    }
    // The heartbeat on the tick after the claim publishes the slot in use, takes over the session's hold
    // and registers it under the host lease (one heartbeat for all the sessions started in a tick); a
    // session not started gives its hold back with the heartbeat after its end.
    this.#busy++;
    this.#heartbeat?.claimed(payload.sessionId);
    if (this.#busy >= this.#config.slots) this.#pauseFetching(true);
    let started: (() => void) | undefined;
    const running = new Promise<'started'>((resolve) => (started = () => resolve('started')));
    const session = runner
      .run(payload, this.#shutdown.signal, () => {
        started?.();
        this.#heartbeat?.started(payload.sessionId, payload.userId);
      })
      .finally(() => {
        this.#busy--;
        this.#heartbeat?.ended(payload.sessionId);
        if (!this.#shutdown.signal.aborted && this.#draining === undefined) {
          this.#pauseFetching(false);
          this.#heartbeat?.soon();
        }
      });
    // Followed to its end, whatever the job's answer: the host waits for these when it drains or stops.
    const followed = session.then(
      () => undefined,
      (err: unknown) => this.#logger.error({ err, sessionId: payload.sessionId }, 'session run failed'),
    );
    this.#sessions.add(followed);
    void followed.finally(() => this.#sessions.delete(followed));
    const first = await Promise.race([running, session]);
    return first === 'started' ? { ran: true, running: true } : first;
  }

  /** Resolves once every session this host started has ended (and its end was recorded or given up). */
  async #sessionsEnded(): Promise<void> {
    while (this.#sessions.size > 0) await Promise.all([...this.#sessions]);
  }

  /** Stops (or resumes) every shard's worker fetching jobs while all slots are busy. */
  #pauseFetching(paused: boolean): void {
    for (const worker of this.#workers) {
      if (paused) void worker.pause(true);
      else if (worker.isPaused()) void worker.resume();
    }
  }

  /**
   * Stops cleanly: takes no more jobs, stops its sessions (they end as `stopped`), waits for their end
   * to be recorded and their leases released, withdraws its heartbeat, closes its connections.
   */
  async stop(): Promise<void> {
    this.#heartbeat?.stop();
    const workers = this.#workers;
    const closing = Promise.all([...workers.map((worker) => worker.close()), this.#sessionsEnded()]);
    this.#shutdown.abort();
    // Sessions end within the grace time and their end is recorded within a lease; with Redis
    // unreachable that cannot finish, so the wait is bounded and the host exits all the same.
    const bound = this.#config.sessionGraceMs + this.#config.leaseMs + 2000;
    const closed = await settleWithin(closing, bound);
    if (!closed) {
      this.#logger.warn({ waitedMs: bound }, 'could not finish cleanly (is Redis reachable?); closing anyway');
      await settleWithin(Promise.all(workers.map((worker) => worker.close(true))), 500);
      this.#queueRedis?.disconnect();
    } else {
      const ended = this.#heartbeat?.unreturned ?? [];
      await settleWithin(
        this.#coordinator.workers.withdraw(this.#config.workerId, ended, this.#config.pool, this.#lease.token),
        1000,
      );
    }
    this.#channel?.close();
    await this.#launcher?.close?.();
    this.#cgroups?.release();
    // The runtime removed each session's directory before it exited: what is left is the host's own.
    rmSync(hostDir(this.#config.sessionsDir), { recursive: true, force: true });
    await settleWithin(this.#coordinator.close(), 500);
    await closeRedis(this.#coordinatorRedis);
  }
}
