// Webhooks: a session event → its webhook POST at a receiver, on the built API (its defaults, with
// WEBHOOK_ALLOW_PRIVATE=true so it may call 127.0.0.1) and a real worker host, with 1 and with 10
// webhooks; beside the limit, a minimal process that follows the same /v1/events stream and POSTs
// each event to the same receiver (webhook-relay.ts). Each event's time is when this process saw it
// on GET /v1/events; both paths are measured from that moment, over the same events, side by side.
import { createServer, request, type ClientRequest, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import { API_KEY, Stack, startProc, type Proc } from './sessions.js';

/** Epoch milliseconds with sub-millisecond precision. */
const nowMs = (): number => performance.timeOrigin + performance.now();

export interface WebhookLatencyRow {
  case: string;
  webhooks: number;
  /** Events measured (four per session: pending, running, ready, completed). */
  events: number;
  /** Deliveries measured (events × webhooks). */
  n: number;
  /** Deliveries that had not arrived 10 s after the last session (left out of the percentiles). */
  missing: number;
  /** Deliveries that arrived more than once. */
  duplicates: number;
  /** From the moment this process saw the event on /v1/events to its receipt, ms. */
  p50: number;
  p99: number;
  max: number;
  /** The same from the event's own `at` (Redis's clock, whole ms) instead. */
  p50FromAt: number;
  p99FromAt: number;
}

export interface WebhooksBench {
  rows: WebhookLatencyRow[];
  sessions: number;
  everyMs: number;
  containment: string;
}

function percentiles(values: number[]): { p50: number; p99: number; max: number } {
  const sorted = [...values].sort((a, b) => a - b);
  const at = (q: number): number => sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))] ?? NaN;
  return { p50: at(0.5), p99: at(0.99), max: sorted.at(-1) ?? NaN };
}

/** A receiver on 127.0.0.1 answering 200 at once; when each (path, webhook-id) first arrived, and how often. */
class Receiver {
  readonly firstAt = new Map<string, number>();
  readonly count = new Map<string, number>();
  readonly #server: Server = createServer((req, res) => {
    req.resume();
    req.on('end', () => {
      const at = nowMs();
      const key = `${req.url ?? ''} ${String(req.headers['webhook-id'])}`;
      if (!this.firstAt.has(key)) this.firstAt.set(key, at);
      this.count.set(key, (this.count.get(key) ?? 0) + 1);
      res.writeHead(200, { 'content-type': 'text/plain' }).end('ok');
    });
  });
  url = '';

  async listen(): Promise<void> {
    await new Promise<void>((resolve) => this.#server.listen(0, '127.0.0.1', resolve));
    this.url = `http://127.0.0.1:${(this.#server.address() as AddressInfo).port}`;
  }

  async close(): Promise<void> {
    this.#server.closeAllConnections();
    await new Promise((resolve) => this.#server.close(resolve));
  }
}

/** This process's reader of GET /v1/events: when it saw each event, with the event's user and `at`. */
function followEvents(
  url: string,
  seen: Map<string, { at: number; userId: string; eventAt: number }>,
): Promise<ClientRequest> {
  return new Promise((resolve, reject) => {
    const req = request(
      url,
      { headers: { accept: 'text/event-stream', authorization: `Bearer ${API_KEY}` } },
      (res) => {
        let buffer = '';
        let id = '';
        res.setEncoding('utf8');
        res.on('data', (chunk: string) => {
          const at = nowMs();
          buffer += chunk;
          let end: number;
          while ((end = buffer.indexOf('\n')) >= 0) {
            const line = buffer.slice(0, end);
            buffer = buffer.slice(end + 1);
            if (line.startsWith('id: ')) id = line.slice(4);
            else if (line.startsWith('data: ')) {
              const data = JSON.parse(line.slice(6)) as { userId: string; at: string };
              seen.set(id, { at, userId: data.userId, eventAt: Date.parse(data.at) });
            }
          }
        });
        res.on('error', () => {});
        resolve(req);
      },
    );
    req.on('error', reject);
    req.end();
  });
}

/**
 * With 1, then 10 webhooks (each a path of one receiver): `sessions` sessions of distinct users, one
 * spawned every 100 ms, each announcing readiness and exiting 50 ms later (four events each), while
 * the relay POSTs the same events to the receiver's other paths.
 */
export async function benchWebhooks(redisUrl: string, quick: boolean): Promise<WebhooksBench> {
  const SESSIONS = quick ? 10 : 100;
  const EVERY_MS = 100;
  const result: WebhooksBench = { rows: [], sessions: SESSIONS, everyMs: EVERY_MS, containment: '' };
  const receiver = new Receiver();
  await receiver.listen();
  const stack = new Stack(redisUrl, 'benchwebhooks', `printf '{"ready":true}\\n' >&3; sleep 0.05`);
  const seen = new Map<string, { at: number; userId: string; eventAt: number }>();
  let follower: ClientRequest | undefined;
  let relay: Proc | undefined;
  const api = async (method: string, path: string, body?: unknown): Promise<Record<string, unknown>> => {
    const res = await fetch(`${stack.baseUrl}${path}`, {
      method,
      headers: {
        authorization: `Bearer ${API_KEY}`,
        ...(body === undefined ? {} : { 'content-type': 'application/json' }),
      },
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    });
    if (res.status >= 300) throw new Error(`${method} ${path}: ${res.status} ${await res.text()}`);
    return res.status === 204 ? {} : ((await res.json()) as Record<string, unknown>);
  };
  try {
    await stack.startApi({ WEBHOOK_ALLOW_PRIVATE: 'true' });
    result.containment = (await stack.addHost('webhooks-1', 4)).containment;
    follower = await followEvents(`${stack.baseUrl}/v1/events`, seen);

    /** Spawns a session for each of `users`, one every EVERY_MS; then waits until each path has each of their events, or 10 s more. */
    const run = async (users: string[], paths: string[]): Promise<string[]> => {
      const tokens = await stack.tokens(users);
      const start = performance.now();
      for (const [i, token] of tokens.entries()) {
        const due = start + i * EVERY_MS - performance.now();
        if (due > 0) await sleep(due);
        await stack.post('/v1/spawn', { token }, false);
      }
      const mine = new Set(users);
      const ids = (): string[] => [...seen].filter(([, e]) => mine.has(e.userId)).map(([id]) => id);
      const until = performance.now() + 10_000;
      const complete = (): boolean =>
        ids().length === users.length * 4 &&
        ids().every((id) => paths.every((path) => receiver.firstAt.has(`${path} ${id}`)));
      while (!complete() && performance.now() < until) await sleep(20);
      return ids();
    };

    for (const count of [1, 10]) {
      const ours = Array.from({ length: count }, (_, k) => `/ours/${count}/${k}`);
      const bare = Array.from({ length: count }, (_, k) => `/bare/${count}/${k}`);
      const hooks = await Promise.all(
        ours.map((path) => api('POST', '/v1/webhooks', { url: `${receiver.url}${path}` })),
      );
      relay = startProc('test/bench/dist/webhook-relay.js', {
        RELAY_API_URL: stack.baseUrl,
        RELAY_API_KEY: API_KEY,
        RELAY_TARGETS: bare.map((path) => `${receiver.url}${path}`).join(','),
      });
      await relay.waitFor((l) => l['msg'] === 'following');
      // A warm-up session, not measured: the dispatcher has taken its lease and both paths deliver.
      await run([`warm-${count}`], [...ours, ...bare]);
      const users = Array.from({ length: SESSIONS }, (_, i) => `wh-${count}-${i}`);
      const ids = await run(users, [...ours, ...bare]);
      for (const [name, paths] of [
        ['ours: session event → dispatcher → BullMQ → signed POST (built API and host)', ours],
        ['limit: a minimal process following /v1/events, POSTing each event', bare],
      ] as const) {
        const latencies: number[] = [];
        const fromAt: number[] = [];
        let missing = 0;
        let duplicates = 0;
        for (const id of ids)
          for (const path of paths) {
            const key = `${path} ${id}`;
            const at = receiver.firstAt.get(key);
            if (at === undefined) {
              missing++;
              continue;
            }
            latencies.push(at - seen.get(id)!.at);
            fromAt.push(at - seen.get(id)!.eventAt);
            duplicates += (receiver.count.get(key) ?? 1) - 1;
          }
        const fromSeen = percentiles(latencies);
        const atStats = percentiles(fromAt);
        result.rows.push({
          case: name,
          webhooks: count,
          events: ids.length,
          n: latencies.length,
          missing,
          duplicates,
          ...fromSeen,
          p50FromAt: atStats.p50,
          p99FromAt: atStats.p99,
        });
      }
      await relay.stop();
      relay = undefined;
      for (const hook of hooks) await api('DELETE', `/v1/webhooks/${String(hook['id'])}`);
    }
  } finally {
    follower?.destroy();
    await relay?.stop();
    await stack.stop();
    await receiver.close();
  }
  return result;
}
