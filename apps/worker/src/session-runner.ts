import {
  UnavailableError,
  type Claim,
  type Coordinator,
  type EndReason,
  type LeaseLostError,
  type TerminalState,
} from '@cq/coordinator';
import { retryWhile } from '@cq/service-kit';
import type { SpawnJob } from '@cq/spawn-handoff';
import type { Logger } from 'pino';
import type { SessionExit, SessionLauncher } from './session-process.js';

/** Options of {@link SessionRunner}. */
export interface SessionRunnerOptions {
  coordinator: Coordinator;
  launcher: SessionLauncher;
  workerId: string;
  /** Lease on a running session, ms. */
  leaseMs: number;
  /** SIGTERM → SIGKILL grace, ms. */
  graceMs: number;
  /**
   * How long before its lease could run out in Redis a session is killed, ms: covers the time a
   * kill takes to land and the lag of a busy event loop. @defaultValue {@link leaseMarginMs}(leaseMs)
   */
  leaseMarginMs?: number;
  logger: Logger;
}

/** How one spawn job ended. */
export type RunOutcome =
  | { readonly ran: true; readonly state: TerminalState; readonly exitCode: number; readonly recorded: boolean }
  | { readonly ran: false; readonly reason: 'stale' | 'pending_timeout' | 'shutting_down' };

/** Time the lease may outlive the lifetime cap beyond the grace, to record the end, ms. */
const RECORD_MARGIN_MS = 2000;

/**
 * One extra renewal this long before a session's deadline, ms: renewals come only about once a second,
 * so without it a lifetime changed in the last second before the deadline could arrive too late. A
 * change up to about this long before the deadline (less a round trip) is honoured.
 */
export const DEADLINE_CHECK_MS = 300;

/**
 * The safety margin of a lease: a session is killed this long before its lease could run out in
 * Redis, by the host and by the session runtime each on its own clock. 10% of the lease, at least
 * 250 ms (LEASE_MS 15000 → 1500 ms; 3000 → 300 ms; 1000, the least allowed → 250 ms).
 */
export function leaseMarginMs(leaseMs: number): number {
  return Math.max(250, Math.ceil(leaseMs / 10));
}

/**
 * Runs one spawn job: claims the session (only the matching, still pending one), starts it, keeps its
 * lease alive, stops it when the deadline arrives, a stop is requested, the lease is lost or the host
 * shuts down, then records its terminal state and exit code.
 */
export class SessionRunner {
  readonly #options: SessionRunnerOptions;

  constructor(options: SessionRunnerOptions) {
    this.#options = options;
  }

  /** Runs the job's session to its end. `shutdown` aborts when the host is stopping. */
  async run(job: SpawnJob, shutdown: AbortSignal): Promise<RunOutcome> {
    const { coordinator, workerId, leaseMs, graceMs } = this.#options;
    const log = this.#options.logger.child({ userId: job.userId, sessionId: job.sessionId, fence: job.fence });
    if (shutdown.aborted) return { ran: false, reason: 'shutting_down' };

    const outcome = await coordinator.claims.claim(job, { workerId, leaseMs, graceMs: graceMs + RECORD_MARGIN_MS });
    if (!outcome.claimed) {
      if (outcome.reason === 'stale') {
        // A job that came back after its host died finds its session running under a dead lease:
        // end it as lost now rather than at the next sweep.
        const ended = await coordinator.sessions.sweepUser(job.userId).catch(() => false);
        log.info({ reason: outcome.reason, endedAsLost: ended }, 'spawn job is stale; nothing started');
      } else {
        log.warn({ reason: outcome.reason }, 'session waited too long for a worker; ended as lost');
      }
      return { ran: false, reason: outcome.reason };
    }
    return this.#runClaimed(outcome.claim, shutdown, log);
  }

  async #runClaimed(claim: Claim, shutdown: AbortSignal, log: Logger): Promise<RunOutcome> {
    const { coordinator, launcher, graceMs, leaseMs } = this.#options;
    let reason: TerminalState | undefined;
    const stop = (why: TerminalState, how: 'terminate' | 'kill', detail: string): void => {
      if (reason === undefined) {
        reason = why;
        log.info({ why, how }, detail);
      }
      if (how === 'kill') handle.kill();
      else handle.terminate();
    };

    // The keepalive first: the session starts knowing until when its lease holds, and learns of
    // each renewal that moves that instant, or the deadline (the API changed the session's lifetime).
    let deadline = claim.deadline;
    const keepalive = coordinator.claims.keepalive(claim, {
      marginMs: this.#options.leaseMarginMs ?? leaseMarginMs(leaseMs),
      // Called after a renewal, so after the launch below.
      onRenewed: (answer, sentAt) => {
        handle.leaseHolds(keepalive.holdsUntil);
        if (answer.deadline === deadline) return;
        deadline = answer.deadline;
        // Counted from when the renewal was sent, so the local instant is never later than Redis's.
        moveDeadline(sentAt + answer.lifetimeLeftMs);
        log.info({ deadline: new Date(deadline).toISOString() }, 'session deadline moved');
      },
      onStopRequested: () => stop('stopped', 'terminate', 'stop requested through the API'),
      onError: (err) => log.warn({ err: { message: (err as Error).message } }, 'lease renewal failed; retrying'),
    });
    const deadlineAt = claim.sentAt + claim.deadline - claim.startedAt;
    // Readiness announcements are recorded one after another, in the order the session made them.
    let announcing: Promise<unknown> = Promise.resolve();
    const onReady = (endpoint: string | undefined): void => {
      announcing = announcing.then(async () => {
        try {
          const marked = await retryWhile(UnavailableError, () => coordinator.claims.markReady(claim, endpoint), {
            initialDelayMs: 100,
            maxDelayMs: 1000,
            giveUpAfterMs: this.#options.leaseMs,
          });
          if (marked) log.info({ endpoint }, 'session ready');
        } catch (err) {
          log.warn({ err: { message: (err as Error).message } }, 'could not record that the session is ready');
        }
      });
    };
    const handle = launcher.launch({
      sessionEnv: {
        SESSION_ID: claim.sessionId,
        USER_ID: claim.userId,
        FENCE: String(claim.fence),
        DEADLINE: String(claim.deadline),
        SESSION_METADATA: JSON.stringify(claim.metadata),
        SESSION_NOTIFY_FD: '3',
      },
      graceMs,
      deadlineAt,
      holdsUntil: keepalive.holdsUntil,
      onOutput: (stream, line) => log.info({ stream, line }, 'session output'),
      onReady,
    });
    log.info({ deadline: new Date(claim.deadline).toISOString(), lifetimeMs: claim.lifetimeMs }, 'session started');

    const onLeaseLost = (): void => {
      const cause = keepalive.signal.reason as LeaseLostError;
      // Without a lease another host may start this user's next session: stop at once.
      if (cause.code === 'deadline_reached') stop('expired', 'kill', 'lease reached its hard deadline');
      else stop('lost', 'kill', `lease lost: ${cause.message}`);
    };
    keepalive.signal.addEventListener('abort', onLeaseLost, { once: true });
    if (keepalive.signal.aborted) onLeaseLost();
    let deadlineTimer: NodeJS.Timeout | undefined;
    let checkTimer: NodeJS.Timeout | undefined;
    const stopAt = (at: number): void => {
      clearTimeout(deadlineTimer);
      clearTimeout(checkTimer);
      deadlineTimer = setTimeout(
        () => stop('expired', 'terminate', 'lifetime cap reached'),
        Math.max(0, at - performance.now()),
      );
      checkTimer = setTimeout(() => keepalive.renewNow(), Math.max(0, at - DEADLINE_CHECK_MS - performance.now()));
    };
    // A session already told to stop keeps stopping; otherwise host and runtime both move to the new deadline.
    const moveDeadline = (at: number): void => {
      if (reason !== undefined) return;
      stopAt(at);
      handle.deadlineMoved(at);
    };
    stopAt(deadlineAt);
    const onShutdown = (): void => stop('stopped', 'terminate', 'host shutting down');
    shutdown.addEventListener('abort', onShutdown, { once: true });
    if (shutdown.aborted) onShutdown();

    const exit = await handle.exited;
    clearTimeout(deadlineTimer);
    clearTimeout(checkTimer);
    keepalive.stop();
    keepalive.signal.removeEventListener('abort', onLeaseLost);
    shutdown.removeEventListener('abort', onShutdown);

    if (reason === undefined && exit.cause !== undefined && exit.cause !== 'spawn_failed') {
      log.warn(
        { cause: exit.cause },
        exit.cause === 'deadline'
          ? 'the session runtime ended the session at its deadline'
          : 'the session was killed without its lease',
      );
    }
    const state: TerminalState = reason ?? stateOf(exit);
    const { exitCode } = exit;
    // Killed by its memory cap, not by an order of ours: failed, and the record says why.
    const outOfMemory = reason === undefined && exit.outOfMemory === true && state === 'failed';
    if (outOfMemory) log.warn({ exitCode }, 'session killed by its memory cap (SESSION_MEMORY_MB)');
    // What the session announced before it ended is recorded before its end (markReady is refused once
    // the session has ended): readers see ready, then the ending, as the session did them.
    await announcing;
    const recorded = await this.#record(claim, state, exitCode, outOfMemory ? 'out_of_memory' : undefined, log);
    log.info({ state, exitCode, recorded, ...(outOfMemory ? { reason: 'out_of_memory' } : {}) }, 'session ended');
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
      log.error(
        { err: { message: (err as Error).message } },
        'could not record the end; the sweep will end it as lost',
      );
      return false;
    }
  }
}

/** The terminal state of a session that ended without an order from this host. */
function stateOf(exit: SessionExit): TerminalState {
  switch (exit.cause) {
    case 'lease':
    case 'runtime_lost':
      return 'lost';
    case 'deadline':
      return 'expired';
    default:
      return exit.exitCode === 0 ? 'completed' : 'failed';
  }
}
