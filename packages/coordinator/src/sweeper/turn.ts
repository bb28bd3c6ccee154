import type { Context } from '../context.js';
import { ScriptCode, replyCode } from '../errors.js';
import { wrapRedisError } from '../redis-errors.js';

/**
 * The sweeping turn, taken in turns by the sweepers of a deployment: one holds it and keeps it by
 * renewing it each sweep (`lua/renewSweepTurn-1.lua`); the others try to take it once per interval,
 * one `SET NX PX` each, once nobody holds it. The turn lasts 1.5 intervals (at least one more second),
 * so a holder late by less than that keeps it, and one that died is replaced at most 2.5 intervals
 * after its last sweep.
 */
export class SweepTurn {
  readonly #context: Context;
  readonly #id: string;
  readonly #intervalMs: number;
  /** Called when this sweeper finds it lost the turn it held (it stalled past the turn's time to live). */
  readonly #onLost: () => void;
  #holding = false;

  constructor(context: Context, id: string, intervalMs: number, onLost: () => void) {
    this.#context = context;
    this.#id = id;
    this.#intervalMs = intervalMs;
    this.#onLost = onLost;
  }

  /** True while this sweeper holds the turn (as far as it knows: its renewal says for sure). */
  get holding(): boolean {
    return this.#holding;
  }

  /** True when this sweeper holds the turn now: it renews the turn it holds, or takes it once nobody does. */
  async hold(): Promise<boolean> {
    const { scripts, keys, redis } = this.#context;
    const ttlMs = Math.max(this.#intervalMs + 1000, Math.ceil(this.#intervalMs * 1.5));
    if (this.#holding) {
      const reply = await scripts.run('renewSweepTurn', [keys.sweepTurn()], [this.#id, ttlMs]);
      if (replyCode(reply) === ScriptCode.Ok) return true;
      // Lost it (this process stalled past its turn): what it knew may be stale.
      this.#holding = false;
      this.#onLost();
    }
    let taken: string | null;
    try {
      taken = await redis.set(keys.sweepTurn(), this.#id, 'PX', ttlMs, 'NX');
    } catch (err) {
      throw wrapRedisError(err);
    }
    if (taken !== 'OK') return false;
    this.#holding = true;
    return true;
  }

  /**
   * Gives the turn up, if this sweeper holds it: it expires in 1 ms, so another sweeper takes it at its
   * next try. A failure is thrown; the turn is forgotten here either way (it runs out by itself).
   */
  async giveUp(): Promise<void> {
    if (!this.#holding) return;
    this.#holding = false;
    await this.#context.scripts.run('renewSweepTurn', [this.#context.keys.sweepTurn()], [this.#id, 1]);
  }
}
