// The API's side of the session proxy (the contract's "The session proxy"). Requests for a session's
// origin (`<port>-<sessionId>.<PROXY_DOMAIN>`) are served by a Fastify instance of their own, on an
// HTTP server of their own (its own timeouts: a large upload may take longer than an API request may),
// fed the connections whose first request names a session's origin (see dispatch.ts). Requests go
// through @fastify/reply-from (undici underneath: streaming both ways with backpressure, keep-alive,
// hop-by-hop headers handled) to an undici Agent whose connections are tunnels to the session's host
// (tunnel.ts); WebSocket upgrades are tunnelled as bytes once authorised.
import { STATUS_CODES, createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import replyFrom from '@fastify/reply-from';
import { UnavailableError, type Coordinator } from '@cq/coordinator';
import Fastify, { type FastifyReply, type FastifyRequest } from 'fastify';
import type { Logger } from 'pino';
import { Agent } from 'undici';
import type { ProxyConfig } from '../config.js';
import { errorBody, type HttpErrorCode, httpErrors } from '../http-errors.js';
import { ProxyActivity } from './activity.js';
import { connectTokenKey, readConnectToken, type ConnectGrant } from './connect-token.js';
import { PROXY_COOKIE, TOKEN_HEADER, TOKEN_PARAM, cookieValue, sessionHeaders, withoutTokenParam } from './headers.js';
import { sessionOrigin } from './origin.js';
import { ProxyTargets, type ProxyTarget } from './targets.js';
import { TunnelError, openTunnel } from './tunnel.js';
import { readUntil, ticketKey } from '@cq/service-kit';

/** A refusal of the proxy: status, code, message, extra headers. */
export class ProxyRefusal extends Error {
  readonly code: HttpErrorCode;
  readonly headers: Record<string, string>;
  constructor(code: HttpErrorCode, message?: string, headers: Record<string, string> = {}) {
    super(message ?? httpErrors[code].message);
    this.code = code;
    this.headers = headers;
  }
  get status(): number {
    return httpErrors[this.code].status;
  }
}

/** A session and port to forward to, and what the session is told of the request. */
export interface ForwardTarget {
  readonly sessionId: string;
  readonly port: number;
  /** The request's Authorization was an API key of ours: it does not reach the session. */
  readonly consumedAuthorization: boolean;
  /**
   * Served on the API's own origin (the /ports/ route): the answer keeps `Content-Security-Policy: sandbox`
   * whatever the session sends, and no cookie of the session is set on the API's origin.
   */
  readonly onApiOrigin?: boolean;
}

export interface SessionProxyOptions {
  readonly config: ProxyConfig;
  readonly coordinator: Coordinator;
  readonly logger: Logger;
  /** How long a request's headers may take to arrive, ms (as the API's). */
  readonly headersTimeoutMs: number;
  /** Trust X-Forwarded-For from a proxy in front (TRUST_PROXY). */
  readonly trustProxy: boolean;
  /** The port the API listens on (0 until it does). */
  readonly listeningPort: () => number;
}

/** Where an upstream origin names the session and port (undici's pool key): `http://<sessionId>.session:<port>`. */
const upstreamOf = (sessionId: string, port: number): string => `http://${sessionId}.session:${port}`;

export class SessionProxy {
  readonly #options: SessionProxyOptions;
  readonly #tokenKey: Buffer;
  readonly #ticketKey: Buffer;
  readonly #targets: ProxyTargets;
  readonly #activity: ProxyActivity;
  readonly #agent: Agent;
  /** Open proxied connections (requests in flight, WebSockets) by session. */
  readonly #open = new Map<string, number>();
  /** Open WebSocket tunnels by session, closed when a session is found gone. */
  readonly #sockets = new Map<string, Set<Socket>>();
  #app: { close(): PromiseLike<unknown> } | undefined;
  /** The proxy's Fastify request handler (its server never listens: app.ts's server hands requests over). */
  #handler: ((request: IncomingMessage, response: ServerResponse) => void) | undefined;
  #server: Server | undefined;

  constructor(options: SessionProxyOptions) {
    this.#options = options;
    this.#tokenKey = connectTokenKey(options.config.secret);
    this.#ticketKey = ticketKey(options.config.secret);
    this.#targets = new ProxyTargets(options.coordinator);
    this.#activity = new ProxyActivity(options.coordinator, options.logger);
    this.#agent = new Agent({
      // Tunnels are kept alive between requests, as many per session port as requests run at once.
      connections: options.config.maxConnections,
      keepAliveTimeout: 4000,
      // No bound on a response's headers or body: a session's server-sent events may idle for hours.
      headersTimeout: 0,
      bodyTimeout: 0,
      connect: (opts, callback) => {
        const sessionId = String(opts.hostname).split('.')[0]!;
        const port = Number(opts.port);
        this.#tunnel(sessionId, port).then(
          (socket) => callback(null, socket),
          (err: Error) => callback(err, null),
        );
      },
    });
  }

  /** The undici Agent whose connections are tunnels to sessions (for reply-from). */
  get agent(): Agent {
    return this.#agent;
  }

  get tokenKey(): Buffer {
    return this.#tokenKey;
  }

  /** The domain session origins are under: PROXY_DOMAIN, else `localhost:<the API's port>`. */
  get domain(): string {
    return this.#options.config.domain ?? `localhost:${this.#options.listeningPort()}`;
  }

  /** Whether a Host header names a session's origin. */
  isSessionHost(host: string | undefined): boolean {
    return sessionOrigin(host, this.domain) !== undefined;
  }

  async start(): Promise<void> {
    const app = Fastify({
      // Requests through the proxy are not logged one by one (a page's assets would flood the log: its
      // request lines are at info), and never with their query (a connect token may be in it).
      loggerInstance: this.#options.logger.child(
        { proxy: true },
        { level: this.#options.logger.levelVal > 40 ? this.#options.logger.level : 'warn' },
      ),
      serverFactory: (handler) => {
        this.#handler = handler;
        this.#server = createServer();
        return this.#server;
      },
      trustProxy: this.#options.trustProxy,
    });
    // Bodies pass through as streams, whatever their type.
    app.removeAllContentTypeParsers();
    app.addContentTypeParser('*', (_request, payload, done) => done(null, payload));
    await app.register(replyFrom, { undici: this.#agent, disableRequestLogging: true });
    app.setErrorHandler((err, request, reply) => {
      if (err instanceof ProxyRefusal) return this.refuse(reply, err);
      if (err instanceof UnavailableError)
        return this.refuse(reply, new ProxyRefusal('unavailable', undefined, { 'retry-after': '1' }));
      const status = (err as { statusCode?: unknown }).statusCode;
      if (typeof status === 'number' && status >= 400 && status < 500)
        return this.refuse(reply, new ProxyRefusal('invalid_request', (err as Error).message));
      request.log.error({ err }, 'session proxy failed');
      return reply.code(500).send(errorBody('internal', httpErrors.internal.message));
    });
    app.route({
      method: ['DELETE', 'GET', 'PATCH', 'POST', 'PUT', 'OPTIONS'],
      url: '/*',
      handler: (request, reply) => this.#onOriginRequest(request, reply),
    });
    await app.ready();
    this.#app = app;
  }

  /** Serves a request whose Host names a session origin. */
  handle(request: IncomingMessage, response: ServerResponse): void {
    if (this.#handler === undefined) throw new Error('SessionProxy.start() first');
    this.#handler(request, response);
  }

  /** Serves an upgrade (a WebSocket) whose Host names a session origin; any other is refused. */
  upgrade(request: IncomingMessage, socket: Socket, head: Buffer): void {
    void this.#upgrade(request, socket, head);
  }

  async close(): Promise<void> {
    this.#activity.close();
    for (const set of this.#sockets.values()) for (const socket of set) socket.destroy();
    await this.#app?.close();
    await this.#agent.destroy();
  }

  /**
   * Answers a refusal and closes the connection: a refused client sent nothing the session gets, and a
   * body it is still sending (slowly, without end) must not hold the connection (Node's own request
   * timeout is off on this server).
   */
  refuse(reply: FastifyReply, refusal: ProxyRefusal): FastifyReply {
    const raw = reply.request.raw;
    reply.raw.once('finish', () => {
      if (!raw.complete) raw.socket.destroy();
    });
    return reply
      .code(refusal.status)
      .headers({ ...refusal.headers, connection: 'close' })
      .send(errorBody(refusal.code, refusal.message));
  }

  /**
   * The grant a session-origin request carries (header, query or cookie), checked against its origin. A
   * cookie is the browser's, sent whichever page asks: for a WebSocket or a method that changes something,
   * the request must come from the session origin's own page (its `Origin`), so that another session's
   * page, a sibling origin of the same site, cannot act with this one's cookie.
   */
  #authorize(
    headers: IncomingMessage['headers'],
    url: string,
    origin: { sessionId: string; port: number },
    method: string,
    upgrade = false,
  ) {
    const header = headers[TOKEN_HEADER];
    const query = url.indexOf('?') === -1 ? '' : url.slice(url.indexOf('?') + 1);
    const fromQuery = new URLSearchParams(query).get(TOKEN_PARAM) ?? undefined;
    const fromCookie = cookieValue(headers.cookie, PROXY_COOKIE);
    const token = (typeof header === 'string' ? header : undefined) ?? fromQuery ?? fromCookie;
    if (
      token === fromCookie &&
      token !== undefined &&
      (upgrade || !['GET', 'HEAD', 'OPTIONS'].includes(method)) &&
      headers.origin !== undefined &&
      headers.origin !== `${this.#options.config.tls ? 'https' : 'http'}://${String(headers.host).toLowerCase()}`
    )
      throw new ProxyRefusal('forbidden', "Another origin's page may not use this session's cookie.");
    if (token === undefined)
      throw new ProxyRefusal(
        'unauthorized',
        `Open this session through a connect URL (POST /v1/sessions/${origin.sessionId}/connect), or send its token as CQ-Connect-Token.`,
      );
    const grant = readConnectToken(this.#tokenKey, token);
    if (grant === undefined)
      throw new ProxyRefusal(
        'unauthorized',
        'The connect token is not valid or has expired; ask for a new connect URL.',
      );
    if (grant.sessionId !== origin.sessionId || grant.port !== origin.port)
      throw new ProxyRefusal('forbidden', 'This connect token opens another session or port.');
    return { grant, fromQuery: fromQuery !== undefined && typeof header !== 'string', query };
  }

  async #onOriginRequest(request: FastifyRequest, reply: FastifyReply): Promise<FastifyReply> {
    const url = request.raw.url ?? '/';
    const origin = sessionOrigin(request.headers.host, this.domain);
    if (origin === undefined || !url.startsWith('/'))
      throw new ProxyRefusal(
        'invalid_request',
        'This connection serves session origins: send the request to the API on a connection of its own.',
        {
          connection: 'close',
        },
      );
    const { grant, fromQuery, query } = this.#authorize(request.headers, url, origin, request.method);
    if (fromQuery && (request.method === 'GET' || request.method === 'HEAD'))
      return this.#exchange(reply, grant, url, query);
    return this.forward(request, reply, { ...origin, consumedAuthorization: false });
  }

  /** The token of a connect URL becomes the origin's cookie, and the browser goes to the URL without it. */
  #exchange(reply: FastifyReply, grant: ConnectGrant, url: string, query: string): FastifyReply {
    const path = url.slice(0, url.indexOf('?'));
    const rest = withoutTokenParam(query);
    const maxAge = Math.max(1, Math.floor((grant.expiresAt - Date.now()) / 1000));
    const token = new URLSearchParams(query).get(TOKEN_PARAM)!;
    const cookie =
      `${PROXY_COOKIE}=${token}; Path=/; Max-Age=${maxAge}; HttpOnly; SameSite=Lax` +
      (this.#options.config.tls ? '; Secure' : '');
    return reply
      .code(302)
      .header('set-cookie', cookie)
      .header('cache-control', 'no-store')
      .header('referrer-policy', 'no-referrer')
      .header('location', rest === '' ? path : `${path}?${rest}`)
      .send();
  }

  /** The session's target, or the refusal that says why there is none. */
  async #target(sessionId: string): Promise<ProxyTarget & { kind: 'running' }> {
    const target = await this.#targets.lookup(sessionId);
    if (target.kind === 'gone') throw new ProxyRefusal('no_session', `Session ${sessionId} is not live.`);
    if (target.kind === 'starting') throw new ProxyRefusal('session_starting', undefined, { 'retry-after': '1' });
    if (target.kind === 'no_proxy')
      throw new ProxyRefusal(
        'host_unreachable',
        `The session's worker host (${target.workerId}) has no proxy listener: set PROXY_SECRET on it.`,
      );
    return target;
  }

  /** What the client is told of a tunnel the host refused or that could not be opened. */
  #tunnelRefusal(cause: TunnelError, sessionId: string): ProxyRefusal {
    const code =
      cause.refusal === 'unauthorized' || cause.refusal === 'unavailable' ? 'host_unreachable' : cause.refusal;
    if (cause.refusal === 'unauthorized')
      this.#options.logger.error('a worker host refused our ticket: PROXY_SECRET differs between the API and the host');
    const message =
      code === 'no_session'
        ? `Session ${sessionId} is not live.`
        : code === 'port_closed'
          ? httpErrors.port_closed.message
          : httpErrors.host_unreachable.message;
    return new ProxyRefusal(code, message);
  }

  /**
   * A connection to a new command inside the session (exec-frames.ts: the host has said OK; send the
   * request line next), counted among the session's proxied connections until it closes. Throws a
   * {@link ProxyRefusal} saying why there is none.
   */
  async openCommand(sessionId: string): Promise<{ socket: Socket; userId: string }> {
    const release = this.#hold(sessionId);
    try {
      const target = await this.#target(sessionId);
      const socket = await this.#tunnel(sessionId, 'exec');
      socket.once('close', release);
      this.#activity.touch(target.userId, sessionId);
      return { socket, userId: target.userId };
    } catch (err) {
      release();
      if (err instanceof TunnelError) throw this.#tunnelRefusal(err, sessionId);
      throw err;
    }
  }

  async #tunnel(sessionId: string, port: number | 'exec'): Promise<Socket> {
    const target = await this.#target(sessionId);
    try {
      return await openTunnel(this.#ticketKey, target.address, sessionId, port);
    } catch (err) {
      this.#targets.forget(sessionId);
      throw err;
    }
  }

  /** Counts a proxied connection of the session; refuses one over PROXY_MAX_CONNECTIONS. */
  #hold(sessionId: string): () => void {
    const open = this.#open.get(sessionId) ?? 0;
    if (open >= this.#options.config.maxConnections)
      throw new ProxyRefusal('proxy_busy', undefined, { 'retry-after': '1' });
    this.#open.set(sessionId, open + 1);
    let released = false;
    return () => {
      if (released) return;
      released = true;
      const left = (this.#open.get(sessionId) ?? 1) - 1;
      if (left <= 0) this.#open.delete(sessionId);
      else this.#open.set(sessionId, left);
    };
  }

  /** Forwards `request` to the session's port (session origins and the API's /ports/ route alike). */
  async forward(
    request: FastifyRequest,
    reply: FastifyReply,
    target: ForwardTarget,
    stripPrefix = '',
  ): Promise<FastifyReply> {
    // The slot is counted from now, and given back when the answer's connection closes, however early.
    const release = this.#hold(target.sessionId);
    reply.raw.once('close', release);
    if (reply.raw.destroyed) release();
    let found: ProxyTarget & { kind: 'running' };
    try {
      found = await this.#target(target.sessionId);
    } catch (err) {
      release();
      throw err;
    }
    this.#activity.touch(found.userId, target.sessionId);
    const url = request.raw.url ?? '/';
    const full = url.indexOf('?') === -1 ? url : url.slice(0, url.indexOf('?'));
    const path = full.slice(stripPrefix.length) || '/';
    const forwarding = {
      clientIp: request.ip,
      proto: this.#options.config.tls ? ('https' as const) : ('http' as const),
      host: request.headers.host ?? '',
      userId: found.userId,
      sessionId: target.sessionId,
      consumedAuthorization: target.consumedAuthorization,
    };
    return reply.from(path, {
      getUpstream: () => upstreamOf(target.sessionId, target.port),
      // The client's query, less a connect token.
      queryString: (_search: string | undefined, requestUrl: string) =>
        withoutTokenParam(requestUrl.includes('?') ? requestUrl.slice(requestUrl.indexOf('?') + 1) : ''),
      // reply-from's headers (the client's, less the hop-by-hop ones its Connection named), then ours.
      rewriteRequestHeaders: (_request, headers) => sessionHeaders(headers, forwarding),
      ...(target.onApiOrigin === true
        ? {
            rewriteHeaders: (headers: Record<string, unknown>) => {
              const { 'set-cookie': _cookie, ...rest } = headers;
              return { ...rest, 'content-security-policy': 'sandbox' };
            },
          }
        : {}),
      // A session's own 503 is its answer to pass on, never a reason to send it the request again.
      retryDelay: () => null,
      onError: (errorReply, { error }) =>
        void this.#onForwardError(errorReply as unknown as FastifyReply, target.sessionId, error),
    });
  }

  #onForwardError(reply: FastifyReply, sessionId: string, error: Error): void {
    this.#targets.forget(sessionId);
    let cause: unknown = error;
    while (
      cause instanceof Error &&
      !(cause instanceof TunnelError) &&
      !(cause instanceof ProxyRefusal) &&
      !(cause instanceof UnavailableError)
    )
      cause = (cause as Error & { cause?: unknown }).cause;
    if (reply.sent || reply.raw.headersSent) {
      reply.raw.destroy();
      return;
    }
    if (cause instanceof UnavailableError) {
      void this.refuse(reply, new ProxyRefusal('unavailable', undefined, { 'retry-after': '1' }));
      return;
    }
    // reply-from's own refusal of the request (a path it will not forward): the client's mistake.
    const status = (error as Error & { statusCode?: number }).statusCode;
    if (cause === undefined && status !== undefined && status >= 400 && status < 500) {
      void this.refuse(reply, new ProxyRefusal('invalid_request', error.message));
      return;
    }
    if (cause instanceof ProxyRefusal) {
      void this.refuse(reply, cause);
      return;
    }
    if (cause instanceof TunnelError) {
      void this.refuse(reply, this.#tunnelRefusal(cause, sessionId));
      return;
    }
    // The tunnel closed mid-request (the session ended, or its server closed the connection).
    void this.refuse(
      reply,
      new ProxyRefusal('host_unreachable', 'The connection to the session closed before it answered.'),
    );
  }

  async #upgrade(request: IncomingMessage, socket: Socket, head: Buffer): Promise<void> {
    socket.on('error', () => {});
    const refuse = (refusal: ProxyRefusal): void => {
      const body = JSON.stringify(errorBody(refusal.code, refusal.message));
      const extra = Object.entries(refusal.headers)
        .map(([k, v]) => `${k}: ${v}\r\n`)
        .join('');
      socket.end(
        `HTTP/1.1 ${refusal.status} ${STATUS_CODES[refusal.status] ?? 'Refused'}\r\n` +
          'Content-Type: application/json; charset=utf-8\r\n' +
          `${extra}Content-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`,
      );
    };
    try {
      const url = request.url ?? '/';
      const origin = sessionOrigin(request.headers.host, this.domain);
      if (origin === undefined)
        throw new ProxyRefusal('not_found', 'The API takes no WebSocket upgrade here.', { connection: 'close' });
      if (!url.startsWith('/')) throw new ProxyRefusal('invalid_request');
      this.#authorize(request.headers, url, origin, request.method ?? 'GET', true);
      await this.tunnelUpgrade(request, socket, head, { ...origin, consumedAuthorization: false }, url);
    } catch (err) {
      if (err instanceof ProxyRefusal) refuse(err);
      else if (err instanceof TunnelError)
        refuse(
          new ProxyRefusal(
            err.refusal === 'no_session' || err.refusal === 'port_closed' ? err.refusal : 'host_unreachable',
          ),
        );
      else {
        this.#options.logger.error({ err }, 'session proxy: upgrade failed');
        refuse(new ProxyRefusal('internal'));
      }
    }
  }

  /** Tunnels an authorised upgrade request to the session's port as bytes, both ways. */
  async tunnelUpgrade(
    request: IncomingMessage,
    socket: Socket,
    head: Buffer,
    target: ForwardTarget,
    url: string,
  ): Promise<void> {
    // The slot is counted from now; a client gone meanwhile gives it back (and the tunnel, if it came).
    const release = this.#hold(target.sessionId);
    let gone = socket.destroyed;
    socket.once('close', () => {
      gone = true;
      release();
    });
    let found: ProxyTarget & { kind: 'running' };
    let tunnel: Socket;
    try {
      found = await this.#target(target.sessionId);
      tunnel = await this.#tunnel(target.sessionId, target.port);
    } catch (err) {
      release();
      throw err;
    }
    if (gone) {
      tunnel.destroy();
      return;
    }
    this.#activity.touch(found.userId, target.sessionId);
    const headers = sessionHeaders(request.headers, {
      clientIp: socket.remoteAddress ?? '',
      proto: this.#options.config.tls ? 'https' : 'http',
      host: request.headers.host ?? '',
      userId: found.userId,
      sessionId: target.sessionId,
      consumedAuthorization: target.consumedAuthorization,
    });
    // The upgrade itself, which the hop-by-hop headers' removal took out.
    headers['connection'] = 'Upgrade';
    headers['upgrade'] = String(request.headers.upgrade ?? 'websocket');
    const q = url.indexOf('?');
    const rest = q === -1 ? '' : withoutTokenParam(url.slice(q + 1));
    const path = (q === -1 ? url : url.slice(0, q)) + (rest === '' ? '' : `?${rest}`);
    let lines = `${request.method ?? 'GET'} ${path} HTTP/1.1\r\n`;
    for (const [name, value] of Object.entries(headers))
      for (const one of Array.isArray(value) ? value : [value]) lines += `${name}: ${one}\r\n`;
    tunnel.on('error', () => {});
    let set = this.#sockets.get(target.sessionId);
    if (set === undefined) this.#sockets.set(target.sessionId, (set = new Set()));
    set.add(socket);
    const close = (): void => {
      release();
      set.delete(socket);
      if (set.size === 0 && this.#sockets.get(target.sessionId) === set) this.#sockets.delete(target.sessionId);
      socket.destroy();
      tunnel.destroy();
    };
    // A WebSocket has no half-closed state: either side's end (a cut connection, a close) ends the other,
    // after what was sent before it (a close frame) is written; both are gone within 5 s at most.
    for (const [side, other] of [
      [socket, tunnel],
      [tunnel, socket],
    ] as const) {
      side.once('end', () => {
        other.end();
        setTimeout(close, 5000).unref();
      });
      side.once('close', close);
    }
    tunnel.write(`${lines}\r\n`);
    // The client's bytes go on only once the session switched protocols: until then (and for good, when
    // it answered otherwise), they would be read as more HTTP requests, past the proxy's headers.
    let answer: Buffer;
    try {
      answer = await readUntil(tunnel, '\r\n\r\n', 16_384, 10_000, 'answer head');
    } catch {
      close();
      return;
    }
    socket.write(answer);
    if (!/^HTTP\/1\.[01] 101 /.test(answer.subarray(0, 16).toString('latin1'))) {
      // Its answer (and the body after it) reaches the client; nothing more reaches the session.
      tunnel.pipe(socket);
      tunnel.resume();
      return;
    }
    if (head.length > 0) tunnel.write(head);
    // Each message the client sends is activity (coalesced to a write a second).
    socket.on('data', () => this.#activity.touch(found.userId, target.sessionId));
    socket.pipe(tunnel);
    tunnel.pipe(socket);
    tunnel.resume();
    socket.setNoDelay(true);
    socket.setTimeout(0);
  }
}
