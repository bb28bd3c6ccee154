import sseModule, { type SSEPluginOptions } from '@fastify/sse';
import swagger from '@fastify/swagger';
import { ServerResponse, createServer, type IncomingMessage } from 'node:http';
import type { Socket } from 'node:net';
import Fastify, {
  type ConnectionError,
  type FastifyError,
  type FastifyPluginAsync,
  type FastifyReply,
  type FastifyRequest,
} from 'fastify';
import { validatorCompiler, type ZodTypeProvider } from 'fastify-type-provider-zod';
import type { Logger } from 'pino';
import type { EventFeedOptions } from '@cq/coordinator';
import type { ApiConfig } from './config.js';
import type { Resolver } from './webhooks/address-guard.js';
import { errorsPlugin } from './plugins/errors.js';
import { errorBody, httpErrors } from './http-errors.js';
import { jsonBodyParser } from './json-body.js';
import { openapiOptions } from './openapi.js';
import { requestSerializer } from './request-log.js';
import { authPlugin } from './plugins/auth.js';
import { metricsPlugin } from './plugins/metrics.js';
import { connectionsPlugin } from './plugins/connections.js';
import { loadSheddingPlugin } from './plugins/load-shedding.js';
import { servicesPlugin } from './plugins/services/index.js';
import { DASHBOARD_PATH, dashboardPlugin } from './dashboard/plugin.js';
import { operationRoutes } from './routes/operations.js';
import { sessionRoutes } from './routes/sessions.js';
import { SessionListReader } from './session-list.js';
import { hostRoutes } from './routes/hosts.js';
import { spawnRoutes } from './routes/spawn.js';
import { tokenRoutes } from './routes/tokens.js';
import { SSE_HEARTBEAT_MS, eventRoutes } from './routes/events.js';
import { logRoutes } from './routes/logs.js';
import { webhookRoutes } from './routes/webhooks.js';
import { accessRoutes } from './routes/access.js';
import { sessionProxyPlugin } from './proxy/plugin.js';
import { sessionExecPlugin } from './exec/plugin.js';
import type { SessionProxy } from './proxy/session-proxy.js';

/** A Host that names a session's origin, whatever the domain: `<port>-<session id>.<...>`. */
const SESSION_ORIGIN = /^\d{1,5}-[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\./i;

/** Largest request body accepted, bytes; larger ones get 413. */
export const BODY_LIMIT = 64 * 1024;

/** How long a request may take to arrive, headers and body, by default. */
export const REQUEST_TIMEOUT_MS = 10_000;

/**
 * Answers a request Node's HTTP server could not take (bad bytes in the path, oversized headers, headers
 * or body not in within the request timeout) in the API's error format, without a body for HEAD, and
 * closes the connection. A request that was already answered (a 401 sent before its slow body came) is
 * only cut off.
 */
function clientErrorHandler(requestTimeoutMs: number) {
  return (err: ConnectionError, socket: Socket): void => {
    const answering = (socket as Socket & { _httpMessage?: { headersSent?: boolean } })._httpMessage;
    if (!socket.writable || answering?.headersSent === true) {
      socket.destroy();
      return;
    }
    const [status, code, message] =
      err.code === 'HPE_HEADER_OVERFLOW'
        ? (['431 Request Header Fields Too Large', 'invalid_request', 'The request headers are too large.'] as const)
        : err.code === 'ERR_HTTP_REQUEST_TIMEOUT'
          ? ([
              '408 Request Timeout',
              'request_timeout',
              `The request did not arrive in full (headers and body) within ${requestTimeoutMs} ms; send it again, faster.`,
            ] as const)
          : ([
              '400 Bad Request',
              'invalid_request',
              'The request is not valid HTTP (check the path for unencoded characters).',
            ] as const);
    const body = JSON.stringify(errorBody(code, message));
    // Node hands over the raw bytes as a Buffer (Fastify's typings say {type, data}).
    const raw = err.rawPacket as unknown;
    const bytes = Buffer.isBuffer(raw) ? raw : Buffer.from((raw as { data?: number[] } | undefined)?.data ?? []);
    const head = bytes.subarray(0, 5).toString('latin1') === 'HEAD ';
    socket.end(
      `HTTP/1.1 ${status}\r\nContent-Type: application/json; charset=utf-8\r\n` +
        `Content-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${head ? '' : body}`,
    );
  };
}

/**
 * Fastify's own refusals before routing, in the API's error format, never quoting the path: a malformed
 * percent-encoding (400), a path parameter over the router's 256 characters (414).
 */
function frameworkErrors(err: FastifyError, _request: FastifyRequest, reply: FastifyReply): void {
  if (err.code === 'FST_ERR_BAD_URL')
    void reply
      .code(400)
      .send(errorBody('invalid_request', 'The path is not valid: a percent-encoding in it is malformed.'));
  else if (err.code === 'FST_ERR_MAX_PARAM_LENGTH')
    void reply.code(414).send(errorBody('uri_too_long', httpErrors.uri_too_long.message));
  else {
    reply.log.error({ err }, 'unexpected framework error');
    void reply.code(500).send(errorBody('internal', httpErrors.internal.message));
  }
}

/** Options of {@link buildApp}. */
export interface BuildAppOptions {
  config: ApiConfig;
  logger: Logger;
  /** Run the sweeper. @defaultValue true */
  sweep?: boolean;
  /** Collect Node's default process metrics. @defaultValue true */
  defaultMetrics?: boolean;
  /**
   * Least time between two reads of Redis for the `/metrics` gauges, ms (tests lengthen it).
   * @defaultValue `METRICS_READ_EVERY_MS` (5000: `redis-gauges.ts`)
   */
  metricsReadEveryMs?: number;
  /** Options of the event feed behind the SSE routes (tests bound its reader queue). */
  eventFeed?: EventFeedOptions;
  /**
   * How long a request may take to arrive, ms: its headers within it (else 408, or the connection is
   * closed when not even a request line came), its body too (else 408). Tests shorten it.
   * @defaultValue {@link REQUEST_TIMEOUT_MS}
   */
  requestTimeoutMs?: number;
  /**
   * Name resolution of webhook hosts, at creation and at every delivery attempt (tests make a name
   * resolve elsewhere between the two).
   * @defaultValue `resolveHost` (c-ares, bounded in time: `webhooks/host-resolver.ts`)
   */
  webhookResolve?: Resolver;
  /**
   * Live sessions the dashboard's stop-matching confirmation examines at most (tests lower it).
   * @defaultValue `MATCHING_MAX_EXAMINED` (10,000: `dashboard/actions.ts`)
   */
  matchingMaxExamined?: number;
}

// From ESM the default import is the package's module.exports: the plugin wrapped by fastify-plugin, so
// its decorators reach every route. Its typings describe the unwrapped `.default` instead.
const sse = sseModule as unknown as FastifyPluginAsync<SSEPluginOptions>;

/** Builds the API (not yet listening). Close it with `app.close()`: that also closes its Redis clients. */
export async function buildApp(options: BuildAppOptions) {
  const requestTimeoutMs = options.requestTimeoutMs ?? REQUEST_TIMEOUT_MS;
  // One HTTP server for the API and the session proxy: a request (or upgrade) whose Host names a session's
  // origin goes to the proxy (proxy/session-proxy.ts), every other one to the API. Node's request timeout
  // is off on it (a large upload to a session may take longer); the API bounds its own bodies (below).
  const proxied: { proxy?: SessionProxy | undefined } = {};
  const timedOut = clientErrorHandler(requestTimeoutMs);
  const app = Fastify({
    serverFactory: (handler) => {
      const server = createServer(
        {
          headersTimeout: requestTimeoutMs,
          requestTimeout: 0,
          connectionsCheckingInterval: Math.max(10, Math.min(1000, Math.floor(requestTimeoutMs / 4))),
        },
        (request: IncomingMessage, response: ServerResponse) => {
          const { proxy } = proxied;
          if (proxy?.isSessionHost(request.headers.host) === true) proxy.handle(request, response);
          else handler(request, response);
        },
      );
      server.setTimeout(0);
      if (options.config.proxy !== undefined)
        server.on('upgrade', (request: IncomingMessage, socket: Socket, head: Buffer) => {
          const { proxy } = proxied;
          if (proxy?.isSessionHost(request.headers.host) === true) {
            proxy.upgrade(request, socket, head);
            return;
          }
          // The API itself takes no upgrade (an h2c offer, say): the request is answered as the plain
          // request it also is, and its connection closed after the answer.
          socket.on('error', () => {});
          if (head.length > 0) socket.unshift(head);
          const response = new ServerResponse(request);
          response.shouldKeepAlive = false;
          response.assignSocket(socket);
          response.once('finish', () => socket.end());
          handler(request, response);
        });
      return server;
    },
    // Request log lines never hold a credential a client put in the query string (request-log.ts).
    loggerInstance: options.logger.child({}, { serializers: { req: requestSerializer } }),
    bodyLimit: BODY_LIMIT,
    // Answered in our format by the hook below.
    return503OnClosing: false,
    forceCloseConnections: 'idle',
    routerOptions: { maxParamLength: 256 },
    clientErrorHandler: clientErrorHandler(requestTimeoutMs),
    frameworkErrors,
    trustProxy: options.config.trustProxy,
  }).withTypeProvider<ZodTypeProvider>();
  app.setValidatorCompiler(validatorCompiler);
  // While closing, requests that still come (on a kept-alive connection) are refused in our format.
  let closing = false;
  app.addHook('preClose', async () => {
    closing = true;
  });
  // A slow client holds a connection at most `requestTimeoutMs` before it has sent its whole request: its
  // headers by Node's headers timeout, its body by this bound (answered 408 as Node's own would be).
  app.addHook('onRequest', (request, _reply, done) => {
    // Only a request with a body still to come, on a connection (the dashboard's in-process calls have
    // none). The session proxy's /ports/ route streams bodies to the session, bounded by the session.
    const socket = request.raw.socket as Socket | undefined;
    const hasBody =
      request.headers['transfer-encoding'] !== undefined || Number(request.headers['content-length'] ?? 0) > 0;
    if (
      !hasBody ||
      request.raw.complete ||
      socket === undefined ||
      typeof socket.destroy !== 'function' ||
      request.routeOptions.url?.includes('/ports/') === true
    ) {
      done();
      return;
    }
    const timer = setTimeout(() => {
      if (!request.raw.complete)
        timedOut(Object.assign(new Error('request timeout'), { code: 'ERR_HTTP_REQUEST_TIMEOUT' }) as never, socket);
    }, requestTimeoutMs);
    timer.unref();
    request.raw.once('end', () => clearTimeout(timer));
    request.raw.once('close', () => clearTimeout(timer));
    done();
  });
  app.addHook('onRequest', async (_request, reply) => {
    if (closing)
      await reply
        .code(503)
        .header('Connection', 'close')
        .header('Retry-After', '1')
        .send(errorBody('unavailable', 'The API is shutting down; retry (on another instance).'));
  });
  // Without PROXY_SECRET, a request for a session's origin (`<port>-<sessionId>.<domain>`) is told why
  // nothing serves it, rather than answered as if it were for the API.
  if (options.config.proxy === undefined)
    app.addHook('onRequest', async (request, reply) => {
      if (SESSION_ORIGIN.test(request.headers.host ?? ''))
        await reply.code(503).send(errorBody('proxy_not_configured', httpErrors.proxy_not_configured.message));
    });
  // Answers are built to their schemas by the routes (and checked by the tests), so they are written with
  // JSON.stringify: parsing every answer through zod again cost the hot paths a third of their throughput.
  app.setSerializerCompiler(() => (data) => JSON.stringify(data));
  // Keys and scopes, checked for every route before its body is read; the route table with each scope.
  await app.register(authPlugin, { keys: options.config.keys });
  // JSON bodies: nesting counted as the bytes arrive (400 beyond MAX_BODY_DEPTH, before any parsing),
  // `__proto__` and `constructor` keys refused, parse errors without the body's text; an empty body
  // (curl -H 'content-type: application/json' -X DELETE ...) is no body at all.
  // Every other type (text/plain included, which Fastify parses by default) is 415 unsupported_media_type.
  app.removeAllContentTypeParsers();
  app.addContentTypeParser('application/json', jsonBodyParser({ bodyLimit: BODY_LIMIT }));

  await app.register(metricsPlugin, {
    defaultMetrics: options.defaultMetrics ?? true,
    ...(options.metricsReadEveryMs === undefined ? {} : { redisReadEveryMs: options.metricsReadEveryMs }),
  });
  await app.register(connectionsPlugin, {
    maxConnections: options.config.maxConnections,
    keepAliveTimeoutMs: options.config.keepAliveTimeoutMs,
  });
  // Load shedding that looks at the process, not at who asks (see docs/http-api.md, "Load and abuse").
  if (options.config.maxEventLoopDelayMs > 0)
    await app.register(loadSheddingPlugin, { maxEventLoopDelayMs: options.config.maxEventLoopDelayMs });
  await app.register(errorsPlugin);
  await app.register(servicesPlugin, {
    config: options.config,
    sweep: options.sweep ?? true,
    ...(options.eventFeed === undefined ? {} : { eventFeed: options.eventFeed }),
    ...(options.webhookResolve === undefined ? {} : { webhookResolve: options.webhookResolve }),
  });
  // The document at /openapi.json: operationIds, tags, named schemas, SSE events and webhooks (openapi.ts).
  await app.register(swagger, openapiOptions);
  // Server-sent events: data is written as the routes serialized it (once per event, for every reader).
  await app.register(sse, {
    heartbeatInterval: SSE_HEARTBEAT_MS,
    serializer: (data: unknown) => (typeof data === 'string' ? data : JSON.stringify(data)),
  });
  await app.register(operationRoutes);
  await app.register(tokenRoutes);
  await app.register(spawnRoutes);
  // The session list's one reader (its filter, signed cursors and view: session-list.ts), for GET /v1/sessions
  // and the dashboard's live table alike.
  const sessionList = new SessionListReader(app.coordinator.sessions);
  await app.register(sessionRoutes, { sessionList });
  await app.register(hostRoutes);
  await app.register(eventRoutes);
  await app.register(logRoutes);
  await app.register(webhookRoutes);
  await app.register(accessRoutes);
  // The session proxy: POST /v1/sessions/{id}/connect, the /ports/ route, and the proxy the server above
  // hands session origins to.
  await app.register(sessionProxyPlugin, { config: options.config, headersTimeoutMs: requestTimeoutMs });
  await app.register(sessionExecPlugin, { config: options.config });
  proxied.proxy = app.sessionProxy;
  await app.register(dashboardPlugin, {
    prefix: DASHBOARD_PATH,
    sessionList,
    ...(options.matchingMaxExamined === undefined ? {} : { matchingMaxExamined: options.matchingMaxExamined }),
  });
  return app;
}

/** The built API. */
export type ApiApp = Awaited<ReturnType<typeof buildApp>>;
