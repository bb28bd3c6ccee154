import { ReplyError, type Cluster, type Redis } from 'ioredis';
import { UnavailableError } from './errors.js';

/** A standalone ioredis client or a Redis Cluster client. */
export type RedisClient = Redis | Cluster;

/** True for errors that say Redis is unreachable, busy or failing over, rather than a bug of ours. */
export function isUnavailable(err: unknown): boolean {
  if (!(err instanceof ReplyError) || !(err instanceof Error)) return true;
  return !/^(ERR|WRONGTYPE|NOSCRIPT)/.test(err.message);
}

/** Wraps a Redis failure: outages become {@link UnavailableError}; anything else is passed on. */
export function wrapRedisError(err: unknown): Error {
  if (isUnavailable(err)) return new UnavailableError(err);
  return err instanceof Error ? err : new Error(String(err));
}
