import type { Context } from '../context.js';
import type { ScriptName } from '../script-loader.js';
import { assertInteger, assertName } from '../validate.js';
import { parseRateReply, type RateLimitResult } from './rate-limit.js';

/** A rate limiter: each check is one atomic script on one key, with time from Redis `TIME`. */
export interface RateLimiter {
  /** Name of the limiter, part of its keys. */
  readonly name: string;
  /** The algorithm. */
  readonly algorithm: 'gcra' | 'fixed-window' | 'sliding-window';
  /** Calls allowed per window (for GCRA: the burst). */
  readonly limit: number;
  /** The window in milliseconds (for GCRA: the emission interval times the burst). */
  readonly windowMs: number;
  /** Checks and, when allowed, counts one call of the caller `id`. */
  check(id: string): Promise<RateLimitResult>;
}

/** Options of {@link gcraLimiter}. */
export interface GcraOptions {
  /** Name of the limiter (part of its keys). */
  name: string;
  /** Milliseconds between calls once the burst is used (the emission interval). */
  intervalMs: number;
  /**
   * Calls allowed at once.
   * @defaultValue 1
   */
  burst?: number;
}

/** Options of {@link fixedWindowLimiter} and {@link slidingWindowLimiter}. */
export interface WindowOptions {
  /** Name of the limiter (part of its keys). */
  name: string;
  /** Calls allowed per window. */
  limit: number;
  /** The window, in milliseconds. */
  windowMs: number;
}

function scriptLimiter(
  context: Context,
  algorithm: RateLimiter['algorithm'],
  script: ScriptName,
  name: string,
  limit: number,
  windowMs: number,
  args: readonly number[],
): RateLimiter {
  assertName(name, 'limiter name');
  return {
    name,
    algorithm,
    limit,
    windowMs,
    async check(id: string): Promise<RateLimitResult> {
      const reply = await context.scripts.run(script, [context.keys.limiter(name, id)], args);
      return parseRateReply(reply, script);
    },
  };
}

/** GCRA (as in redis-cell): a burst of `burst` calls, then one per `intervalMs`. */
export function gcraLimiter(context: Context, options: GcraOptions): RateLimiter {
  const burst = options.burst ?? 1;
  assertInteger(options.intervalMs, 'intervalMs', 1);
  assertInteger(burst, 'burst', 1);
  return scriptLimiter(context, 'gcra', 'gcra', options.name, burst, options.intervalMs * burst, [
    options.intervalMs,
    burst,
  ]);
}

/** Fixed window: at most `limit` calls per window, the window opening at its first call. */
export function fixedWindowLimiter(context: Context, options: WindowOptions): RateLimiter {
  assertInteger(options.limit, 'limit', 1);
  assertInteger(options.windowMs, 'windowMs', 1);
  return scriptLimiter(context, 'fixed-window', 'fixedWindow', options.name, options.limit, options.windowMs, [
    options.limit,
    options.windowMs,
  ]);
}

/** Sliding-window log: at most `limit` calls in any `windowMs`; memory capped at `limit` entries per caller. */
export function slidingWindowLimiter(context: Context, options: WindowOptions): RateLimiter {
  assertInteger(options.limit, 'limit', 1);
  assertInteger(options.windowMs, 'windowMs', 1);
  return scriptLimiter(context, 'sliding-window', 'slidingWindow', options.name, options.limit, options.windowMs, [
    options.limit,
    options.windowMs,
  ]);
}
