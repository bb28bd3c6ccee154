import { CoordinatorError } from '../errors.js';

/** What one renewal attempt learned. */
export type RenewAnswer =
  | {
      readonly ok: true;
      /** How long the lease lasts from the moment the renewal was sent, in ms. */
      readonly ttlMs: number;
      /** How long until the hard deadline, from the same moment, in ms (undefined: no deadline known). */
      readonly deadlineInMs?: number;
    }
  | { readonly ok: false; readonly reason: 'lease_lost' | 'deadline_reached' };

/** Options of {@link Keepalive}. */
export interface KeepaliveOptions<A extends RenewAnswer> {
  /** Renews the lease once; a rejection (Redis unreachable) is retried at the next interval. */
  renew: () => Promise<A>;
  /** Milliseconds between renewals: a fraction of the lease, e.g. a third. */
  intervalMs: number;
  /**
   * Milliseconds before a failed renewal is tried again, when sooner than the next interval: the lease
   * is kept through a short outage even when renewals are far apart. @defaultValue `intervalMs`
   */
  retryMs?: number;
  /** How long the lease is known to last from now, in ms. */
  ttlMs: number;
  /** How long until the lease's hard deadline from now, in ms. @defaultValue no deadline */
  deadlineInMs?: number;
  /**
   * Safety margin, ms: the signal aborts this long before the lease could run out in Redis, so the
   * owner has time to stop what the lease protects. @defaultValue 0
   */
  marginMs?: number;
  /**
   * Called after each successful renewal, with the `performance.now()` instant it was sent: the
   * answer's durations count from then.
   */
  onRenewed?: (answer: A & { ok: true }, sentAt: number) => void;
  /** Called when a renewal attempt fails (the keepalive goes on until the lease would have run out). */
  onError?: (err: unknown) => void;
  /**
   * Until when (a `performance.now()` instant) something besides the renewals vouches for the lease,
   * read whenever the watchdog is armed: the lease is held only while both do, so the signal aborts at
   * the earlier of the two (less the margin). A session held under its host's lease has the host lease
   * and the Redis process that keeps its records vouch for it. Call {@link Keepalive.refresh} when it
   * moves. @defaultValue nothing more (the renewals alone)
   */
  cover?: () => number;
}

/** Why a keepalive's signal aborted: `lease_lost` or `deadline_reached`. */
export class LeaseLostError extends CoordinatorError {
  override name = 'LeaseLostError';
}

/**
 * Keeps a lease alive (as Coinbase's MasterLock does): renews it every `intervalMs` while its owner
 * lives, and aborts {@link Keepalive.signal} as soon as the lease is lost: the renewal is refused, the
 * hard deadline arrives, or no renewal got through before the lease would have run out. Times are
 * measured on the local monotonic clock from the moment each renewal was sent, so the local view
 * of the lease always ends no later than Redis's.
 */
export class Keepalive<A extends RenewAnswer = RenewAnswer> {
  readonly #controller = new AbortController();
  readonly #options: KeepaliveOptions<A>;
  #interval: NodeJS.Timeout | undefined;
  #watchdog: NodeJS.Timeout | undefined;
  #expiresAt: number;
  #deadlineAt: number;
  readonly #marginMs: number;
  #retry: NodeJS.Timeout | undefined;
  #inFlight = false;
  /** A renewal was asked for while one was in flight: it goes out as soon as that one is answered. */
  #again = false;
  #stopped = false;
  #intervalMs: number;

  constructor(options: KeepaliveOptions<A>) {
    this.#options = options;
    this.#intervalMs = options.intervalMs;
    this.#marginMs = options.marginMs ?? 0;
    const now = performance.now();
    this.#expiresAt = now + options.ttlMs;
    this.#deadlineAt = options.deadlineInMs === undefined ? Number.POSITIVE_INFINITY : now + options.deadlineInMs;
  }

  /**
   * Starts renewing every `intervalMs` and watching for the lease's end (the lease's time counts from
   * the keepalive's construction, whenever this is called). Returns the keepalive.
   */
  start(): this {
    if (this.#interval !== undefined || this.#stopped) return this;
    this.#interval = setInterval(() => void this.#tick(), this.#intervalMs);
    this.#interval.unref();
    this.#arm();
    return this;
  }

  /** Aborts when the lease is lost; its `reason` is a {@link LeaseLostError}. */
  get signal(): AbortSignal {
    return this.#controller.signal;
  }

  /**
   * Until when (a `performance.now()` instant) the lease is known to hold, less the margin: the
   * signal aborts then unless a renewal moves it. Read it in `onRenewed` to pass it on.
   */
  get holdsUntil(): number {
    return Math.min(this.#expiresAt, this.#deadlineAt, this.#cover()) - this.#marginMs;
  }

  #cover(): number {
    return this.#options.cover?.() ?? Number.POSITIVE_INFINITY;
  }

  /**
   * The cover moved (see {@link KeepaliveOptions.cover}): the watchdog is armed again for it. Answers
   * {@link Keepalive.holdsUntil}.
   */
  refresh(): number {
    if (!this.#stopped && this.#interval !== undefined) this.#arm();
    return this.holdsUntil;
  }

  /** Renews every `intervalMs` from now on (a session held under its host's lease is renewed far less often). */
  retime(intervalMs: number): void {
    if (this.#stopped || intervalMs === this.#intervalMs) return;
    this.#intervalMs = intervalMs;
    if (this.#interval === undefined) return;
    clearInterval(this.#interval);
    this.#interval = setInterval(() => void this.#tick(), intervalMs);
    this.#interval.unref();
  }

  /**
   * Renews now, besides the regular interval, to learn what changed without waiting for the next one.
   * A renewal in flight may have been sent before the change: one more follows as soon as it is answered.
   */
  renewNow(): void {
    if (this.#inFlight) this.#again = true;
    else void this.#tick();
  }

  /** Stops renewing (the owner is done); the signal does not abort. */
  stop(): void {
    this.#stopped = true;
    clearInterval(this.#interval);
    clearTimeout(this.#watchdog);
    clearTimeout(this.#retry);
  }

  #abort(code: 'lease_lost' | 'deadline_reached', message: string): void {
    if (this.#stopped) return;
    this.stop();
    this.#controller.abort(new LeaseLostError(code, message));
  }

  #arm(): void {
    clearTimeout(this.#watchdog);
    const deadlineFirst = this.#deadlineAt <= Math.min(this.#expiresAt, this.#cover());
    const at = this.holdsUntil;
    this.#watchdog = setTimeout(
      () =>
        deadlineFirst
          ? this.#abort('deadline_reached', 'The lease reached its hard deadline.')
          : this.#abort('lease_lost', 'The lease ran out before a renewal got through.'),
      Math.max(0, at - performance.now()),
    );
    this.#watchdog.unref();
  }

  async #tick(): Promise<void> {
    if (this.#inFlight || this.#stopped) return;
    this.#inFlight = true;
    clearTimeout(this.#retry);
    const sentAt = performance.now();
    try {
      const answer = await this.#options.renew();
      if (this.#stopped) return;
      if (!answer.ok) {
        this.#abort(
          answer.reason,
          answer.reason === 'deadline_reached'
            ? 'The lease reached its hard deadline.'
            : 'The lease is held by someone else or has expired.',
        );
        return;
      }
      this.#expiresAt = sentAt + answer.ttlMs;
      if (answer.deadlineInMs !== undefined) this.#deadlineAt = sentAt + answer.deadlineInMs;
      this.#arm();
      this.#options.onRenewed?.(answer as A & { ok: true }, sentAt);
    } catch (err) {
      this.#options.onError?.(err);
      const retryMs = this.#options.retryMs ?? this.#intervalMs;
      if (!this.#stopped && retryMs < this.#intervalMs) {
        this.#retry = setTimeout(() => void this.#tick(), retryMs);
        this.#retry.unref();
      }
    } finally {
      this.#inFlight = false;
      if (this.#again && !this.#stopped) {
        this.#again = false;
        void this.#tick();
      }
    }
  }
}
