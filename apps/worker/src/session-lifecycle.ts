import {
  UnavailableError,
  type Claim,
  type Coordinator,
  type EndReason,
  type Keepalive,
  type LeaseLostError,
  type SessionRenewAnswer,
  type StopReason,
  type TerminalState,
} from '@cq/coordinator';
import { retryWhile } from '@cq/service-kit';
import type { Logger } from 'pino';
import { OutputSink, type OutputKeepingConfig } from './output-sink.js';
import type { SessionCover } from './liveness/session-cover.js';
import type { SessionExit, SessionHandle, SessionLauncher } from './session-process.js';

/**
 * One extra renewal this long before a session's deadline, ms. A lifetime change reaches the host on its
 * channel at once, but a message lost with the host's subscription waits for the next renewal (every
 * third of the lease): this one picks such a change up in time. A change up to about this long before
 * the deadline (less a round trip) is honoured.
 */
export const DEADLINE_CHECK_MS = 300;

/**
 * The extra renewal at the instant a session would count as idle comes this long after it, ms: the
 * answer's instant is counted from when the renewal was sent, so on the local clock it is a little
 * early; the renewal then finds the session idle on Redis's clock (or answers a new instant).
 */
export const IDLE_CHECK_LATE_MS = 2;

/**
 * Where a claimed session is in its life. `running`: its process runs and nobody has told it to stop.
 * `stopping`: this host told it to stop (a stop asked through the API, its idle timeout, its lifetime
 * cap, its lease lost, the host shutting down), and `why` is the terminal state it will be recorded with
 * (with `reason`, when there is one: `idle`); a second order can make the stop harder (SIGKILL after
 * SIGTERM), never change `why`. `exited`: its process has exited.
 */
export type Phase =
  | { readonly name: 'running' }
  | { readonly name: 'stopping'; readonly why: TerminalState; readonly reason?: EndReason }
  | { readonly name: 'exited'; readonly exit: SessionExit };

/** How a claimed session ended. */
export interface SessionEnd {
  readonly state: TerminalState;
  readonly exitCode: number;
  readonly reason?: EndReason;
}

/** What a {@link SessionLifecycle} works with. */
export interface LifecycleDeps {
  readonly coordinator: Coordinator;
  readonly launcher: SessionLauncher;
  readonly graceMs: number;
  readonly leaseMs: number;
  /** How long before its lease could run out in Redis the session is killed, ms. */
  readonly leaseMarginMs: number;
  /**
   * The session's own lease while its host holds it under the host lease, ms: renewed every third of
   * it (the host lease and the probes of the Redis process keep it inside `leaseMs` meanwhile).
   */
  readonly hostedLeaseMs: number;
  /** How the session's output is kept in Redis. */
  readonly output: OutputKeepingConfig;
  /** Until when the session is vouched for beyond its own lease (its host lease, its Redis process). */
  readonly cover: SessionCover;
  readonly log: Logger;
}

/** What {@link SessionLifecycle.start} set going. */
interface Started {
  readonly keepalive: Keepalive<SessionRenewAnswer>;
  readonly output: OutputSink;
  readonly handle: SessionHandle;
}

/**
 * The life of one claimed session on this host: its lease kept alive from before its process starts,
 * its process launched, stopped on the first of its stop orders, its end worked out. The constructor
 * only builds: {@link start} sets it going (keepalive, output, process, timers), and {@link run}
 * resolves once the process has exited, with the terminal state to record; what the session announced
 * on its notify fd is recorded before that.
 */
export class SessionLifecycle {
  readonly #claim: Claim;
  readonly #deps: LifecycleDeps;
  readonly #log: Logger;
  #started: Started | undefined;
  #phase: Phase = { name: 'running' };
  /** The deadline as Redis has it, epoch ms (a renewal that carries another one moves it). */
  #deadline: number;
  #deadlineTimer: NodeJS.Timeout | undefined;
  #checkTimer: NodeJS.Timeout | undefined;
  /** The extra renewal at the instant the session would count as idle. */
  #idleTimer: NodeJS.Timeout | undefined;
  /** The session's latest activity this host saw (`performance.now()` instant); undefined: none yet. */
  #activeAt: number | undefined;
  /** Readiness announcements, recorded one after another in the order the session made them. */
  #announcing: Promise<unknown> = Promise.resolve();
  constructor(claim: Claim, deps: LifecycleDeps) {
    this.#claim = claim;
    this.#deps = deps;
    this.#log = deps.log;
    this.#deadline = claim.deadline;
  }

  /** Renews the session's lease now (a nudge: something changed), to learn what without waiting. */
  renewNow(): void {
    this.#started?.keepalive.renewNow();
  }

  /** The user whose session this is. */
  get userId(): string {
    return this.#claim.userId;
  }

  /** The session's id. */
  get sessionId(): string {
    return this.#claim.sessionId;
  }

  /** A renewal or a move of its cover: the session's kill is re-armed at the instant its lease now holds until. */
  #moved(): void {
    const started = this.#started;
    if (started === undefined || this.#phase.name === 'exited') return;
    started.handle.leaseHolds(started.keepalive.refresh());
  }

  /**
   * Starts the keepalive, the output and the session's process, and arms its deadline and idle
   * timers. Should the launch throw, what was started is stopped again and the error thrown.
   */
  start(): void {
    if (this.#started !== undefined) return;
    const claim = this.#claim;
    const deps = this.#deps;
    // The keepalive first: the session starts knowing until when its lease holds. Its callbacks come
    // with renewals, after start() has returned.
    const keepalive = deps.coordinator.claims.keepalive(claim, {
      marginMs: deps.leaseMarginMs,
      onRenewed: (answer, sentAt) => this.#renewed(answer, sentAt),
      renewWith: () => (deps.cover.held ? { leaseMs: deps.hostedLeaseMs, run: true } : {}),
      cover: () => deps.cover.until(),
      // Each renewal carries how long ago the session was last active (one number, whatever it wrote).
      activityAgeMs: () => (this.#activeAt === undefined ? undefined : performance.now() - this.#activeAt),
      onStopRequested: (reason: StopReason) =>
        reason === 'idle'
          ? this.#stop('stopped', 'terminate', 'idle timeout passed without activity', 'idle')
          : this.#stop('stopped', 'terminate', 'stop requested through the API'),
      onError: (err) => this.#log.warn({ err }, 'lease renewal failed; retrying'),
    });
    const output = new OutputSink({
      ...deps.output,
      store: deps.coordinator.output,
      userId: claim.userId,
      sessionId: claim.sessionId,
      endsBy: () => this.#deadline + claim.graceMs,
      log: this.#log,
    });
    let handle: SessionHandle;
    try {
      output.start();
      const deadlineAt = this.#armDeadline(claim.deadline, claim.sentAt + claim.deadline - claim.startedAt);
      handle = deps.launcher.launch({
        sessionEnv: {
          SESSION_ID: claim.sessionId,
          USER_ID: claim.userId,
          FENCE: String(claim.fence),
          DEADLINE: String(claim.deadline),
          SESSION_METADATA: JSON.stringify(claim.metadata),
          SESSION_LABELS: JSON.stringify(claim.labels),
          SESSION_POOL: claim.pool,
          SESSION_NOTIFY_FD: '3',
        },
        graceMs: deps.graceMs,
        deadlineAt,
        holdsUntil: keepalive.holdsUntil,
        onOutput: (stream, lines, droppedBytes) => {
          if (this.#log.isLevelEnabled('debug'))
            for (const line of lines) this.#log.debug({ stream, line }, 'session output');
          output.push(stream, lines, droppedBytes);
        },
        onReady: (endpoint, port) => this.#announce(endpoint, port),
        onActive: (at) => {
          if (this.#activeAt === undefined || at > this.#activeAt) this.#activeAt = at;
        },
      });
    } catch (err) {
      this.#clearTimers();
      keepalive.stop();
      void output.close();
      throw err;
    }
    this.#started = { keepalive, output, handle };
    deps.cover.attach({ moved: () => this.#moved(), renewNow: () => this.renewNow() });
    // The idle clock started with the claim (on Redis's clock, at startedAt): the first check then.
    if (claim.idleTimeoutMs > 0) this.#idleCheckAt(claim.sentAt + claim.idleTimeoutMs);
    this.#log.info(
      { deadline: new Date(claim.deadline).toISOString(), lifetimeMs: claim.lifetimeMs },
      'session started',
    );
  }

  /** Where the session is now. */
  get phase(): Phase {
    return this.#phase;
  }

  /** Runs the session, once {@link start}ed, to its end; `shutdown` aborts when the host is stopping. */
  async run(shutdown: AbortSignal): Promise<SessionEnd> {
    const started = this.#started;
    if (started === undefined) throw new Error('SessionLifecycle.run() before start()');
    const { keepalive, output, handle } = started;
    const onLeaseLost = (): void => {
      const cause = keepalive.signal.reason as LeaseLostError;
      // Without a lease another host may start this user's next session: stop at once.
      if (cause.code === 'deadline_reached') this.#stop('expired', 'kill', 'lease reached its hard deadline');
      else this.#stop('lost', 'kill', `lease lost: ${cause.message}`);
    };
    const onShutdown = (): void => this.#stop('stopped', 'terminate', 'host shutting down');
    keepalive.signal.addEventListener('abort', onLeaseLost, { once: true });
    if (keepalive.signal.aborted) onLeaseLost();
    shutdown.addEventListener('abort', onShutdown, { once: true });
    if (shutdown.aborted) onShutdown();
    try {
      const exit = await handle.exited;
      const ordered = this.#phase.name === 'stopping' ? this.#phase : undefined;
      this.#phase = { name: 'exited', exit };
      // What the session announced before it ended is recorded before its end (markReady is refused
      // once the session has ended): readers see ready, then the ending, as the session did them.
      await this.#announcing;
      // Its output too: a reader that sees the ending has every line before it.
      await output.close();
      return this.#endOf(exit, ordered?.why, ordered?.reason);
    } finally {
      this.#clearTimers();
      keepalive.stop();
      keepalive.signal.removeEventListener('abort', onLeaseLost);
      shutdown.removeEventListener('abort', onShutdown);
    }
  }

  /** The first order decides the state recorded (and its reason); any order is passed on to the process. */
  #stop(why: TerminalState, how: 'terminate' | 'kill', detail: string, reason?: EndReason): void {
    if (this.#phase.name === 'exited') return;
    if (this.#phase.name === 'running') {
      this.#phase = reason === undefined ? { name: 'stopping', why } : { name: 'stopping', why, reason };
      clearTimeout(this.#idleTimer);
      this.#log.info({ why, how, ...(reason === undefined ? {} : { reason }) }, detail);
    }
    if (how === 'kill') this.#started?.handle.kill();
    else this.#started?.handle.terminate();
  }

  #clearTimers(): void {
    clearTimeout(this.#deadlineTimer);
    clearTimeout(this.#checkTimer);
    clearTimeout(this.#idleTimer);
  }

  #renewed(answer: SessionRenewAnswer & { ok: true }, sentAt: number): void {
    const started = this.#started;
    if (this.#phase.name === 'exited' || started === undefined) return;
    // A hosted renewal: the process that answered keeps the session's records, as of when it was sent;
    // from the first, the session's own lease is renewed every third of its hosted lease.
    if (answer.run !== undefined && this.#deps.cover.renewed(answer.run, sentAt))
      started.keepalive.retime(Math.max(1, Math.floor(this.#deps.hostedLeaseMs / 3)));
    this.#moved();
    // One more renewal when the session would count as idle (a stopping session needs none).
    if (this.#phase.name === 'running' && !answer.stopRequested)
      this.#idleCheckAt(answer.idleInMs === undefined ? undefined : sentAt + answer.idleInMs);
    if (answer.deadline === this.#deadline) return;
    // A session already told to stop keeps stopping; otherwise host and runtime both move to the new deadline.
    if (this.#phase.name !== 'running') return;
    // Counted from when the renewal was sent, so the local instant is never later than Redis's.
    const at = this.#armDeadline(answer.deadline, sentAt + answer.lifetimeLeftMs);
    started.handle.deadlineMoved(at);
    this.#log.info({ deadline: new Date(answer.deadline).toISOString() }, 'session deadline moved');
  }

  /**
   * Arms the deadline's two timers (`deadline`, epoch ms, is `at` as a `performance.now()` instant): the
   * session is told to stop then, and one renewal just before it picks up a late change. Answers `at`.
   */
  #armDeadline(deadline: number, at: number): number {
    this.#deadline = deadline;
    clearTimeout(this.#deadlineTimer);
    clearTimeout(this.#checkTimer);
    this.#deadlineTimer = setTimeout(
      () => this.#stop('expired', 'terminate', 'lifetime cap reached'),
      Math.max(0, at - performance.now()),
    );
    this.#checkTimer = setTimeout(
      () => this.#started?.keepalive.renewNow(),
      Math.max(0, at - DEADLINE_CHECK_MS - performance.now()),
    );
    return at;
  }

  /**
   * Renews once more at `at` (a `performance.now()` instant, undefined: never), when the session would
   * count as idle unless it was active meanwhile: the renewal stops it then (its answer `idle`) or
   * answers the next such instant. Renewals come about once a second; this makes an idle stop precise.
   */
  #idleCheckAt(at: number | undefined): void {
    clearTimeout(this.#idleTimer);
    if (at === undefined) return;
    this.#idleTimer = setTimeout(
      () => this.#started?.keepalive.renewNow(),
      Math.max(0, at - performance.now()) + IDLE_CHECK_LATE_MS,
    );
  }

  #announce(endpoint: string | undefined, port?: number): void {
    const { coordinator, leaseMs } = this.#deps;
    this.#announcing = this.#announcing.then(async () => {
      try {
        const marked = await retryWhile(
          UnavailableError,
          () => coordinator.claims.markReady(this.#claim, endpoint, port),
          {
            initialDelayMs: 100,
            maxDelayMs: 1000,
            giveUpAfterMs: leaseMs,
          },
        );
        if (marked) this.#log.info({ endpoint, port }, 'session ready');
      } catch (err) {
        this.#log.warn({ err }, 'could not record that the session is ready');
      }
    });
  }

  /** The terminal state: the order's (with its reason), else what the process's exit says. */
  #endOf(exit: SessionExit, ordered: TerminalState | undefined, orderedReason?: EndReason): SessionEnd {
    if (ordered !== undefined && orderedReason !== undefined)
      return { state: ordered, exitCode: exit.exitCode, reason: orderedReason };
    if (ordered === undefined && exit.cause !== undefined && exit.cause !== 'spawn_failed') {
      this.#log.warn(
        { cause: exit.cause },
        exit.cause === 'deadline'
          ? 'the session runtime ended the session at its deadline'
          : 'the session was killed without its lease',
      );
    }
    const state = ordered ?? stateOf(exit);
    // Killed by its memory cap, not by an order of ours: failed, and the record says why.
    if (ordered === undefined && exit.outOfMemory === true && state === 'failed') {
      this.#log.warn({ exitCode: exit.exitCode }, 'session killed by its memory cap (SESSION_MEMORY_MB)');
      return { state, exitCode: exit.exitCode, reason: 'out_of_memory' };
    }
    return { state, exitCode: exit.exitCode };
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
