import { once } from 'node:events';
import {
  createServer,
  type IncomingHttpHeaders,
  type IncomingMessage,
  type Server,
  type ServerResponse,
} from 'node:http';
import { getDefaultAutoSelectFamily, setDefaultAutoSelectFamily, type AddressInfo, type Socket } from 'node:net';
import { performance } from 'node:perf_hooks';
import { afterEach, describe, expect, it } from 'vitest';
import { checkWebhookUrl, type Resolver } from './address-guard.js';
import { postWebhook, RESPONSE_BODY_CAP_BYTES, WEBHOOK_USER_AGENT } from './post-webhook.js';

interface Received {
  method: string | undefined;
  url: string | undefined;
  headers: IncomingHttpHeaders;
  body: Buffer;
}

/** A real HTTP server on 127.0.0.1 that records connections and requests, closed after each test. */
interface Receiver {
  url: string;
  port: number;
  connections: number;
  requests: Received[];
  /** Resolves when a connection the server accepted has closed. */
  closed: Promise<void>;
}

const servers: Server[] = [];

afterEach(async () => {
  for (const server of servers.splice(0)) {
    server.closeAllConnections();
    server.close();
    await once(server, 'close');
  }
});

async function receiver(handle: (req: IncomingMessage, res: ServerResponse) => void): Promise<Receiver> {
  let closedOne: () => void = () => undefined;
  const state: Receiver = {
    url: '',
    port: 0,
    connections: 0,
    requests: [],
    closed: new Promise<void>((resolve) => (closedOne = resolve)),
  };
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      state.requests.push({ method: req.method, url: req.url, headers: req.headers, body: Buffer.concat(chunks) });
      handle(req, res);
    });
  });
  server.on('connection', (socket: Socket) => {
    state.connections += 1;
    socket.on('close', () => closedOne());
  });
  servers.push(server);
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  state.port = (server.address() as AddressInfo).port;
  state.url = `http://127.0.0.1:${state.port}`;
  return state;
}

/** A port on 127.0.0.1 that nothing listens on (bound, then released). */
async function closedPort(): Promise<number> {
  const server = createServer();
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const { port } = server.address() as AddressInfo;
  server.close();
  await once(server, 'close');
  return port;
}

const always =
  (...addresses: string[]): Resolver =>
  async () =>
    addresses;

describe('postWebhook against a local receiver', () => {
  it('POSTs the body as application/json with our user agent and the given headers, and gives the status', async () => {
    const target = await receiver((_req, res) => res.writeHead(200).end('ok'));
    const body = JSON.stringify({ sessionId: 's-1', state: 'running', note: 'é' });
    const result = await postWebhook({
      url: `${target.url}/hook?x=1`,
      body,
      headers: { 'webhook-id': 'evt-1', 'Webhook-Timestamp': '1700000000', 'Content-Type': 'text/plain' },
      allowPrivate: true,
    });

    expect(result).toEqual({ status: 200 });
    expect(target.requests).toHaveLength(1);
    const [request] = target.requests;
    expect(request?.method).toBe('POST');
    expect(request?.url).toBe('/hook?x=1');
    expect(request?.body.equals(Buffer.from(body))).toBe(true);
    expect(request?.headers).toMatchObject({
      'content-type': 'application/json',
      'content-length': String(Buffer.byteLength(body)),
      'user-agent': WEBHOOK_USER_AGENT,
      'webhook-id': 'evt-1',
      'webhook-timestamp': '1700000000',
    });
  });

  it('sends a Buffer body byte for byte', async () => {
    const target = await receiver((_req, res) => res.writeHead(204).end());
    const body = Buffer.from([0x7b, 0x00, 0xff, 0x7d]);
    expect(await postWebhook({ url: target.url, body, allowPrivate: true })).toEqual({ status: 204 });
    expect(target.requests[0]?.body.equals(body)).toBe(true);
  });

  it('gives a 500 as a status', async () => {
    const target = await receiver((_req, res) => res.writeHead(500).end('boom'));
    expect(await postWebhook({ url: target.url, body: '{}', allowPrivate: true })).toEqual({ status: 500 });
  });

  it('does not follow a redirect: a 302 is the answer, and its target is never called', async () => {
    const elsewhere = await receiver((_req, res) => res.writeHead(200).end());
    const target = await receiver((_req, res) => res.writeHead(302, { location: `${elsewhere.url}/stolen` }).end());
    expect(await postWebhook({ url: target.url, body: '{}', allowPrivate: true })).toEqual({ status: 302 });
    expect(target.requests).toHaveLength(1);
    expect(elsewhere.connections).toBe(0);
  });

  it('times out a receiver that never answers, at timeoutMs, and drops the connection', async () => {
    const target = await receiver(() => undefined);
    const started = performance.now();
    const result = await postWebhook({ url: target.url, body: '{}', allowPrivate: true, timeoutMs: 300 });
    const elapsed = performance.now() - started;

    expect(result).toEqual({ error: 'timed out after 300 ms' });
    expect(elapsed).toBeGreaterThanOrEqual(295);
    expect(elapsed).toBeLessThan(1_500);
    expect(target.requests).toHaveLength(1);
    await target.closed;
  });

  it('counts a name that never resolves against the same deadline', async () => {
    const never: Resolver = () => new Promise<string[]>(() => undefined);
    const result = await postWebhook({
      url: 'http://slow-dns.test/',
      body: '{}',
      allowPrivate: true,
      resolve: never,
      timeoutMs: 200,
    });
    expect(result).toEqual({ error: 'timed out after 200 ms' });
  });

  it('gives the status of a receiver that answers but never finishes its body, at the deadline', async () => {
    const target = await receiver((_req, res) => {
      res.writeHead(200, { 'content-length': '100' });
      res.write('partial');
    });
    const started = performance.now();
    const result = await postWebhook({ url: target.url, body: '{}', allowPrivate: true, timeoutMs: 300 });
    expect(result).toEqual({ status: 200 });
    expect(performance.now() - started).toBeGreaterThanOrEqual(295);
    await target.closed;
  });

  it('stops reading an endless body past the cap and drops the connection, well before the deadline', async () => {
    const chunk = Buffer.alloc(16 * 1024, 0x61);
    let written = 0;
    const target = await receiver((_req, res) => {
      res.writeHead(200, { 'content-type': 'text/plain' });
      const pump = (): void => {
        while (!res.destroyed) {
          written += chunk.length;
          if (!res.write(chunk)) {
            res.once('drain', pump);
            return;
          }
        }
      };
      pump();
    });
    const started = performance.now();
    const result = await postWebhook({ url: target.url, body: '{}', allowPrivate: true, timeoutMs: 10_000 });

    expect(result).toEqual({ status: 200 });
    expect(performance.now() - started).toBeLessThan(5_000);
    await target.closed;
    // What the receiver managed to write is bounded by socket buffers, not by an endless body.
    expect(written).toBeGreaterThan(RESPONSE_BODY_CAP_BYTES);
    expect(written).toBeLessThan(64 * 1024 * 1024);
  });

  it('gives a connection error with its message', async () => {
    const port = await closedPort();
    const result = await postWebhook({ url: `http://127.0.0.1:${port}/`, body: '{}', allowPrivate: true });
    expect(result).toEqual({ error: expect.stringContaining('ECONNREFUSED') });
  });

  it('gives a header value Node refuses as an error instead of throwing', async () => {
    const target = await receiver((_req, res) => res.writeHead(200).end());
    const result = await postWebhook({
      url: target.url,
      body: '{}',
      headers: { 'webhook-id': 'a\r\nb' },
      allowPrivate: true,
    });
    expect(result).toEqual({ error: expect.stringMatching(/invalid character/i) });
    expect(target.connections).toBe(0);
  });

  it('speaks TLS to an https: URL (a plain-HTTP receiver fails the handshake) through the same checked lookup', async () => {
    const target = await receiver((_req, res) => res.writeHead(200).end());
    const url = `https://hooks.test:${target.port}/`;
    const result = await postWebhook({
      url,
      body: '{}',
      allowPrivate: true,
      resolve: always('127.0.0.1'),
      timeoutMs: 2_000,
    });
    expect(result).toEqual({ error: expect.any(String) });
    expect(target.connections).toBe(1);
    expect(target.requests).toHaveLength(0);

    const refused = await postWebhook({ url, body: '{}', allowPrivate: false, resolve: always('127.0.0.1') });
    expect(refused).toEqual({ error: expect.stringMatching(/^hooks\.test resolves to 127\.0\.0\.1/) });
    expect(target.connections).toBe(1);
  });

  it('gives a resolution error with its message', async () => {
    const failing: Resolver = async () => {
      throw Object.assign(new Error('getaddrinfo ENOTFOUND nowhere.test'), { code: 'ENOTFOUND' });
    };
    const result = await postWebhook({ url: 'http://nowhere.test/', body: '{}', allowPrivate: true, resolve: failing });
    expect(result).toEqual({ error: 'getaddrinfo ENOTFOUND nowhere.test' });
  });
});

describe('postWebhook address checks', () => {
  it('connects to the address the resolver gives (so the check is on what is used)', async () => {
    const target = await receiver((_req, res) => res.writeHead(200).end());
    const result = await postWebhook({
      url: `http://hooks.test:${target.port}/`,
      body: '{}',
      allowPrivate: true,
      resolve: always('127.0.0.1'),
    });
    expect(result).toEqual({ status: 200 });
    expect(target.requests[0]?.headers.host).toBe(`hooks.test:${target.port}`);
  });

  it('answers a lookup for one address too (happy eyeballs off), skipping addresses of no use', async () => {
    const target = await receiver((_req, res) => res.writeHead(200).end());
    const before = getDefaultAutoSelectFamily();
    setDefaultAutoSelectFamily(false);
    try {
      const result = await postWebhook({
        url: `http://hooks.test:${target.port}/`,
        body: '{}',
        allowPrivate: true,
        resolve: always('not-an-address', '127.0.0.1'),
      });
      expect(result).toEqual({ status: 200 });
    } finally {
      setDefaultAutoSelectFamily(before);
    }
  });

  it('refuses a name that resolves to loopback without WEBHOOK_ALLOW_PRIVATE, connecting to nothing', async () => {
    const target = await receiver((_req, res) => res.writeHead(200).end());
    const result = await postWebhook({
      url: `http://hooks.test:${target.port}/`,
      body: '{}',
      allowPrivate: false,
      resolve: always('127.0.0.1'),
    });
    expect(result).toEqual({
      error: 'hooks.test resolves to 127.0.0.1, a loopback address; set WEBHOOK_ALLOW_PRIVATE=true to allow it',
    });
    expect(target.connections).toBe(0);
  });

  it('refuses a name when any of its addresses is forbidden, even if a public one comes first', async () => {
    const target = await receiver((_req, res) => res.writeHead(200).end());
    const result = await postWebhook({
      url: `http://hooks.test:${target.port}/`,
      body: '{}',
      allowPrivate: false,
      resolve: always('93.184.216.34', '::ffff:127.0.0.1'),
    });
    expect(result).toEqual({
      error: expect.stringMatching(/^hooks\.test resolves to ::ffff:127\.0\.0\.1, a loopback address/),
    });
    expect(target.connections).toBe(0);
  });

  it('refuses a loopback IP literal without WEBHOOK_ALLOW_PRIVATE, connecting to nothing', async () => {
    const target = await receiver((_req, res) => res.writeHead(200).end());
    const result = await postWebhook({ url: target.url, body: '{}', allowPrivate: false });
    expect(result).toEqual({ error: '127.0.0.1 is a loopback address; set WEBHOOK_ALLOW_PRIVATE=true to allow it' });
    expect(target.connections).toBe(0);
  });

  it('does not call a name that was public when the webhook was created and is loopback now (DNS rebinding)', async () => {
    const target = await receiver((_req, res) => res.writeHead(200).end());
    let calls = 0;
    const rebinding: Resolver = async () => (calls++ === 0 ? ['93.184.216.34'] : ['127.0.0.1']);
    const url = `http://rebind.test:${target.port}/hook`;

    expect((await checkWebhookUrl(url, { allowPrivate: false, resolve: rebinding })).ok).toBe(true);
    const result = await postWebhook({ url, body: '{}', allowPrivate: false, resolve: rebinding });
    expect(result).toEqual({
      error: expect.stringMatching(/^rebind\.test resolves to 127\.0\.0\.1, a loopback address/),
    });
    expect(target.connections).toBe(0);
  });

  it('refuses schemes other than http(s) and URLs with credentials, with or without the flag', async () => {
    for (const allowPrivate of [false, true]) {
      expect(await postWebhook({ url: 'ftp://example.com/', body: '{}', allowPrivate })).toEqual({
        error: 'the scheme is ftp:; only http: and https: are allowed',
      });
      expect(await postWebhook({ url: 'http://u:p@example.com/', body: '{}', allowPrivate })).toEqual({
        error: 'the URL carries a user name or password; remove them',
      });
      expect(await postWebhook({ url: 'not a url', body: '{}', allowPrivate })).toEqual({ error: 'not a valid URL' });
    }
  });
});
