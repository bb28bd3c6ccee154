/**
 * Until when a running session is vouched for, beyond its own lease: one per session, given to it by the
 * runner. A session is held under its host's lease once the host registered it there ({@link hold});
 * from its next renewal on (which learns which Redis process keeps its records, {@link renewed}), it is
 * held until the earlier of two instants: until when the host lease holds, and `LEASE_MS` after that
 * Redis process was last heard from (a renewal, or a probe of its master, {@link heard}, sent then). A
 * process that replaced it (a restart, a failover) may have lost the session: it is renewed at once to
 * find out, and held again only if that renewal succeeds. Every move of either instant takes effect when
 * the host says so ({@link moved}: one move of every instant per heartbeat), re-arming the session's kill.
 */
export class SessionCover {
  readonly #leaseMs: number;
  /** Until when the host lease the session is registered under holds (once it is). */
  #host: (() => number) | undefined;
  /** The Redis process (run_id) keeping the session's records, as its last hosted renewal said. */
  #run: string | undefined;
  /** The latest instant that process was heard from (`performance.now()`). */
  #heardAt = Number.NEGATIVE_INFINITY;
  /** What the session does when the cover moves (re-arms its kill), or must renew now; set once it runs. */
  #session: { readonly moved: () => void; readonly renewNow: () => void } | undefined;

  constructor(leaseMs: number) {
    this.#leaseMs = leaseMs;
  }

  /** The session runs: how it follows its cover. */
  attach(session: { readonly moved: () => void; readonly renewNow: () => void }): void {
    this.#session = session;
  }

  /** The session's host registered it under its host lease, which holds until `host()` (once; a session not yet running is not held). */
  hold(host: () => number): void {
    if (this.#host !== undefined || this.#session === undefined) return;
    this.#host = host;
  }

  /** It is registered under a host lease: its renewals ask for its hosted lease. */
  get held(): boolean {
    return this.#host !== undefined;
  }

  /** The Redis process keeping its records, once a hosted renewal said. */
  get keptBy(): string | undefined {
    return this.#run;
  }

  /**
   * A hosted renewal sent at `sentAt` was answered by the Redis process `run`: it is heard from then (a
   * process other than the last one starts over). Answers whether this is the session's first hosted renewal.
   */
  renewed(run: string, sentAt: number): boolean {
    const first = this.#run === undefined;
    if (run !== this.#run) this.#heardAt = Number.NEGATIVE_INFINITY;
    this.#run = run;
    this.#heardAt = Math.max(this.#heardAt, sentAt);
    return first;
  }

  /**
   * The host's probe of the session's master (sent at `sentAt`) was answered by process `run`: the
   * instant it was heard from moves, taking effect with the next {@link moved}; another process than the
   * one that keeps the session may have lost it, and the session is renewed now to find out.
   */
  heard(run: string, sentAt: number): void {
    if (this.#run === undefined) return;
    if (run !== this.#run) this.#session?.renewNow();
    else this.#heardAt = Math.max(this.#heardAt, sentAt);
  }

  /** The host lease moved, or the session's master was heard from: the session's kill moves with them. */
  moved(): void {
    this.#session?.moved();
  }

  /** Until when the host lease and the Redis process vouch for the session (unbounded until it is held). */
  until(): number {
    if (this.#host === undefined || this.#run === undefined) return Number.POSITIVE_INFINITY;
    return Math.min(this.#host(), this.#heardAt + this.#leaseMs);
  }
}
