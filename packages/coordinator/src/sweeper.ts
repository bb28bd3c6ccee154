import { randomUUID } from 'node:crypto';
import type { Context } from './context.js';
import { fanOut, type Command } from './fan-out.js';
import type { SessionStore } from './sessions.js';
import { wrapRedisError } from './redis-errors.js';

/** Options of {@link Sweeper}. */
export interface SweeperOptions {
  /**
   * Milliseconds between sweeps. A sweep reads all 16384 index indexes (one per cluster slot): about
   * 3 ms of Redis time and 100 ms of client CPU, so it runs every few seconds; admissions and stop
   * requests end an overdue session of their own user at once anyway.
   * @defaultValue 5000
   */
  intervalMs?: number;
  /**
   * Index indexes read per pipelined batch.
   * @defaultValue 2048
   */
  batchSize?: number;
  /**
   * Due users taken from one slot's live index per sweep (the rest wait for the next sweep).
   * @defaultValue 100
   */
  perSlot?: number;
  /**
   * Take turns with the other sweepers of the deployment: before each sweep, `SET <prefix>:{sweep}:turn
   * NX PX intervalMs`; only the sweeper that sets it sweeps, so the deployment sweeps about once per
   * interval however many API processes run, and when the one sweeping dies another takes the next
   * turn. false: sweep every interval regardless. @defaultValue true
   */
  takeTurns?: boolean;
  /** Called when a sweep fails (Redis unreachable); the sweeper goes on at the next interval. */
  onError?: (err: unknown) => void;
  /** Called after each sweep that ended sessions. */
  onSwept?: (result: SweepResult) => void;
}

/** What one sweep did. */
export interface SweepResult {
  /** Users found due in the index. */
  readonly due: number;
  /** Sessions ended as `lost`. */
  readonly lost: number;
}

/**
 * Ends as `lost` the pending sessions nobody claimed in time and the running sessions whose lease
 * expired, even when nobody asks about those users. It reads the live-session index (one sorted set per
 * cluster slot, scored by due time), never the keyspace, and re-checks each due user in one atomic
 * script, so any number of API processes may sweep at once; by default they take turns, so the
 * deployment reads the index about once per interval, not once per process.
 */
export class Sweeper {
  readonly #context: Context;
  readonly #sessions: SessionStore;
  readonly #options: Required<Omit<SweeperOptions, 'onError' | 'onSwept'>> &
    Pick<SweeperOptions, 'onError' | 'onSwept'>;
  #timer: NodeJS.Timeout | undefined;
  #running: Promise<unknown> | undefined;
  #sweeps = 0;
  readonly #id = randomUUID();

  constructor(context: Context, sessions: SessionStore, options: SweeperOptions = {}) {
    this.#context = context;
    this.#sessions = sessions;
    this.#options = { intervalMs: 5000, batchSize: 2048, perSlot: 100, takeTurns: true, ...options };
  }

  /** Finds the users due now in every slot's live index. */
  async dueUsers(): Promise<string[]> {
    const { redis, keys } = this.#context;
    const indexes = keys.allLiveIndexes();
    const due: string[] = [];
    try {
      const [seconds, micros] = await redis.time();
      const now = Number(seconds) * 1000 + Math.floor(Number(micros) / 1000);
      for (let i = 0; i < indexes.length; i += this.#options.batchSize) {
        const batch = indexes.slice(i, i + this.#options.batchSize);
        const replies = await fanOut(
          redis,
          batch.map((index): Command => ['zrangebyscore', index, '-inf', now, 'LIMIT', 0, this.#options.perSlot]),
        );
        for (const users of replies) due.push(...(users as string[]));
      }
    } catch (err) {
      throw wrapRedisError(err);
    }
    return due;
  }

  /** One sweep over the whole index. */
  async sweepOnce(): Promise<SweepResult> {
    const due = await this.dueUsers();
    const ended = await Promise.all(due.map((userId) => this.#sessions.sweepUser(userId)));
    const result = { due: due.length, lost: ended.filter(Boolean).length };
    if (result.lost > 0) this.#options.onSwept?.(result);
    return result;
  }

  /** This sweeper's id: the value of the turn key while it is its turn. */
  get id(): string {
    return this.#id;
  }

  /** Sweeps made by this sweeper (turns it took). */
  get sweeps(): number {
    return this.#sweeps;
  }

  /** True when this sweeper took the turn to sweep now (always, without {@link SweeperOptions.takeTurns}). */
  async #myTurn(): Promise<boolean> {
    if (!this.#options.takeTurns) return true;
    const { redis, keys } = this.#context;
    try {
      // The turn lasts a little less than an interval, so the next interval's first sweeper gets it.
      const ttl = Math.max(1, this.#options.intervalMs - 50);
      return (await redis.set(keys.sweepTurn(), this.#id, 'PX', ttl, 'NX')) === 'OK';
    } catch (err) {
      throw wrapRedisError(err);
    }
  }

  /** Sweeps every `intervalMs` (when it is this sweeper's turn) until {@link Sweeper.stop}. */
  start(): void {
    if (this.#timer !== undefined) return;
    const loop = (): void => {
      this.#running = this.#myTurn()
        .then((mine) => {
          if (!mine) return undefined;
          this.#sweeps++;
          return this.sweepOnce();
        })
        .then((swept) => swept !== undefined)
        .catch((err: unknown) => {
          this.#options.onError?.(err);
          return true;
        })
        .then((mine) => {
          // Not this sweeper's turn: look again in half an interval, so the turn of one that died is
          // taken at most half an interval after it ran out.
          const next = mine ? this.#options.intervalMs : Math.ceil(this.#options.intervalMs / 2);
          if (this.#timer !== undefined) this.#timer = setTimeout(loop, next);
        });
    };
    this.#timer = setTimeout(loop, this.#options.intervalMs);
  }

  /** Stops sweeping and waits for a sweep in progress. */
  async stop(): Promise<void> {
    clearTimeout(this.#timer);
    this.#timer = undefined;
    await this.#running;
  }
}
