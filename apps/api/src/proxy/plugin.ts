// The session proxy in the API (the contract's "The session proxy"): the connect route, the API-origin
// route `/v1/sessions/{id}/ports/{port}/*` for programs without wildcard DNS, and the proxy itself, to
// which app.ts's server hands every request and upgrade whose Host names a session origin.
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { Logger } from 'pino';
import fp from 'fastify-plugin';
import replyFrom from '@fastify/reply-from';
import { z } from 'zod';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { connectRequest, connectResponse, errorSchema, noQuery, sessionIdParams, sessionIdSchema } from '@cq/contract';
import type { ApiConfig } from '../config.js';
import { HttpError } from '../http-errors.js';
import { audit } from '../plugins/auth.js';
import { issueConnectToken } from './connect-token.js';
import { TOKEN_PARAM } from './headers.js';
import { originOf } from './origin.js';
import { ProxyRefusal, SessionProxy } from './session-proxy.js';

declare module 'fastify' {
  interface FastifyInstance {
    /** The session proxy; undefined without PROXY_SECRET. */
    sessionProxy: SessionProxy | undefined;
  }
}

/** The /ports/ route's path: a session id, a port, and the rest of the path (the session's). */
const portParams = z
  .object({ sessionId: sessionIdSchema, port: z.coerce.number().int().min(1).max(65_535), '*': z.string() })
  .strict();

/** Longest a connect token lives, ms (and by default: until the session ends, at most this). */
export const CONNECT_TTL_MAX_MS = 24 * 3_600_000;

export function notConfigured(): HttpError {
  return new HttpError(
    'proxy_not_configured',
    'The session proxy is off: set PROXY_SECRET (at least 32 characters, the same on the API and every worker host).',
  );
}

export const sessionProxyPlugin = fp(
  async (root: FastifyInstance, options: { config: ApiConfig; headersTimeoutMs: number }) => {
    const app = root.withTypeProvider<ZodTypeProvider>();
    const config = options.config.proxy;
    const proxy =
      config === undefined
        ? undefined
        : new SessionProxy({
            config,
            coordinator: app.coordinator,
            logger: app.log as unknown as Logger,
            headersTimeoutMs: options.headersTimeoutMs,
            trustProxy: options.config.trustProxy,
            listeningPort: () => {
              const address = root.server.address();
              return address !== null && typeof address === 'object' ? address.port : options.config.port;
            },
          });
    await proxy?.start();
    app.decorate('sessionProxy', proxy);
    app.addHook('onClose', async () => proxy?.close());

    app.post(
      '/v1/sessions/:sessionId/connect',
      {
        config: { scope: 'sessions:connect' },
        schema: {
          summary: 'A URL that opens a port of a live session in a browser (and the token programs send)',
          description:
            "`url` opens the port on the session's own origin; its token (query `cq_connect`) is exchanged on " +
            'first use for a cookie of that origin alone. Programs send the token as `CQ-Connect-Token`. ' +
            '404 no_session when the session is not live; 503 proxy_not_configured without PROXY_SECRET.',
          params: sessionIdParams,
          querystring: noQuery,
          body: connectRequest,
          response: { 201: connectResponse, 400: errorSchema, 404: errorSchema, 503: errorSchema },
        },
      },
      async (request, reply) => {
        if (proxy === undefined || config === undefined) throw notConfigured();
        const { sessionId } = request.params;
        const found = await app.coordinator.sessions.byId(sessionId);
        if (found === undefined || !found.live) throw new HttpError('no_session', `Session ${sessionId} is not live.`);
        const { session } = found;
        const port = request.body?.port ?? session.port;
        if (port === undefined)
          throw new HttpError(
            'invalid_request',
            'The session announced no port (its readiness endpoint): name the port to open ("port").',
          );
        const now = Date.now();
        const ends = session.deadline ?? session.createdAt + session.lifetimeMs;
        const expiresAt = Math.min(
          now + (request.body?.ttlMs ?? CONNECT_TTL_MAX_MS),
          now + CONNECT_TTL_MAX_MS,
          Math.max(ends, now + 1000),
        );
        const token = issueConnectToken(proxy.tokenKey, { sessionId, port, expiresAt });
        audit(request, 'session.connect', session.userId, { userId: session.userId, sessionId, port });
        return reply.code(201).send({
          url: `${originOf(sessionId, port, proxy.domain, config.tls)}/?${TOKEN_PARAM}=${token}`,
          token,
          port,
          expiresAt: new Date(expiresAt).toISOString(),
        });
      },
    );

    // For programs without wildcard DNS: the session's port under the API's origin, with an API key.
    await app.register(async (scope) => {
      scope.removeAllContentTypeParsers();
      scope.addContentTypeParser('*', (_request, payload, done) => done(null, payload));
      if (proxy !== undefined) await scope.register(replyFrom, { undici: proxy.agent, disableRequestLogging: true });
      const handler = async (request: FastifyRequest, reply: FastifyReply): Promise<FastifyReply> => {
        if (proxy === undefined) throw notConfigured();
        const { sessionId, port } = request.params as { sessionId: string; port: number };
        // A page served here cannot act as the API's origin.
        reply.header('content-security-policy', 'sandbox');
        const prefix = `/v1/sessions/${sessionId}/ports/${port}`;
        try {
          return await proxy.forward(
            request,
            reply,
            { sessionId, port, consumedAuthorization: true, onApiOrigin: true },
            prefix,
          );
        } catch (err) {
          if (err instanceof ProxyRefusal) return proxy.refuse(reply, err);
          throw err;
        }
      };
      // A pass-through: its query and body are the session's, so it is left out of the OpenAPI document
      // (docs/http-api.md describes it); its path parameters are checked as every route's are.
      scope.route({
        method: ['DELETE', 'GET', 'PATCH', 'POST', 'PUT'],
        url: '/v1/sessions/:sessionId/ports/:port/*',
        config: { scope: 'sessions:connect' },
        schema: { hide: true, params: portParams },
        handler,
      });
    });
  },
  { name: 'session-proxy', dependencies: ['services'] },
);
