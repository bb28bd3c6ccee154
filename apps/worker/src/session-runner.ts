import { UnavailableError, type Claim, type Coordinator, type LeaseLostError, type TerminalState } from '@cq/coordinator';
import type { SpawnJob } from '@cq/service-kit';
import type { Logger } from 'pino';
import type { SessionLauncher } from './session-process.js';

/** Options of {@link SessionRunner}. */
export interface SessionRunnerOptions {
  coordinator: Coordinator;
  launcher: SessionLauncher;
  workerId: string;
  /** Lease on a running session, ms. */
  leaseMs: number;
  /** SIGTERM → SIGKILL grace, ms. */
  graceMs: number;
  logger: Logger;
}

/** How one spawn job ended. */
export type RunOutcome =
  | { readonly ran: true; readonly state: TerminalState; readonly exitCode: number; readonly recorded: boolean }
  | { readonly ran: false; readonly reason: 'stale' | 'pending_timeout' | 'shutting_down' };

/** Time the lease may outlive the lifetime cap beyond the grace, to record the end, ms. */
const RECORD_MARGIN_MS = 2000;

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

    const outcome = await coordinator.sessions.claim(job, { workerId, leaseMs, graceMs: graceMs + RECORD_MARGIN_MS });
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
    const { coordinator, launcher, graceMs } = this.#options;
    const elapsed = performance.now() - claim.sentAt;
    const deadlineInMs = Math.max(0, claim.deadline - claim.startedAt - elapsed);
    const handle = launcher.launch({
      sessionEnv: {
        SESSION_ID: claim.sessionId,
        USER_ID: claim.userId,
        FENCE: String(claim.fence),
        DEADLINE: String(claim.deadline),
        SESSION_METADATA: JSON.stringify(claim.metadata),
      },
      graceMs,
      deadlineInMs,
      onOutput: (stream, line) => log.info({ stream, line }, 'session output'),
    });
    log.info({ deadline: new Date(claim.deadline).toISOString(), lifetimeMs: claim.lifetimeMs }, 'session started');

    let reason: TerminalState | undefined;
    const stop = (why: TerminalState, how: 'terminate' | 'kill', detail: string): void => {
      if (reason === undefined) {
        reason = why;
        log.info({ why, how }, detail);
      }
      if (how === 'kill') handle.kill();
      else handle.terminate();
    };

    const keepalive = coordinator.sessions.keepalive(claim, {
      onStopRequested: () => stop('stopped', 'terminate', 'stop requested through the API'),
      onError: (err) => log.warn({ err: { message: (err as Error).message } }, 'lease renewal failed; retrying'),
    });
    const onLeaseLost = (): void => {
      const cause = keepalive.signal.reason as LeaseLostError;
      // Without a lease another host may start this user's next session: stop at once.
      if (cause.code === 'deadline_reached') stop('expired', 'kill', 'lease reached its hard deadline');
      else stop('lost', 'kill', `lease lost: ${cause.message}`);
    };
    keepalive.signal.addEventListener('abort', onLeaseLost, { once: true });
    const deadlineTimer = setTimeout(() => stop('expired', 'terminate', 'lifetime cap reached'), deadlineInMs);
    const onShutdown = (): void => stop('stopped', 'terminate', 'host shutting down');
    shutdown.addEventListener('abort', onShutdown, { once: true });
    if (shutdown.aborted) onShutdown();

    const exitCode = await handle.exited;
    clearTimeout(deadlineTimer);
    keepalive.stop();
    keepalive.signal.removeEventListener('abort', onLeaseLost);
    shutdown.removeEventListener('abort', onShutdown);

    const state: TerminalState = reason ?? (exitCode === 0 ? 'completed' : 'failed');
    const recorded = await this.#record(claim, state, exitCode, log);
    log.info({ state, exitCode, recorded }, 'session ended');
    return { ran: true, state, exitCode, recorded };
  }

  /** Records the end, retrying while Redis is unreachable, for at most one lease. */
  async #record(claim: Claim, state: TerminalState, exitCode: number, log: Logger): Promise<boolean> {
    const giveUpAt = performance.now() + this.#options.leaseMs;
    for (let delay = 100; ; delay = Math.min(delay * 2, 2000)) {
      try {
        return await this.#options.coordinator.sessions.finish(claim, state, exitCode);
      } catch (err) {
        if (!(err instanceof UnavailableError) || performance.now() + delay > giveUpAt) {
          log.error({ err: { message: (err as Error).message } }, 'could not record the end; the sweep will end it as lost');
          return false;
        }
        await new Promise((resolve) => setTimeout(resolve, delay));
      }
    }
  }
}
