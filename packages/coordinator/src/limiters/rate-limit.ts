import { ScriptReplyError } from '../errors.js';

/** The answer of every rate limiter. */
export interface RateLimitResult {
  /** Whether this call is allowed (and counted). A rejected call consumes no quota. */
  readonly allowed: boolean;
  /** Calls allowed per window (for GCRA: the burst). */
  readonly limit: number;
  /** Calls still allowed right now after this one. */
  readonly remaining: number;
  /** 0 when allowed; otherwise a call made this many milliseconds later is allowed, if nobody else used the quota. */
  readonly retryAfterMs: number;
  /** Milliseconds until the limiter is back to its full quota. */
  readonly resetAfterMs: number;
}

/** Reads the five-number limiter reply `{allowed, limit, remaining, retryAfterMs, resetAfterMs}` at `offset`. */
export function parseRateReply(reply: readonly unknown[], script: string, offset = 0): RateLimitResult {
  const [allowed, limit, remaining, retryAfterMs, resetAfterMs] = reply.slice(offset, offset + 5).map(Number);
  if (
    resetAfterMs === undefined ||
    [allowed, limit, remaining, retryAfterMs, resetAfterMs].some((n) => !Number.isFinite(n))
  ) {
    throw new ScriptReplyError(script, reply);
  }
  return { allowed: allowed === 1, limit: limit!, remaining: remaining!, retryAfterMs: retryAfterMs!, resetAfterMs };
}
