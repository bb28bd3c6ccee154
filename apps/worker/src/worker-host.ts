import { setMaxListeners } from 'node:events';
import { rmSync } from 'node:fs';
import { Coordinator, HostChannel, closeRedis, type Isolation, type RedisClient } from '@cq/coordinator';
import { REQUEST_TIMEOUT_MS, RedisSetup, createRedis, replicaWaitOf, settleWithin } from '@cq/service-kit';
import type { Logger } from 'pino';
import type { WorkerConfig } from './config.js';
import type { CgroupLayout } from './cgroups.js';
import { probeContainment, type PlannedContainment } from './containment.js';
import { hostDir } from './isolation.js';
import { Heartbeat, heartbeatPeriodMs } from './liveness/heartbeat.js';
import { HostLease } from './liveness/host-lease.js';
import { startHostProxy, type HostProxy } from './proxy/index.js';
import type { SessionLauncher } from './session-process.js';
import { SessionRunner } from './session-runner.js';
import { containmentRequest, isolationOf, logContainment, prepareSessions } from './session-setup.js';
import { SpawnJobs, checkShards } from './spawn-jobs.js';

export type { Handoff } from './spawn-jobs.js';

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
  /** How it keeps sessions apart, as its heartbeat tells. @defaultValue `{network: 'host', filesystem: 'shared', cpus: null}` */
  isolation?: Isolation;
  /**
   * How often the host publishes its heartbeat (which renews its host lease), ms; the record lives three
   * times as long. Never more than a third of `LEASE_MS`. @defaultValue 2000
   */
  heartbeatMs?: number;
  /** How often BullMQ looks for jobs whose host died (stalled), ms. @defaultValue 10000 */
  stalledIntervalMs?: number;
}

/**
 * A worker host: a BullMQ worker on each spawn-queue shard, running each job's session under its
 * lease, at most `SLOTS` at once over all shards, publishing a heartbeat, and stopping its sessions on
 * shutdown. It is the composition root: what keeps sessions alive is in liveness/, how they are
 * taken from the queue in spawn-jobs.ts, how they run in session-runner.ts and session-process.ts.
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
  #jobs: SpawnJobs | undefined;
  #queueRedis: RedisClient | undefined;
  /** The host's own channel: stops and lifetime changes reach its sessions without waiting for a renewal. */
  #channel: HostChannel | undefined;
  /** The host lease, and until when it holds. */
  readonly #lease: HostLease;
  /** The heartbeat, and the sessions it batches; set by {@link WorkerHost.start}. */
  #heartbeat: Heartbeat | undefined;
  /** The session proxy's listener (with PROXY_SECRET). */
  #proxy: HostProxy | undefined;
  #draining: Promise<void> | undefined;
  #drainedResolve: (() => void) | undefined;
  readonly #drained = new Promise<void>((resolve) => (this.#drainedResolve = resolve));

  constructor(options: WorkerHostOptions) {
    this.#options = options;
    this.#config = options.config;
    this.#logger = options.logger.child({ workerId: options.config.workerId });
    this.#heartbeatMs = heartbeatPeriodMs(options.heartbeatMs, options.config.leaseMs);
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
    return this.#jobs?.busy ?? 0;
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
    const { launcher, cgroups } = prepareSessions(this.#config, containment, this.#logger, this.#options.launcher);
    this.#launcher = launcher;
    this.#cgroups = cgroups;
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
    await checkShards(this.#coordinatorRedis, this.#coordinator.keys, this.#config);
    await launcher.open?.();
    this.#proxy = await startHostProxy(this.#config, launcher, containment.plan, this.#logger);
    const connection = createRedis(this.#config, 'blocking', {
      logger: this.#logger,
      name: `cq-worker-queue:${this.#config.workerId}`,
    });
    this.#queueRedis = connection;
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
        busy: this.busy,
        startedAt: this.#startedAt,
        containment: containment.plan.mode,
        isolation: this.#options.isolation ?? isolationOf(containment.plan, this.#config.sessionCpus),
        pool: this.#config.pool,
        ...(this.#proxy === undefined ? {} : { proxy: this.#proxy.advertise }),
      }),
      onDrainAsked: () => void this.drain('asked through the API'),
    }));
    const jobs = (this.#jobs = new SpawnJobs({
      config: this.#config,
      runner,
      heartbeat,
      logger: this.#logger,
      shutdown: this.#shutdown.signal,
      stalledIntervalMs: this.#stalledIntervalMs,
    }));
    jobs.start(connection);
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
        { reason, busy: this.busy },
        'draining: taking no new sessions; exiting once the running ones have ended',
      );
      this.#heartbeat?.soon();
      await this.#jobs?.refuse();
      await this.#jobs?.ended();
      this.#drainedResolve?.();
    })();
    return this.#draining;
  }

  /** Resolves once the host has drained (see {@link WorkerHost.drain}), however the drain was asked for. */
  get drained(): Promise<void> {
    return this.#drained;
  }

  /**
   * Stops cleanly: takes no more jobs, stops its sessions (they end as `stopped`), waits for their end
   * to be recorded and their leases released, withdraws its heartbeat, closes its connections.
   */
  async stop(): Promise<void> {
    this.#heartbeat?.stop();
    const jobs = this.#jobs;
    const closing = Promise.all([jobs?.close(), jobs?.ended()]);
    this.#shutdown.abort();
    // Sessions end within the grace time and their end is recorded within a lease; with Redis
    // unreachable that cannot finish, so the wait is bounded and the host exits all the same.
    const bound = this.#config.sessionGraceMs + this.#config.leaseMs + 2000;
    const closed = await settleWithin(closing, bound);
    if (!closed) {
      this.#logger.warn({ waitedMs: bound }, 'could not finish cleanly (is Redis reachable?); closing anyway');
      await settleWithin(jobs?.close(true) ?? Promise.resolve(), 500);
      this.#queueRedis?.disconnect();
    } else {
      const ended = this.#heartbeat?.unreturned ?? [];
      await settleWithin(
        this.#coordinator.workers.withdraw(this.#config.workerId, ended, this.#config.pool, this.#lease.token),
        1000,
      );
    }
    this.#channel?.close();
    await this.#proxy?.close();
    await this.#launcher?.close?.();
    this.#cgroups?.release();
    // The runtime removed each session's directory before it exited: what is left is the host's own.
    rmSync(hostDir(this.#config.sessionsDir), { recursive: true, force: true });
    await settleWithin(this.#coordinator.close(), 500);
    await closeRedis(this.#coordinatorRedis);
  }
}
