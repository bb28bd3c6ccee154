import { BUDGET, settleWithin } from '@cq/service-kit';

/** Least time between two reads of Redis for the `/metrics` gauges, ms. */
export const METRICS_READ_EVERY_MS = 5000;

/** Options of {@link RedisGauges}. */
export interface RedisGaugesOptions {
  /** Least time between two rounds of reads, ms. @defaultValue {@link METRICS_READ_EVERY_MS} */
  readonly everyMs?: number;
  /**
   * How long a scrape waits for a round, ms: a read not answered by then (Redis away) leaves its gauges
   * at their last values, and the scrape is answered with them. @defaultValue `BUDGET.readyMs` (1000)
   */
  readonly budgetMs?: number;
  /** Told of a read that failed (its gauges keep their last values). */
  readonly onError?: (name: string, err: unknown) => void;
}

/**
 * The reads of Redis behind the `/metrics` gauges, in one place: every gauge whose value lives in Redis
 * (the slots and hosts, the webhook delivery queue) is set by a read added here, never by a `collect()`
 * of its own. A scrape asks for fresh values with {@link RedisGauges.refresh}; the reads run together,
 * at most once per `everyMs` in this process however often and by however many `/metrics` is scraped
 * (it takes no key). A scrape within `everyMs` of the last round sends Redis nothing: it waits for that
 * round when it is still running, then answers the values it set. Sends nothing and sets no timer of its
 * own between scrapes, so an API process nobody scrapes costs Redis nothing for its metrics.
 */
export class RedisGauges {
  readonly #everyMs: number;
  readonly #budgetMs: number;
  readonly #onError: (name: string, err: unknown) => void;
  readonly #reads = new Map<string, () => Promise<void>>();
  #last: { at: number; done: Promise<void> } | undefined;

  constructor(options: RedisGaugesOptions = {}) {
    this.#everyMs = options.everyMs ?? METRICS_READ_EVERY_MS;
    this.#budgetMs = options.budgetMs ?? BUDGET.readyMs;
    this.#onError = options.onError ?? (() => {});
  }

  /**
   * Adds a read: it reads Redis and sets its own gauges from what it read. It runs only in the rounds
   * {@link RedisGauges.refresh} starts.
   */
  add(name: string, read: () => Promise<void>): void {
    if (this.#reads.has(name)) throw new Error(`a Redis gauge read named ${name} is already added`);
    this.#reads.set(name, read);
  }

  /**
   * Starts a round of every read unless one started less than `everyMs` ago; resolves once the round
   * (this one or the last) has settled, or its budget has passed.
   */
  refresh(): Promise<void> {
    const now = performance.now();
    if (this.#last === undefined || now - this.#last.at >= this.#everyMs) this.#last = { at: now, done: this.#round() };
    return this.#last.done;
  }

  async #round(): Promise<void> {
    const reads = [...this.#reads].map(([name, read]) => read().catch((err: unknown) => this.#onError(name, err)));
    await settleWithin(Promise.all(reads), this.#budgetMs);
  }
}
