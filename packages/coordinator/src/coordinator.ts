import type { Context } from './context.js';
import { Keys } from './keys.js';
import { readIndex, type IndexSnapshot } from './live-index.js';
import { Claims, LeaseManager } from './liveness/index.js';
import {
  fixedWindowLimiter,
  gcraLimiter,
  slidingWindowLimiter,
  type GcraOptions,
  type RateLimiter,
  type WindowOptions,
} from './limiters/limiters.js';
import { resolvePolicy, type Policy } from './options.js';
import type { RedisClient } from './redis-errors.js';
import type { ReplicaWait } from './replica-wait-pool.js';
import { Scripts } from './script-runner.js';
import { SessionStore } from './sessions.js';
import { OutputFeed, OutputStore, type OutputFeedOptions } from './output/index.js';
import { WebhookStore } from './webhooks/index.js';
import { EventFeed, type EventFeedOptions } from './events/index.js';
import { Sweeper, type SweeperOptions } from './sweeper.js';
import { TokenStore } from './tokens.js';
import { WorkerRegistry } from './workers.js';

/** Options of {@link Coordinator}. */
export interface CoordinatorOptions {
  /** An ioredis client (standalone or Cluster). The coordinator does not close it. */
  redis: RedisClient;
  /**
   * Prefix of every key (`KEY_PREFIX`); no braces.
   * @defaultValue 'cq'
   */
  keyPrefix?: string;
  /** The rules to enforce; each one defaults to {@link defaultPolicy}. */
  policy?: Partial<Policy>;
  /**
   * Folder of the Lua scripts.
   * @defaultValue the repository's `lua/`
   */
  scriptsDir?: string;
  /**
   * Wait for replicas to acknowledge every write (`WAIT`, in the same round trip).
   * @defaultValue no waiting (`REDIS_WAIT_REPLICAS=0`)
   */
  replicaWait?: ReplicaWait;
  /**
   * Longest wait for any one operation's answer, ms; then it fails as unavailable. Needed on Cluster,
   * whose client retries through a failover and may otherwise hold a call for seconds.
   * @defaultValue no limit beyond the client's own `commandTimeout`
   */
  timeoutMs?: number;
}

/**
 * The coordinator: one-time tokens, session admission and records, leases and rate limiters, all on
 * one Redis (or Redis Cluster) client. Every decision is one atomic script and one round trip.
 *
 * @example
 * ```ts
 * const coordinator = new Coordinator({ redis: new Redis(), policy: { spawnIntervalMs: 10_000 } });
 * const issued = await coordinator.tokens.issue('alice', { metadata: { durationMs: 5000 } });
 * if (issued.outcome === 'issued') {
 *   const admission = await coordinator.sessions.admit(issued.token);
 *   if (admission.outcome === 'admitted') console.log(admission.sessionId, admission.fence);
 * }
 * ```
 */
export class Coordinator {
  readonly policy: Readonly<Policy>;
  readonly keys: Keys;
  readonly tokens: TokenStore;
  readonly sessions: SessionStore;
  /** Session records, the worker host's half: claim, renew, keepalive, finish. */
  readonly claims: Claims;
  /** Sessions' output: appended by worker hosts, read by the API. */
  readonly output: OutputStore;
  /** Webhook endpoints and their delivery logs. */
  readonly webhooks: WebhookStore;
  readonly leases: LeaseManager;
  readonly workers: WorkerRegistry;
  readonly #context: Context;

  constructor(options: CoordinatorOptions) {
    this.policy = Object.freeze(resolvePolicy(options.policy));
    this.keys = new Keys(options.keyPrefix ?? 'cq');
    this.#context = {
      redis: options.redis,
      scripts: new Scripts(options.redis, options.scriptsDir, options.replicaWait, options.timeoutMs),
      keys: this.keys,
    };
    this.tokens = new TokenStore(this.#context, this.policy);
    this.sessions = new SessionStore(this.#context, this.policy);
    this.claims = new Claims(this.#context, this.policy);
    this.output = new OutputStore(this.#context);
    this.webhooks = new WebhookStore(this.#context);
    this.leases = new LeaseManager(this.#context);
    this.workers = new WorkerRegistry(this.#context);
  }

  /** The client the coordinator uses. */
  get redis(): RedisClient {
    return this.#context.redis;
  }

  /**
   * Closes the connections the coordinator opened itself (those for waited writes, see
   * {@link CoordinatorOptions.replicaWait}); the client it was given is the caller's to close.
   */
  close(): Promise<void> {
    return this.#context.scripts.close();
  }

  /** Loads every script into Redis's script cache, so even the first calls are single EVALSHAs. */
  preload(): Promise<void> {
    return this.#context.scripts.preload();
  }

  /** A GCRA rate limiter (as in redis-cell). */
  gcraLimiter(options: GcraOptions): RateLimiter {
    return gcraLimiter(this.#context, options);
  }

  /** A fixed-window rate limiter. */
  fixedWindowLimiter(options: WindowOptions): RateLimiter {
    return fixedWindowLimiter(this.#context, options);
  }

  /** A sliding-window-log rate limiter. */
  slidingWindowLimiter(options: WindowOptions): RateLimiter {
    return slidingWindowLimiter(this.#context, options);
  }

  /** Reads every slot's live-session index and recent endings (for dashboards): 2 × 16384 pipelined commands. */
  readIndex(options?: { endedPerSlot?: number }): Promise<IndexSnapshot> {
    return readIndex(this.#context, options);
  }

  /**
   * A feed of every session event, in one order, for the readers of this process: one subscription
   * and one read per batch however many readers it serves. Close it when done.
   */
  eventFeed(options?: EventFeedOptions): EventFeed {
    return new EventFeed(this.#context, this.sessions, options);
  }

  /**
   * A feed of sessions' output for the readers of this process: one subscription, and one read per
   * batch of new lines per followed session, however many readers follow it. Learns of sessions'
   * ends from `events`. Close it when done.
   */
  outputFeed(events: EventFeed, options?: OutputFeedOptions): OutputFeed {
    return new OutputFeed(this.#context, this.output, events, options);
  }

  /** A sweeper that ends overdue sessions as `lost`; call `start()` on it. */
  sweeper(options?: SweeperOptions): Sweeper {
    return new Sweeper(this.#context, this.sessions, this.workers, options);
  }
}
