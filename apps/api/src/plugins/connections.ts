import type { Socket } from 'node:net';
import type { FastifyInstance } from 'fastify';
import fp from 'fastify-plugin';
import { Counter, Gauge } from 'prom-client';
import { errorBody } from '../http-errors.js';

/** Options of {@link connectionsPlugin}. */
export interface ConnectionsOptions {
  /** Most client connections open at once (the server closes any over it at once). */
  maxConnections: number;
  /** How long a connection may stay idle after an answer, ms. */
  keepAliveTimeoutMs: number;
  /** Least time between two warnings about refused connections, ms. @defaultValue 10000 */
  warnEveryMs?: number;
}

/** Refused connections whose answer may still be read at once; beyond it one is closed without an answer. */
const MAX_REFUSING = 32;

/** How long a refused connection is kept for its client to read the answer, ms. */
const REFUSAL_LINGER_MS = 1000;

const refusalBody = JSON.stringify(
  errorBody('unavailable', 'The API has as many connections open as it takes (MAX_CONNECTIONS); retry shortly.'),
);

/** The whole answer on a connection over the bound, written before the request is read. */
const REFUSAL =
  'HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json; charset=utf-8\r\nRetry-After: 1\r\n' +
  `Connection: close\r\nContent-Length: ${Buffer.byteLength(refusalBody)}\r\n\r\n${refusalBody}`;

/** Statuses after which the connection is closed: the client sent nothing the API could act on. */
const CLOSE_AFTER = new Set([400, 401, 404, 405, 408, 413, 414, 415, 431]);

/**
 * Keeps the descriptors of the process out of clients' reach, so that no number of connections makes
 * the API exit or stop answering for good:
 * - at most `maxConnections` client connections at once (below the open-file limit by a reserve, see
 *   connection-limits.ts); one over the bound is answered `503 unavailable` with `Retry-After: 1` before
 *   its request is read, and closed (kept at most a second for its client to read that, at most
 *   {@link MAX_REFUSING} at once; beyond, closed at once). Node's own `maxConnections` closes such a
 *   connection without a word, and a `fetch` whose connection is closed so waits for ever;
 * - an answer to a request that had no valid key or no route (401, 404, ...) closes its connection, and
 *   any other connection is kept idle only `keepAliveTimeoutMs` (Fastify's default is 72 s);
 * - a connection that sends nothing is closed by Node's headers timeout (the request timeout, app.ts);
 * - a failed `accept` (`EMFILE`, `ENFILE`: descriptors taken by something else) is logged and counted,
 *   never thrown: libuv closes the pending connection and the server goes on listening.
 * Refusals are counted (`cq_http_connections_dropped_total`) and logged at most once per `warnEveryMs`.
 */
export const connectionsPlugin = fp(
  async (app: FastifyInstance, options: ConnectionsOptions) => {
    const server = app.server;
    server.keepAliveTimeout = options.keepAliveTimeoutMs;
    const warnEveryMs = options.warnEveryMs ?? 10_000;

    const { registry } = app.metrics;
    const dropped = new Counter({
      name: 'cq_http_connections_dropped_total',
      help:
        'Client connections refused on arrival: over MAX_CONNECTIONS (reason max_connections, answered 503), ' +
        'or not accepted (reason accept_error: EMFILE, ...)',
      labelNames: ['reason'],
      registers: [registry],
    });
    new Gauge({
      name: 'cq_http_connections',
      help: 'Client connections open now (at most MAX_CONNECTIONS)',
      registers: [registry],
      collect() {
        this.set(open);
      },
    });
    new Gauge({
      name: 'cq_http_max_connections',
      help: 'MAX_CONNECTIONS: the most client connections open at once',
      registers: [registry],
    }).set(options.maxConnections);

    // One warning per interval, however many refusals: a flood must not become a flood of log lines.
    const unreported = { max_connections: 0, accept_error: 0 };
    let lastWarnAt = -Infinity;
    let lastError: NodeJS.ErrnoException | undefined;
    const refused = (reason: keyof typeof unreported): void => {
      dropped.inc({ reason });
      unreported[reason]++;
      const now = performance.now();
      if (now - lastWarnAt < warnEveryMs) return;
      lastWarnAt = now;
      app.log.warn(
        {
          overMaxConnections: unreported.max_connections,
          acceptErrors: unreported.accept_error,
          maxConnections: options.maxConnections,
          ...(lastError === undefined ? {} : { err: lastError }),
        },
        'client connections refused (counted in cq_http_connections_dropped_total)',
      );
      unreported.max_connections = 0;
      unreported.accept_error = 0;
      lastError = undefined;
    };
    // Every accepted connection goes through here before Node's HTTP server sees it: the HTTP server's own
    // listener is called for those within the bound.
    let open = 0;
    let refusing = 0;
    const [serveHttp] = server.listeners('connection') as Array<(socket: Socket) => void>;
    if (serveHttp === undefined) throw new Error('the HTTP server has no connection listener to bound');
    server.removeListener('connection', serveHttp);
    server.on('connection', (socket: Socket) => {
      if (open < options.maxConnections) {
        open++;
        socket.once('close', () => open--);
        serveHttp.call(server, socket);
        return;
      }
      refused('max_connections');
      socket.on('error', () => {});
      if (refusing >= MAX_REFUSING) {
        socket.destroy();
        return;
      }
      refusing++;
      socket.once('close', () => refusing--);
      // What the client sends meanwhile is read and dropped: closing with unread bytes would reset the
      // connection, and the client would lose the answer.
      socket.resume();
      socket.setTimeout(REFUSAL_LINGER_MS, () => socket.destroy());
      socket.end(REFUSAL);
    });
    // Listening errors are Fastify's (it rejects listen()); once it listens, an error is a failed accept.
    app.addHook('onListen', async () => {
      server.on('error', (err: NodeJS.ErrnoException) => {
        lastError = err;
        refused('accept_error');
      });
    });

    // A callback hook, not an async one: it runs on every answer.
    app.addHook('onSend', (_request, reply, payload, done) => {
      if (CLOSE_AFTER.has(reply.statusCode) && !reply.hasHeader('Connection')) reply.header('Connection', 'close');
      done(null, payload);
    });
  },
  { name: 'connections', fastify: '5.x', dependencies: ['metrics'] },
);
