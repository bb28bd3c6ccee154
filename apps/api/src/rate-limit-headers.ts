import type { RateLimitResult } from '@cq/coordinator';
import type { FastifyReply } from 'fastify';

/** A named quota as announced in `RateLimit-Policy`: `limit` requests per `windowMs`. */
export interface QuotaPolicy {
  readonly name: string;
  readonly limit: number;
  readonly windowMs: number;
}

/** Whole seconds, rounded up, never 0: what `Retry-After` carries. */
export function retryAfterSeconds(retryAfterMs: number): number {
  return Math.max(1, Math.ceil(retryAfterMs / 1000));
}

/**
 * Sets `RateLimit-Policy` and `RateLimit` (IETF httpapi ratelimit-headers draft syntax) and, when the
 * call was refused, `Retry-After`.
 */
export function setRateLimitHeaders(reply: FastifyReply, policy: QuotaPolicy, rate: RateLimitResult): void {
  const windowSeconds = Math.max(1, Math.ceil(policy.windowMs / 1000));
  const resetSeconds = rate.allowed ? Math.ceil(rate.resetAfterMs / 1000) : retryAfterSeconds(rate.retryAfterMs);
  reply.header('RateLimit-Policy', `"${policy.name}";q=${policy.limit};w=${windowSeconds}`);
  reply.header('RateLimit', `"${policy.name}";r=${rate.remaining};t=${resetSeconds}`);
  if (!rate.allowed) reply.header('Retry-After', String(retryAfterSeconds(rate.retryAfterMs)));
}
