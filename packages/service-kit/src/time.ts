// One vocabulary for time in the processes: the contract's answer budget declared once with every
// bound derived from it, and timeouts and retries expressed with cockatiel's policies rather than
// hand-made timer races and loops. (Sleeps use `setTimeout` from node:timers/promises; the coordinator
// library, which this package builds on, keeps its own `withTimeout` and uses cockatiel directly for its
// event feed's reconnects.)
import {
  ConstantBackoff,
  ExponentialBackoff,
  TaskCancelledError,
  TimeoutStrategy,
  handleAll,
  handleType,
  retry,
  timeout,
  wrap,
} from 'cockatiel';

/** The contract: a request that needs Redis is answered (503 at worst) within this many ms. */
const ANSWER_MS = 2000;

/** The time bounds of both processes, all derived from the contract's answer budget. */
export const BUDGET = Object.freeze({
  /** The contract's bound on an answer that needs Redis, ms. */
  answerMs: ANSWER_MS,
  /** Longest wait for one Redis command or script (and for a spawn's hand-off): the budget less 500 ms for the answer itself. */
  commandMs: ANSWER_MS - 500,
  /** Longest wait for `/readyz`'s PING: half the budget. */
  readyMs: ANSWER_MS / 2,
  /** Longest wait to connect to Redis, and for a client to become ready at start-up. */
  connectMs: ANSWER_MS,
});

/**
 * Waits for `work` at most `ms`, then gives up on it (its later outcome is ignored); answers whether
 * it settled in time. Its failure counts as settled: for clean-ups that must not hold a shutdown.
 */
export async function settleWithin(work: Promise<unknown> | undefined, ms: number): Promise<boolean> {
  if (work === undefined) return true;
  work.catch(() => {});
  try {
    await timeout(ms, TimeoutStrategy.Aggressive).execute(() => work.catch(() => {}));
    return true;
  } catch (err) {
    if (err instanceof TaskCancelledError) return false;
    throw err;
  }
}

/**
 * Runs `work` again while it fails with an error of `type` (an outage), backing off exponentially
 * from `initialDelayMs` to `maxDelayMs`, for at most `giveUpAfterMs` in all; then the last error
 * (or cockatiel's `TaskCancelledError`, when the time ran out) is thrown.
 */
export function retryWhile<T>(
  // eslint-disable-next-line @typescript-eslint/no-explicit-any -- any error class, whatever its constructor takes
  type: new (...args: any[]) => Error,
  work: () => Promise<T>,
  options: { initialDelayMs: number; maxDelayMs: number; giveUpAfterMs: number },
): Promise<T> {
  const retrying = retry(handleType(type), {
    maxAttempts: Number.MAX_SAFE_INTEGER,
    backoff: new ExponentialBackoff({ initialDelay: options.initialDelayMs, maxDelay: options.maxDelayMs }),
  });
  return wrap(timeout(options.giveUpAfterMs, TimeoutStrategy.Aggressive), retrying).execute(() => work());
}

/** Runs `work` up to `attempts` times, `delayMs` apart, whatever it fails with. */
export function attempt<T>(work: () => Promise<T>, attempts: number, delayMs: number): Promise<T> {
  return retry(handleAll, { maxAttempts: attempts - 1, backoff: new ConstantBackoff(delayMs) }).execute(() => work());
}
