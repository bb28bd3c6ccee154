import { createHash, timingSafeEqual } from 'node:crypto';
import type { FastifyRequest, onRequestAsyncHookHandler } from 'fastify';
import { HttpError } from '../http-errors.js';

function digest(value: string): Buffer {
  return createHash('sha256').update(value).digest();
}

/**
 * Checks a presented key against every configured key in constant time: the keys are compared as
 * SHA-256 digests (equal length) and all of them are compared, whatever matched.
 */
export function keyMatcher(keys: readonly string[]): (presented: string) => boolean {
  const digests = keys.map(digest);
  return (presented) => {
    const candidate = digest(presented);
    let match = false;
    for (const known of digests) match = timingSafeEqual(known, candidate) || match;
    return match;
  };
}

/** The bearer token of a request's `Authorization` header, or undefined. */
export function bearer(request: FastifyRequest): string | undefined {
  const header = request.headers.authorization;
  if (typeof header !== 'string') return undefined;
  const match = /^Bearer[ ]+(\S+)\s*$/i.exec(header);
  return match?.[1];
}

/**
 * An `onRequest` hook that refuses (401) a request without a valid service key, before its body is read,
 * parsed or validated: a caller without a key learns nothing, not even what a body must be, and costs
 * no parsing. Never logs the key.
 */
export function requireServiceKey(keys: readonly string[]): onRequestAsyncHookHandler {
  const matches = keyMatcher(keys);
  return async (request, reply) => {
    const key = bearer(request);
    if (key === undefined || !matches(key)) {
      reply.header('WWW-Authenticate', 'Bearer realm="worker-coordinator"');
      throw new HttpError('unauthorized', key === undefined ? undefined : 'The service key is not valid.');
    }
  };
}
