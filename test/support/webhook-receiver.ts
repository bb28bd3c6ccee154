import { createHmac } from 'node:crypto';
import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Cluster, Redis } from 'ioredis';

/** One request a receiver got. */
export interface Received {
  readonly path: string;
  readonly headers: IncomingHttpHeaders;
  readonly body: string;
  /** Epoch ms. */
  readonly at: number;
  /** What it answered (undefined: it never answered). */
  readonly status: number | undefined;
}

/**
 * How a path answers the n-th request (1-based) for one `webhook-id`: a status, or `hang` (never
 * answers, until the client gives up).
 */
export type Behaviour = (attempt: number) => number | 'hang';

/** A webhook receiver on 127.0.0.1: records every request; each path answers as its behaviour says (200 otherwise). */
export interface Receiver {
  readonly url: string;
  readonly received: Received[];
  /** The requests for one path. */
  at(path: string): Received[];
  close(): Promise<void>;
}

export async function startReceiver(behaviours: Record<string, Behaviour> = {}): Promise<Receiver> {
  const received: Received[] = [];
  const attempts = new Map<string, number>();
  const server: Server = createServer((request, response) => {
    const chunks: Buffer[] = [];
    request.on('data', (chunk: Buffer) => chunks.push(chunk));
    request.on('end', () => {
      const path = request.url ?? '/';
      const key = `${path} ${String(request.headers['webhook-id'])}`;
      const attempt = (attempts.get(key) ?? 0) + 1;
      attempts.set(key, attempt);
      const answer = behaviours[path]?.(attempt) ?? 200;
      received.push({
        path,
        headers: request.headers,
        body: Buffer.concat(chunks).toString('utf8'),
        at: Date.now(),
        status: answer === 'hang' ? undefined : answer,
      });
      if (answer === 'hang') return; // the client's timeout ends it
      response.writeHead(answer, { 'content-type': 'text/plain' }).end(answer < 300 ? 'ok' : 'no');
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    received,
    at: (path) => received.filter((r) => r.path === path),
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

/**
 * Verifies a request's Standard Webhooks signature the way a receiver would, with node:crypto alone:
 * HMAC-SHA256 keyed with the secret's bytes (base64 after `whsec_`) over `<id>.<timestamp>.<body>`.
 */
export function signatureValid(secret: string, request: Received): boolean {
  const id = String(request.headers['webhook-id']);
  const timestamp = String(request.headers['webhook-timestamp']);
  const key = Buffer.from(secret.replace(/^whsec_/, ''), 'base64');
  const expected = createHmac('sha256', key).update(`${id}.${timestamp}.${request.body}`).digest('base64');
  return String(request.headers['webhook-signature'])
    .split(' ')
    .some((signature) => signature === `v1,${expected}`);
}

/** True when the system's webhook delivery queue has nothing waiting, delayed for a retry, or being delivered. */
export async function deliveryQueueIdle(
  redis: Pick<Redis, 'llen' | 'zcard'> | Cluster,
  keyPrefix: string,
): Promise<boolean> {
  const q = `${keyPrefix}:{webhooks}:q:webhook-deliveries`;
  const [wait, active, delayed, prioritized] = await Promise.all([
    redis.llen(`${q}:wait`),
    redis.llen(`${q}:active`),
    redis.zcard(`${q}:delayed`),
    redis.zcard(`${q}:prioritized`),
  ]);
  return wait + active + delayed + prioritized === 0;
}
