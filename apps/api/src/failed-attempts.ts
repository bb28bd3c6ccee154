/** Options of {@link FailedAttemptLimiter}. */
export interface FailedAttemptOptions {
  /** Failed spawn attempts allowed per client address per window. @defaultValue 20 */
  limit: number;
  /** The window, ms. @defaultValue 10000 */
  windowMs: number;
  /** Addresses remembered at most; the oldest are forgotten first. @defaultValue 100000 */
  maxAddresses?: number;
}

/** What {@link FailedAttemptLimiter.check} answers for a blocked address. */
export interface Blocked {
  readonly retryAfterMs: number;
}

/**
 * Counts failed spawn attempts (invalid tokens) per client address, in this process's memory, to
 * blunt token guessing: an address over its limit is refused before anything is sent to Redis.
 * A fixed window per address; memory is bounded by `maxAddresses`.
 */
export class FailedAttemptLimiter {
  readonly limit: number;
  readonly windowMs: number;
  readonly #maxAddresses: number;
  readonly #windows = new Map<string, { start: number; failures: number }>();

  constructor(options: FailedAttemptOptions) {
    this.limit = options.limit;
    this.windowMs = options.windowMs;
    this.#maxAddresses = options.maxAddresses ?? 100_000;
  }

  /** Undefined when `address` may try; otherwise how long until it may. */
  check(address: string, now = performance.now()): Blocked | undefined {
    const window = this.#windows.get(address);
    if (window === undefined) return undefined;
    if (now - window.start >= this.windowMs) {
      this.#windows.delete(address);
      return undefined;
    }
    return window.failures >= this.limit ? { retryAfterMs: Math.ceil(window.start + this.windowMs - now) } : undefined;
  }

  /** Counts one failed attempt of `address`. */
  fail(address: string, now = performance.now()): void {
    const window = this.#windows.get(address);
    if (window !== undefined && now - window.start < this.windowMs) {
      window.failures++;
      return;
    }
    this.#windows.delete(address);
    if (this.#windows.size >= this.#maxAddresses) {
      // Forget the oldest address (Map keeps insertion order).
      const oldest = this.#windows.keys().next().value;
      if (oldest !== undefined) this.#windows.delete(oldest);
    }
    this.#windows.set(address, { start: now, failures: 1 });
  }
}
