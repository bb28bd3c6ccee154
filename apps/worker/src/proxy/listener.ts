// A worker host's proxy listener (the contract's session proxy, the host's hop): API processes connect
// to it with a ticket signed under PROXY_SECRET (@cq/service-kit's proxy-ticket.ts) naming a session and
// a port; it opens that port inside the session (session-ports.ts) and carries bytes both ways until
// either side closes; or, for an `exec` ticket, runs a command inside the session (session-exec.ts). A
// connection without a valid ticket is answered `unauthorized` and closed before anything reaches a
// session. A session that ends closes every connection to it at once, and kills its commands.
import { createServer, type Server, type Socket } from 'node:net';
import { TICKET_MAX_BYTES, answerLine, readFirstLine, readTicket, type TunnelRefusal } from '@cq/service-kit';
import type { Logger } from 'pino';
import type { ContainmentPlan } from '../containment.js';
import { serveCommand, type SessionExecTarget } from './session-exec.js';
import { openSessionPort, type PortConnection, type PortPipe, type SessionNetTarget } from './session-ports.js';

/** How long an API process has to send its ticket, ms. */
export const TICKET_WAIT_MS = 5000;
/** Least time between two warnings about refused tickets, ms. */
export const REFUSAL_LOG_EVERY_MS = 10_000;

export interface ProxyListenerOptions {
  /** The ticket key (`ticketKey(PROXY_SECRET)`). */
  readonly key: Buffer;
  /** The running session of that id, or undefined. */
  readonly target: (sessionId: string) => SessionExecTarget | undefined;
  /** How commands are run inside sessions (the host's containment plan). */
  readonly plan: Pick<ContainmentPlan, 'execArgv'>;
  readonly logger: Logger;
  /** Opens a port inside a session (tests count or slow it). @defaultValue {@link openSessionPort} */
  readonly open?: (target: SessionNetTarget, port: number) => Promise<PortConnection>;
}

export class ProxyListener {
  readonly #options: ProxyListenerOptions;
  readonly #server: Server;
  /** What to do with each open connection by session when it ends: close it, or kill its command. */
  readonly #bySession = new Map<string, Map<Socket, () => void>>();
  #refusalLoggedAt = Number.NEGATIVE_INFINITY;
  #refusedSince = 0;

  constructor(options: ProxyListenerOptions) {
    this.#options = options;
    this.#server = createServer({ noDelay: true, pauseOnConnect: false }, (socket) =>
      this.#accept(socket).catch((err: unknown) => {
        options.logger.error({ err }, 'proxy listener: a connection failed');
        socket.destroy();
      }),
    );
    this.#server.on('error', (err) => options.logger.error({ err }, 'proxy listener failed'));
  }

  /** Listens on `host:port` (port 0: any free one); answers the address it listens on. */
  listen(host: string, port: number): Promise<{ host: string; port: number }> {
    return new Promise((resolve, reject) => {
      this.#server.once('error', reject);
      this.#server.listen({ host, port }, () => {
        this.#server.removeListener('error', reject);
        const address = this.#server.address();
        if (address === null || typeof address === 'string') reject(new Error('no address'));
        else resolve({ host: address.address, port: address.port });
      });
    });
  }

  /** Connections open to a session right now. */
  connections(sessionId: string): number {
    return this.#bySession.get(sessionId)?.size ?? 0;
  }

  /** The session ended: every connection to it is closed now. */
  sessionEnded(sessionId: string): void {
    const open = this.#bySession.get(sessionId);
    if (open === undefined) return;
    this.#bySession.delete(sessionId);
    for (const ended of open.values()) ended();
  }

  /** Stops listening and closes every connection. */
  async close(): Promise<void> {
    for (const sessionId of [...this.#bySession.keys()]) this.sessionEnded(sessionId);
    await new Promise<void>((resolve) => this.#server.close(() => resolve()));
  }

  async #accept(socket: Socket): Promise<void> {
    socket.on('error', () => {});
    const refuse = (refusal: TunnelRefusal): void => void socket.end(answerLine(refusal));
    let line: string;
    try {
      line = await readFirstLine(socket, TICKET_MAX_BYTES, TICKET_WAIT_MS);
    } catch {
      refuse('unauthorized');
      return;
    }
    const ticket = readTicket(this.#options.key, line);
    if (ticket === undefined) {
      this.#refusedSince++;
      const now = performance.now();
      // Said once per REFUSAL_LOG_EVERY_MS at most: whoever reaches the listener cannot flood the log.
      if (now - this.#refusalLoggedAt >= REFUSAL_LOG_EVERY_MS) {
        this.#options.logger.warn(
          { remote: socket.remoteAddress, refused: this.#refusedSince },
          'proxy listener: connections without a valid ticket were refused (is PROXY_SECRET the same on the API?)',
        );
        this.#refusalLoggedAt = now;
        this.#refusedSince = 0;
      }
      refuse('unauthorized');
      return;
    }
    const target = this.#options.target(ticket.sessionId);
    if (target === undefined) {
      refuse('no_session');
      return;
    }
    if (ticket.port === 'exec') {
      socket.write(answerLine());
      const run = serveCommand(socket, target, this.#options.plan, this.#options.logger);
      this.#hold(ticket.sessionId, socket, () => run.sessionEnded());
      return;
    }
    const opened = await (this.#options.open ?? openSessionPort)(target, ticket.port);
    if ('refused' in opened) {
      refuse(opened.refused);
      return;
    }
    // The session may have ended while its port was being opened.
    if (this.#options.target(ticket.sessionId) === undefined || socket.destroyed) {
      opened.stream.destroy();
      refuse('no_session');
      return;
    }
    this.#join(ticket.sessionId, socket, opened.stream);
  }

  /** Counts `socket` as open to the session until it closes; `ended` is called if the session ends first. */
  #hold(sessionId: string, socket: Socket, ended: () => void): void {
    let open = this.#bySession.get(sessionId);
    if (open === undefined) this.#bySession.set(sessionId, (open = new Map()));
    open.set(socket, ended);
    socket.once('close', () => {
      open.delete(socket);
      if (open.size === 0 && this.#bySession.get(sessionId) === open) this.#bySession.delete(sessionId);
    });
  }

  #join(sessionId: string, socket: Socket, stream: PortPipe): void {
    stream.readable.on('error', () => {});
    stream.writable.on('error', () => {});
    const close = (): void => {
      socket.destroy();
      stream.destroy();
    };
    this.#hold(sessionId, socket, close);
    socket.once('close', close);
    stream.onClose(close);
    socket.write(answerLine());
    // Backpressure both ways: a slow reader on either side slows the other, nothing piles up here.
    socket.pipe(stream.writable);
    stream.readable.pipe(socket);
    socket.resume();
  }
}
