// The session proxy from the command line: `open` prints (and opens) a connect URL; `forward` serves a
// session's port on a local port, through the API, as `kubectl port-forward` does.
import { spawn } from 'node:child_process';
import { createServer, request as httpRequest, type IncomingMessage, type ServerResponse } from 'node:http';
import { request as httpsRequest } from 'node:https';
import { connect as netConnect, type Socket } from 'node:net';
import { connect as tlsConnect } from 'node:tls';
import type { ProxyConnection } from '@cq/client';
import type { Context } from '../context.js';
import { escaped } from '../escape.js';
import { exitCodes } from '../exit-codes.js';
import { UsageError } from '../usage-error.js';
import { command } from './command.js';

function portOf(text: string | undefined, what: string): number | undefined {
  if (text === undefined) return undefined;
  if (!/^\d{1,5}$/.test(text) || Number(text) < 1 || Number(text) > 65_535)
    throw new UsageError(`${what} must be a port, 1 to 65535 (got "${text}")`);
  return Number(text);
}

/** A connect URL for the user's live session (its ready port, or `port`). */
async function connectUser(ctx: Context, userId: string, port: number | undefined): Promise<ProxyConnection> {
  const session = await ctx.client.getSession(userId);
  return ctx.client.connect(session.sessionId, port === undefined ? {} : { port });
}

/** `open <userId> [--port P] [--browser]`: a connect URL for the user's live session. */
export const open = command(['port', 'browser'], async (ctx, { need, options }) => {
  const userId = need('a user id');
  const connection = await connectUser(ctx, userId, portOf(options.port, '--port'));
  if (ctx.json)
    ctx.out(JSON.stringify({ url: connection.url, port: connection.port, expiresAt: connection.expiresAt }));
  else ctx.out(escaped`${connection.url}`);
  if (options.browser) {
    const opener = process.platform === 'darwin' ? 'open' : process.platform === 'win32' ? 'explorer' : 'xdg-open';
    const child = spawn(opener, [connection.url], { stdio: 'ignore', detached: true });
    child.on('error', () => process.stderr.write(`could not start ${opener}; open the URL above yourself\n`));
    child.unref();
  }
  return exitCodes.ok;
});

/**
 * `forward <userId> <localPort>:<port>`: serves the session's `port` on 127.0.0.1:`localPort` until
 * interrupted. Each request (and WebSocket upgrade) goes to the API (http or https, as its URL says) with
 * the session origin's Host and the connect token; once the session ended, requests get the API's
 * `404 no_session`.
 */
export const forward = command([], async (ctx, { need, positionals }) => {
  const userId = need('a user id and <localPort>:<port>');
  const spec = positionals[1];
  const match = spec === undefined ? null : /^(\d{1,5}):(\d{1,5})$/.exec(spec);
  if (match === null) throw new UsageError('forward needs a user id and <localPort>:<port>, e.g. 8080:8080');
  const localPort = portOf(match[1], 'the local port')!;
  const connection = await connectUser(ctx, userId, portOf(match[2], 'the session port'));
  const api = new URL(ctx.target.baseUrl);
  const tls = api.protocol === 'https:';
  const apiPort = Number(api.port || (tls ? 443 : 80));
  const originHost = new URL(connection.origin).host;
  const headersFor = (req: IncomingMessage): Record<string, string | string[]> => {
    const headers: Record<string, string | string[]> = {};
    for (const [name, value] of Object.entries(req.headers)) if (value !== undefined) headers[name] = value;
    headers['host'] = originHost;
    headers['cq-connect-token'] = connection.token;
    return headers;
  };
  const server = createServer((req: IncomingMessage, res: ServerResponse) => {
    const upstream = (tls ? httpsRequest : httpRequest)(
      {
        host: api.hostname,
        port: apiPort,
        method: req.method,
        path: req.url,
        headers: headersFor(req),
        ...(tls ? { servername: api.hostname } : {}),
      },
      (answer) => {
        res.writeHead(answer.statusCode ?? 502, answer.rawHeaders);
        answer.pipe(res);
      },
    );
    upstream.on('error', (err) => {
      if (!res.headersSent) res.writeHead(502, { 'content-type': 'text/plain' });
      res.end(`cq forward: the API could not be reached: ${err.message}\n`);
    });
    req.pipe(upstream);
    // A local client that goes away (a stream it stopped reading) ends its request through the API too.
    res.once('close', () => upstream.destroy());
  });
  server.on('upgrade', (req: IncomingMessage, socket: Socket, head: Buffer) => {
    socket.on('error', () => {});
    const onConnected = (): void => {
      let lines = `${req.method} ${req.url} HTTP/1.1\r\n`;
      for (const [name, value] of Object.entries(headersFor(req)))
        for (const one of Array.isArray(value) ? value : [value]) lines += `${name}: ${one}\r\n`;
      upstream.write(`${lines}\r\n`);
      if (head.length > 0) upstream.write(head);
      upstream.pipe(socket);
      socket.pipe(upstream);
    };
    const upstream: Socket = tls
      ? tlsConnect({ host: api.hostname, port: apiPort, servername: api.hostname }, onConnected)
      : netConnect({ host: api.hostname, port: apiPort }, onConnected);
    upstream.on('error', () => socket.destroy());
    upstream.on('close', () => socket.destroy());
    socket.on('close', () => upstream.destroy());
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', (err: NodeJS.ErrnoException) =>
      reject(
        err.code === 'EADDRINUSE'
          ? new UsageError(`local port ${localPort} is in use: pick another (<localPort>:<port>)`)
          : err,
      ),
    );
    server.listen(localPort, '127.0.0.1', () => resolve());
  });
  process.stderr.write(
    escaped`forwarding 127.0.0.1:${localPort} -> port ${connection.port} of ${userId}'s session ` +
      escaped`(until ${connection.expiresAt}); Ctrl-C to stop\n`,
  );
  await new Promise<void>((resolve) => {
    const stop = (): void => {
      server.close();
      server.closeAllConnections();
      resolve();
    };
    process.once('SIGINT', stop);
    process.once('SIGTERM', stop);
  });
  return exitCodes.ok;
});
