import type { Context } from '../context.js';
import { enterUnlisted } from '../session-list.js';

/**
 * The session list's upgrade: slots of sessions admitted before the session list existed (a deployment
 * from before it) are entered in its directory when the sweeper's full read finds them live. A slot is
 * checked until a check of it succeeds: a failure is reported and tried again at the next sweep. Once no
 * deployment predates the session list, this job can go.
 */
export class ListUpgrade {
  readonly #context: Context;
  readonly #onError: ((err: unknown) => void) | undefined;
  /** Slots found live whose check has not succeeded yet. */
  readonly #pending = new Set<number>();

  constructor(context: Context, onError?: (err: unknown) => void) {
    this.#context = context;
    this.#onError = onError;
  }

  /**
   * Checks the slots given (slots a full read found live) and those whose check failed before, entering
   * those missing from the directory. Answers how many it entered; never throws: a failure is reported
   * and the slots are checked again at the next call.
   */
  async check(slots: readonly number[] = []): Promise<number> {
    for (const slot of slots) this.#pending.add(slot);
    if (this.#pending.size === 0) return 0;
    const checking = [...this.#pending];
    try {
      const entered = await enterUnlisted(this.#context, checking);
      for (const slot of checking) this.#pending.delete(slot);
      return entered;
    } catch (err) {
      this.#onError?.(err);
      return 0;
    }
  }
}
