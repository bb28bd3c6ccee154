import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { sendError } from '../http-errors.js';
import { setRateLimitHeaders } from '../rate-limit-headers.js';
import { DEFAULT_POOL, errorSchema, issueTokenBody, noQuery, tokenIssued } from '@cq/contract';
import { iso } from '../iso.js';
import { audit } from '../plugins/auth.js';

/** `POST /v1/tokens`: issue a one-time spawn token for a user (service key). */
export const tokenRoutes: FastifyPluginAsyncZod = async (app) => {
  const policy = { name: 'tokens', limit: app.config.policy.tokenLimit, windowMs: app.config.policy.tokenWindowMs };
  app.post(
    '/v1/tokens',
    {
      config: { scope: 'tokens:write' },
      schema: {
        summary: 'Issue a one-time spawn token for a user',
        security: [{ serviceKey: [] }],
        querystring: noQuery,
        body: issueTokenBody,
        response: { 201: tokenIssued, 400: errorSchema, 401: errorSchema, 429: errorSchema, 503: errorSchema },
      },
    },
    async (request, reply) => {
      // The answer carries a credential: no cache (browser, proxy) may keep it.
      reply.header('Cache-Control', 'no-store');
      const { userId, metadata, ttlMs, lifetimeMs, idleTimeoutMs, labels, pool } = request.body;
      const outcome = await app.coordinator.tokens.issue(userId, {
        ...(metadata === undefined ? {} : { metadata }),
        ...(labels === undefined ? {} : { labels }),
        ...(pool === undefined ? {} : { pool }),
        ...(ttlMs === undefined ? {} : { ttlMs }),
        ...(lifetimeMs === undefined ? {} : { lifetimeMs }),
        ...(idleTimeoutMs === undefined ? {} : { idleTimeoutMs }),
      });
      setRateLimitHeaders(reply, policy, outcome.rate);
      if (outcome.outcome === 'throttled') {
        app.metrics.throttled.inc({ route: '/v1/tokens' });
        app.stats.count('tokens_throttled');
        return sendError(
          reply,
          'throttled',
          `Too many tokens for this user: at most ${policy.limit} per ${policy.windowMs} ms.`,
          {
            retryAfterMs: outcome.rate.retryAfterMs,
          },
        );
      }
      app.metrics.tokensIssued.inc();
      app.stats.count('tokens_issued');
      // What the token carries, but its metadata's values (the caller's own data, which may hold anything).
      audit(request, 'token.issue', userId, {
        userId,
        pool: pool ?? DEFAULT_POOL,
        ...(labels === undefined ? {} : { labels }),
        ...(metadata === undefined ? {} : { metadataKeys: Object.keys(metadata) }),
        ...(ttlMs === undefined ? {} : { ttlMs }),
        ...(lifetimeMs === undefined ? {} : { lifetimeMs }),
        ...(idleTimeoutMs === undefined ? {} : { idleTimeoutMs }),
      });
      return reply.code(201).send({ token: outcome.token, userId, expiresAt: iso(outcome.expiresAt) });
    },
  );
};
