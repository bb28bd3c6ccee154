import { UnavailableError, type Claim, type Coordinator, type EndReason, type TerminalState } from '@cq/coordinator';
import { retryWhile } from '@cq/service-kit';
import type { SpawnJob } from '@cq/spawn-handoff';
import type { Logger } from 'pino';
import { SessionCover } from './liveness/session-cover.js';
import { SessionLifecycle } from './session-lifecycle.js';
import type { OutputKeepingConfig } from './output-sink.js';
import type { SessionLauncher } from './session-process.js';

/** Options of {@link SessionRunner}. */
export interface SessionRunnerOptions {
  coordinator: Coordinator;
  launcher: SessionLauncher;
  workerId: string;
  /** The pool the host serves: a session of another pool is not claimed. @defaultValue `'default'` */
  pool?: string;
  /** Lease on a running session, ms. */
  leaseMs: number;
  /** SIGTERM → SIGKILL grace, ms. */
  graceMs: number;
  /**
   * How long before its lease could run out in Redis a session is killed, ms: covers the time a
   * kill takes to land and the lag of a busy event loop. @defaultValue {@link leaseMarginMs}(leaseMs)
   */
  leaseMarginMs?: number;
  /** How sessions' output is kept in Redis. @defaultValue 10,000 lines, for a day after the end */
  output?: OutputKeepingConfig;
  /**
   * A session's own lease once its host holds it under the host lease, ms (see
   * {@link SessionRunner.hold}). @defaultValue {@link hostedLeaseMs}(leaseMs)
   */
  hostedLeaseMs?: number;
  logger: Logger;
}

/** How one spawn job ended. */
export type RunOutcome =
  | { readonly ran: true; readonly state: TerminalState; readonly exitCode: number; readonly recorded: boolean }
  | { readonly ran: false; readonly reason: 'stale' | 'pending_timeout' | 'wrong_pool' | 'shutting_down' };

/**
 * Time the lease may outlive the lifetime cap beyond the grace, to record the end, ms: on top of the
 * lease's safety margin, which host and runtime take off the hard deadline too (without it, a margin
 * over 2 s, LEASE_MS 20000 and more, would kill a session before its grace, or its deadline, ran out).
 */
const RECORD_MARGIN_MS = 2000;

/**
 * The safety margin of a lease: a session is killed this long before its lease could run out in
 * Redis, by the host and by the session runtime each on its own clock. 10% of the lease, at least
 * 250 ms (LEASE_MS 15000 → 1500 ms; 3000 → 300 ms; 1000, the least allowed → 250 ms).
 */
export function leaseMarginMs(leaseMs: number): number {
  return Math.max(250, Math.ceil(leaseMs / 10));
}

/**
 * A session's own lease while its host holds it under its host lease: 20 leases (5 minutes with the
 * default LEASE_MS), renewed every third of that. It only bounds how long a session stays live in Redis
 * should every other way of ending it fail; the host lease and the probes keep it within LEASE_MS.
 */
export function hostedLeaseMs(leaseMs: number): number {
  return leaseMs * 20;
}

/**
 * Runs one spawn job: claims the session (only the matching, still pending one), starts it, keeps its
 * lease alive, stops it when the deadline arrives, a stop is requested, the lease is lost or the host
 * shuts down, then records its terminal state and exit code.
 */
export class SessionRunner {
  readonly #options: SessionRunnerOptions;
  /** The sessions running here, by user (a user's next session may start while the last is recorded). */
  readonly #live = new Map<string, Set<SessionLifecycle>>();
  /**
   * Users whose session is being claimed here, and whether a nudge came for them meanwhile (a stop right
   * after the claim): the session is renewed as soon as it starts, rather than at its first renewal.
   */
  readonly #claiming = new Map<string, boolean>();
  /** The covers of the sessions running here, by session id. */
  readonly #covers = new Map<string, { readonly cover: SessionCover; readonly userId: string }>();
  /** The sessions held under a host lease, with its token. */
  readonly #held = new Map<
    SessionCover,
    { readonly sessionId: string; readonly userId: string; readonly token: string }
  >();

  constructor(options: SessionRunnerOptions) {
    this.#options = options;
  }

  /**
   * Runs the job's session to its end. `shutdown` aborts when the host is stopping; `onStarted` is
   * called once the session is claimed and its lease is being kept (not called when it is not claimed).
   */
  async run(job: SpawnJob, shutdown: AbortSignal, onStarted?: () => void): Promise<RunOutcome> {
    const { coordinator, workerId, leaseMs, graceMs } = this.#options;
    const log = this.#options.logger.child({ userId: job.userId, sessionId: job.sessionId, fence: job.fence });
    if (shutdown.aborted) return { ran: false, reason: 'shutting_down' };

    this.#claiming.set(job.userId, false);
    let outcome: Awaited<ReturnType<Coordinator['claims']['claim']>>;
    try {
      outcome = await coordinator.claims.claim(job, {
        workerId,
        leaseMs,
        graceMs: graceMs + (this.#options.leaseMarginMs ?? leaseMarginMs(leaseMs)) + RECORD_MARGIN_MS,
        pool: this.#options.pool ?? 'default',
      });
    } catch (err) {
      this.#claiming.delete(job.userId);
      throw err;
    }
    const nudged = this.#claiming.get(job.userId) === true;
    this.#claiming.delete(job.userId);
    if (!outcome.claimed) {
      if (outcome.reason === 'wrong_pool') {
        log.error(
          { sessionPool: outcome.pool, hostPool: this.#options.pool ?? 'default' },
          "a spawn job of another pool reached this host's queue; not started (do API and hosts agree on KEY_PREFIX?)",
        );
      } else if (outcome.reason === 'stale') {
        // A job that came back after its host died finds its session running under a dead lease:
        // end it as lost now rather than at the next sweep.
        const ended = await coordinator.sessions.sweepUser(job.userId).catch(() => false);
        log.info({ reason: outcome.reason, endedAsLost: ended }, 'spawn job is stale; nothing started');
      } else {
        log.warn({ reason: outcome.reason }, 'session waited too long for a worker; ended as lost');
      }
      return { ran: false, reason: outcome.reason };
    }
    return this.#runClaimed(outcome.claim, shutdown, log, nudged, onStarted);
  }

  /**
   * Something changed for the user's session (a stop asked for, a lifetime moved: the host's channel
   * says so): renews it now, to learn what without waiting for its next renewal.
   */
  nudge(userId: string): void {
    if (this.#claiming.has(userId)) this.#claiming.set(userId, true);
    for (const lifecycle of this.#live.get(userId) ?? []) lifecycle.renewNow();
  }

  /** Renews every session now (nudges may have been missed while the host's channel was down). */
  renewAll(): void {
    for (const lifecycles of this.#live.values()) for (const lifecycle of lifecycles) lifecycle.renewNow();
  }

  /**
   * The host registered these sessions under its host lease, which holds until `until()`: each is held
   * under it from its next renewal (see {@link SessionCover}).
   */
  hold(sessionIds: readonly string[], token: string, until: () => number): void {
    for (const sessionId of sessionIds) {
      const running = this.#covers.get(sessionId);
      if (running === undefined || this.#held.has(running.cover)) continue;
      running.cover.hold(until);
      if (running.cover.held) this.#held.set(running.cover, { sessionId, userId: running.userId, token });
    }
  }

  /** The sessions held under a host lease, with the lease's token. */
  get held(): { sessionId: string; userId: string; token: string }[] {
    return [...this.#held.values()];
  }

  /** A host lease moved (renewed, or lost): every held session's instant moves with it. */
  covered(): void {
    for (const cover of this.#held.keys()) cover.moved();
  }

  /**
   * Asks each Redis master that keeps held sessions which process it runs (one `probeSlot` per master,
   * through one of its sessions' slots), and moves those sessions' instants with the answer; a session
   * whose process was replaced is renewed at once instead. A probe that fails moves nothing of its own;
   * every held session's instant is moved once at the end ({@link SessionRunner.covered}), for the host
   * lease's move as well. Answers whether every master answered.
   */
  async probe(): Promise<boolean> {
    const { coordinator } = this.#options;
    const groups = new Map<string, { userId: string; covers: SessionCover[] }>();
    for (const [cover, { userId }] of this.#held) {
      if (cover.keptBy === undefined) continue;
      const master = coordinator.claims.masterOf(userId);
      const group = groups.get(master);
      if (group === undefined) groups.set(master, { userId, covers: [cover] });
      else group.covers.push(cover);
    }
    const answers = await Promise.all(
      [...groups.values()].map(async ({ userId, covers }) => {
        const sentAt = performance.now();
        const run = await coordinator.claims.probe(userId).catch(() => undefined);
        if (run === undefined) return false;
        for (const cover of covers) cover.heard(run, sentAt);
        return true;
      }),
    );
    // One move of every held session's instant for the whole probe (and the heartbeat before it).
    this.covered();
    return answers.every(Boolean);
  }

  async #runClaimed(
    claim: Claim,
    shutdown: AbortSignal,
    log: Logger,
    nudged: boolean,
    onStarted: (() => void) | undefined,
  ): Promise<RunOutcome> {
    const { coordinator, launcher, graceMs, leaseMs } = this.#options;
    const cover = new SessionCover(leaseMs);
    const lifecycle = new SessionLifecycle(claim, {
      cover,
      coordinator,
      launcher,
      graceMs,
      leaseMs,
      leaseMarginMs: this.#options.leaseMarginMs ?? leaseMarginMs(leaseMs),
      hostedLeaseMs: this.#options.hostedLeaseMs ?? hostedLeaseMs(leaseMs),
      output: this.#options.output ?? { keepLines: 10_000, retentionMs: 86_400_000 },
      log,
    });
    const live = this.#live.get(claim.userId) ?? new Set<SessionLifecycle>();
    this.#live.set(claim.userId, live.add(lifecycle));
    this.#covers.set(claim.sessionId, { cover, userId: claim.userId });
    let ended: Awaited<ReturnType<SessionLifecycle['run']>>;
    try {
      lifecycle.start();
      if (nudged) lifecycle.renewNow();
      onStarted?.();
      ended = await lifecycle.run(shutdown);
    } finally {
      this.#covers.delete(claim.sessionId);
      this.#held.delete(cover);
      live.delete(lifecycle);
      if (live.size === 0 && this.#live.get(claim.userId) === live) this.#live.delete(claim.userId);
    }
    const { state, exitCode, reason } = ended;
    const recorded = await this.#record(claim, state, exitCode, reason, log);
    log.info({ state, exitCode, recorded, ...(reason === undefined ? {} : { reason }) }, 'session ended');
    return { ran: true, state, exitCode, recorded };
  }

  /** Records the end, retrying while Redis is unreachable (100 ms doubling to 2 s), for at most one lease. */
  async #record(
    claim: Claim,
    state: TerminalState,
    exitCode: number,
    reason: EndReason | undefined,
    log: Logger,
  ): Promise<boolean> {
    const finish = (): Promise<boolean> => this.#options.coordinator.claims.finish(claim, state, exitCode, reason);
    try {
      return await retryWhile(UnavailableError, finish, {
        initialDelayMs: 100,
        maxDelayMs: 2000,
        giveUpAfterMs: this.#options.leaseMs,
      });
    } catch (err) {
      log.error({ err }, 'could not record the end; the sweep will end it as lost');
      return false;
    }
  }
}
