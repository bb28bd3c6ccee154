import { isUnavailable, type Coordinator, type WorkerHeartbeat } from '@cq/coordinator';
import type { Logger } from 'pino';
import type { SessionRunner } from '../session-runner.js';
import type { HostLease } from './host-lease.js';

/**
 * How soon a periodic heartbeat or probe that failed is tried again, ms: a hold is moved by the send
 * instant of the last one that went through, so after an outage every moment until the next try is taken
 * off the outage a running session survives.
 */
export const RETRY_MS = 250;

/** At most one heartbeat this soon after a session ends (to publish the slot and give its hold back), ms. */
export const SOON_MS = 250;

/**
 * How often a host's heartbeat goes, ms: as asked (2 s by default), never more than a third of
 * `LEASE_MS` (the host lease must be renewed twice within it, a failed heartbeat being retried).
 */
export function heartbeatPeriodMs(asked: number | undefined, leaseMs: number): number {
  return Math.max(1, Math.min(asked ?? 2000, Math.floor(leaseMs / 3)));
}

/** What a {@link Heartbeat} works with. */
export interface HeartbeatDeps {
  readonly coordinator: Coordinator;
  readonly runner: SessionRunner;
  readonly lease: HostLease;
  readonly logger: Logger;
  /** How often the periodic heartbeat goes, ms; its record lives three times as long. */
  readonly heartbeatMs: number;
  /** `LEASE_MS`: the host lease's time to live from each heartbeat. */
  readonly leaseMs: number;
  /** What the host says of itself with every heartbeat (its slots in use are read at each). */
  readonly describe: () => Omit<WorkerHeartbeat, 'running' | 'ended' | 'full' | 'lease'>;
  /** The API asked the host to drain (heard with a heartbeat's answer). */
  readonly onDrainAsked: () => void;
}

/**
 * The host's heartbeat, and what it batches: every heartbeat renews the holds on the capacity of the
 * sessions taken since the last one, the periodic one of all; each renews the host lease too, registering
 * the sessions started since the last one under it (every tenth periodic one registers every held
 * session again, see {@link HostLease}), and the periodic one asks each Redis master that keeps held
 * sessions which process it runs (the runner's probe). One heartbeat on the tick after a claim serves
 * every session taken in that tick; one shortly after an end gives its hold back. A periodic heartbeat
 * or probe that fails is tried again {@link RETRY_MS} later, not a heartbeat later: after a Redis outage
 * the holds move again as soon as Redis answers (docs/failure-modes.md, "Redis is unreachable").
 */
export class Heartbeat {
  readonly #deps: HeartbeatDeps;
  /** Sessions taken from the queue and not finished: their slots' holds are renewed with each heartbeat. */
  readonly #running = new Set<string>();
  /**
   * Sessions taken since the last heartbeat: the heartbeat on the tick after their claim moves their
   * holds from the admission's (pending timeout + margin) to the heartbeat's time to live, so a host that
   * dies after starting them leaves the capacity with them, within its heartbeat's time to live.
   */
  #claimed: string[] = [];
  /** Sessions finished since the last heartbeat that went through: their holds are given back with the next. */
  #ended: string[] = [];
  #interval: NodeJS.Timeout | undefined;
  #soon: NodeJS.Timeout | undefined;
  #claimBeat: NodeJS.Immediate | undefined;
  #retryBeat: NodeJS.Timeout | undefined;
  #retryProbe: NodeJS.Timeout | undefined;
  #stopped = false;

  constructor(deps: HeartbeatDeps) {
    this.#deps = deps;
  }

  /** Sends the first heartbeat now, then one every `heartbeatMs`. */
  start(): void {
    this.#beat(true);
    this.#interval = setInterval(() => this.#beat(true), this.#deps.heartbeatMs);
  }

  /** A session was taken from the queue: its slot is in use from now. */
  claimed(sessionId: string): void {
    this.#running.add(sessionId);
    this.#claimed.push(sessionId);
  }

  /** A taken session started: registered under the host lease with the heartbeat on the next tick. */
  started(sessionId: string, userId: string): void {
    this.#deps.lease.register({ sessionId, userId });
    this.#claimBeat ??= setImmediate(() => {
      this.#claimBeat = undefined;
      this.#beat(false);
    });
  }

  /** A taken session finished (or never started): its hold is given back with the next heartbeat. */
  ended(sessionId: string): void {
    this.#running.delete(sessionId);
    this.#ended.push(sessionId);
  }

  /** A heartbeat {@link SOON_MS} from now (at most one such at a time), to publish slots in use and give back ended holds. */
  soon(): void {
    if (this.#soon !== undefined || this.#stopped) return;
    this.#soon = setTimeout(() => {
      this.#soon = undefined;
      this.#beat(false);
    }, SOON_MS);
    this.#soon.unref();
  }

  /** Stops every heartbeat (sessions may still end: see {@link unreturned}). */
  stop(): void {
    this.#stopped = true;
    clearInterval(this.#interval);
    clearTimeout(this.#soon);
    clearTimeout(this.#retryBeat);
    clearTimeout(this.#retryProbe);
    if (this.#claimBeat !== undefined) clearImmediate(this.#claimBeat);
  }

  /** The sessions whose holds are still to give back: ended since the last heartbeat, or running. */
  get unreturned(): string[] {
    return [...this.#ended, ...this.#running];
  }

  #beat(periodic: boolean): void {
    const { coordinator, runner, lease, logger } = this.#deps;
    const ended = this.#ended;
    this.#ended = [];
    const running = periodic ? [...this.#running] : this.#claimed.filter((id) => this.#running.has(id));
    this.#claimed = [];
    const renewal = lease.renewal(
      periodic,
      (sessionId) => this.#running.has(sessionId),
      () => runner.held.filter((r) => r.token === lease.token).map(({ sessionId, userId }) => ({ sessionId, userId })),
    );
    coordinator.workers
      .publish(
        {
          ...this.#deps.describe(),
          running,
          ended,
          full: renewal.again ? 'check' : periodic,
          lease: {
            token: renewal.lease.token,
            ttlMs: this.#deps.leaseMs,
            fresh: renewal.lease.fresh,
            register: renewal.register,
          },
        },
        this.#deps.heartbeatMs * 3,
      )
      .then(
        ({ state, lease: held, nudged, gone }) => {
          // Stops posted beside the channel's messages: one lost on the channel arrives here.
          for (const userId of nudged) runner.nudge(userId);
          // Sessions Redis still has running here after it lost their ends: ended (lost) now. One this
          // host does run (a heartbeat built before its claim, run after the claim's: heartbeats can
          // reach Redis out of order through the replica-wait pool or a Cluster redirection) is
          // registered again instead.
          for (const { sessionId, userId } of gone)
            if (this.#running.has(sessionId)) lease.register({ sessionId, userId });
            else
              void coordinator.sessions
                .sweepUser(userId, { sessionId, workerId: this.#deps.describe().workerId })
                .catch((err: unknown) =>
                  logger.debug({ err, sessionId }, 'ending a session whose end was lost failed'),
                );
          if (held === 'held') {
            lease.renewed(renewal);
            const token = renewal.lease.token;
            runner.hold(
              renewal.fresh.map((r) => r.sessionId),
              token,
              () => lease.holdsUntil(token),
            );
            // The Redis processes keeping held sessions are asked with every periodic heartbeat: a
            // session's hold moves with the last answer of each (see RETRY_MS), once the probe is
            // answered, for the host lease's move too (one move of every instant per heartbeat).
            if (periodic) this.#probe();
            else runner.covered();
          } else if (held === 'lost') {
            lease.ranOut(renewal);
            runner.covered();
          }
          if (state === 'draining') this.#deps.onDrainAsked();
        },
        (err: unknown) => {
          this.#ended.push(...ended); // given back with the next heartbeat
          lease.failed(renewal); // registered with the next
          // An outage is tried again soon; anything else (a bug, a refused command) is not worth four
          // tries a second, and is said louder.
          if (!isUnavailable(err)) {
            logger.error({ err }, 'heartbeat failed');
            return;
          }
          logger.debug({ err }, 'heartbeat failed');
          if (periodic && !this.#stopped)
            this.#retryBeat ??= setTimeout(() => {
              this.#retryBeat = undefined;
              this.#beat(true);
            }, RETRY_MS);
        },
      );
  }

  /**
   * Asks the Redis masters keeping held sessions which process each runs (moving the sessions' holds);
   * when one did not answer, asks again {@link RETRY_MS} later rather than with the next heartbeat.
   */
  #probe(): void {
    void this.#deps.runner.probe().then((answered) => {
      if (answered || this.#stopped) return;
      this.#retryProbe ??= setTimeout(() => {
        this.#retryProbe = undefined;
        this.#probe();
      }, RETRY_MS);
    });
  }
}
