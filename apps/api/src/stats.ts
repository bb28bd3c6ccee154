import type { Keys, RedisClient } from '@cq/coordinator';
import { settleWithin } from '@cq/service-kit';
import { wrapRedisError } from '@cq/coordinator';

/** The outcomes counted per minute for the dashboard's chart. */
export const statFields = [
  'admitted',
  'token_invalid',
  'session_exists',
  'throttled',
  'no_capacity',
  'tokens_issued',
  'tokens_throttled',
] as const;
/** One counted outcome. */
export type StatField = (typeof statFields)[number];

/** Counts of one minute. */
export interface MinuteStats {
  /** Start of the minute, epoch ms. */
  readonly minute: number;
  readonly counts: Readonly<Record<StatField, number>>;
}

const MINUTE = 60_000;
/** How long a minute's counters are kept. */
const KEEP_MS = 2 * 3_600_000;

/**
 * Per-minute counters shared by every API instance, for the dashboard's chart. Counting is in memory
 * (no Redis command on any request path); a timer flushes the sums with HINCRBY on a connection of
 * its own. Counts that could not be flushed are kept for the next flush.
 */
export class StatsRecorder {
  readonly #redis: RedisClient;
  readonly #keys: Keys;
  readonly #flushMs: number;
  #pending = new Map<number, Map<StatField, number>>();
  #timer: NodeJS.Timeout | undefined;
  #flushing: Promise<void> | undefined;

  constructor(redis: RedisClient, keys: Keys, flushMs = 2000) {
    this.#redis = redis;
    this.#keys = keys;
    this.#flushMs = flushMs;
  }

  /** Counts one outcome now. */
  count(field: StatField): void {
    const minute = Math.floor(Date.now() / MINUTE) * MINUTE;
    let counts = this.#pending.get(minute);
    if (counts === undefined) {
      counts = new Map();
      this.#pending.set(minute, counts);
    }
    counts.set(field, (counts.get(field) ?? 0) + 1);
  }

  start(): void {
    this.#timer ??= setInterval(() => void this.flush(), this.#flushMs);
    this.#timer.unref();
  }

  /** Writes what was counted since the last flush. */
  async flush(): Promise<void> {
    if (this.#flushing !== undefined) return this.#flushing;
    if (this.#pending.size === 0 || this.#redis.status !== 'ready') return;
    const batch = this.#pending;
    this.#pending = new Map();
    this.#flushing = (async () => {
      try {
        const pipeline = this.#redis.pipeline();
        for (const [minute, counts] of batch) {
          const key = this.#keys.stats(minute);
          for (const [field, n] of counts) pipeline.hincrby(key, field, n);
          pipeline.pexpire(key, KEEP_MS);
        }
        const results = (await pipeline.exec()) ?? [];
        const failed = results.find(([err]) => err !== null);
        if (failed) throw failed[0];
      } catch {
        // Keep the counts for the next flush (they are small: a few numbers per minute).
        for (const [minute, counts] of batch) {
          for (const [field, n] of counts) {
            const into = this.#pending.get(minute) ?? new Map<StatField, number>();
            into.set(field, (into.get(field) ?? 0) + n);
            this.#pending.set(minute, into);
          }
        }
      } finally {
        this.#flushing = undefined;
      }
    })();
    return this.#flushing;
  }

  /** The last `minutes` minutes, oldest first (counts flushed so far, from every instance). */
  async read(minutes = 15): Promise<MinuteStats[]> {
    const now = Math.floor(Date.now() / MINUTE) * MINUTE;
    const starts = Array.from({ length: minutes }, (_, i) => now - (minutes - 1 - i) * MINUTE);
    try {
      const hashes = await Promise.all(starts.map((minute) => this.#redis.hgetall(this.#keys.stats(minute))));
      return starts.map((minute, i) => ({
        minute,
        counts: Object.fromEntries(statFields.map((f) => [f, Number(hashes[i]![f] ?? 0)])) as Record<StatField, number>,
      }));
    } catch (err) {
      throw wrapRedisError(err);
    }
  }

  /** Stops the timer and makes one last, bounded flush. */
  async stop(): Promise<void> {
    clearInterval(this.#timer);
    await settleWithin(this.flush(), 1000);
  }
}
