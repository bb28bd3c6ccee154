import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Redis } from 'ioredis';
import { describe, expect, it } from 'vitest';
import { cleanUp, until } from '@cq/test-harness';
import { jsonHeaders, send, startTestApi, type TestApi } from '../test-support/app.js';
import { fakeDns } from '../test-support/fake-dns.js';
import type { Resolver } from '../webhooks/address-guard.js';
import { createHostResolver } from '../webhooks/host-resolver.js';
import { DELIVERY_QUEUE, deliveryJobId } from '../webhooks/delivery-job.js';

/** Every key under the API's prefix with its DUMP, the delivery queue's own keys aside (its worker's timers write there). */
async function snapshot(api: TestApi): Promise<Map<string, string>> {
  const redis = api.coordinator.redis as Redis;
  const queue = api.coordinator.keys.webhooks().queuePrefix;
  const keys = (await redis.keys(`${api.config.keyPrefix}:*`)).filter((key) => !key.startsWith(`${queue}:`)).sort();
  const dumps = await Promise.all(keys.map(async (key) => (await redis.dumpBuffer(key)).toString('hex')));
  return new Map(keys.map((key, i) => [key, dumps[i]!]));
}

/** An HTTP server on 127.0.0.1 that counts every connection made to it and answers 200. */
async function localServer(): Promise<{ port: number; connections: () => number; requests: string[]; server: Server }> {
  let connections = 0;
  const requests: string[] = [];
  const server = createServer((request, response) => {
    requests.push(String(request.headers['webhook-id']));
    request.resume();
    request.on('end', () => response.end('ok'));
  });
  server.on('connection', () => connections++);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  cleanUp(
    () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  );
  return { port: (server.address() as AddressInfo).port, connections: () => connections, requests, server };
}

/** A resolver whose answer a test sets, recording each name it was asked for. */
function switchableResolver(initial: string[]): {
  resolve: Resolver;
  answer: (addresses: string[]) => void;
  asked: string[];
} {
  let current = initial;
  const asked: string[] = [];
  return {
    resolve: async (host) => {
      asked.push(host);
      return current;
    },
    answer: (addresses) => (current = addresses),
    asked,
  };
}

/** A public address (example.com's at the time of writing): allowed by the guard. */
const PUBLIC = '93.184.215.14';

describe('webhook URLs without WEBHOOK_ALLOW_PRIVATE', async () => {
  const api = await startTestApi();
  const create = (url: string) =>
    send(api.baseUrl, 'POST', '/v1/webhooks', { body: JSON.stringify({ url }), headers: jsonHeaders() });

  it.each([
    ['http://127.0.0.1/hook', /127\.0\.0\.1 is a loopback address/],
    ['http://localhost:8080/hook', /localhost resolves to (127\.0\.0\.1|::1), a loopback address/],
    ['http://10.1.2.3/hook', /10\.1\.2\.3 is a private address/],
    ['http://[::1]/hook', /::1 is a loopback address/],
    ['http://[::ffff:127.0.0.1]/hook', /a loopback address \(IPv4-mapped 127\.0\.0\.1\)/],
    ['http://2130706433/hook', /127\.0\.0\.1 is a loopback address/],
    ['ftp://example.com/hook', /the scheme is ftp:; only http: and https: are allowed/],
  ])('%s is refused with 400 webhook_url_forbidden and changes nothing in Redis', async (url, why) => {
    const before = await snapshot(api);
    const refused = await create(url);
    expect(refused.status).toBe(400);
    expect(refused.body.error.code).toBe('webhook_url_forbidden');
    expect(refused.body.error.message).toMatch(why);
    expect(await snapshot(api)).toEqual(before);
    const keys = api.coordinator.keys.webhooks();
    const redis = api.coordinator.redis as Redis;
    expect(await redis.exists(keys.endpoints, keys.version, keys.cursor)).toBe(0);
    expect((await send(api.baseUrl, 'GET', '/v1/webhooks', { headers: jsonHeaders() })).body).toEqual({ webhooks: [] });
  });

  it('the answer that carries the secret is Cache-Control: no-store', async () => {
    const created = await create(`http://${PUBLIC}/no-store`);
    expect(created.status).toBe(201);
    expect(created.body.secret).toMatch(/^whsec_/);
    expect(created.headers.get('cache-control')).toBe('no-store');
    await send(api.baseUrl, 'DELETE', `/v1/webhooks/${created.body.id}`, { headers: jsonHeaders() });
  });

  it('a public address is accepted, and that does show in the same snapshot (the check above can see a change)', async () => {
    const before = await snapshot(api);
    const created = await create(`http://${PUBLIC}/hook`);
    expect(created.status).toBe(201);
    const after = await snapshot(api);
    expect(after).not.toEqual(before);
    const { endpoints, version } = api.coordinator.keys.webhooks();
    expect([...after.keys()]).toEqual(expect.arrayContaining([endpoints, version]));
    expect(
      (await send(api.baseUrl, 'DELETE', `/v1/webhooks/${created.body.id}`, { headers: jsonHeaders() })).status,
    ).toBe(204);
  });
});

describe('a webhook host whose DNS never answers', async () => {
  const dns = await fakeDns();
  const api = await startTestApi(
    {},
    { webhookResolve: createHostResolver({ servers: [dns.server], tryTimeoutMs: 5000, tries: 1, timeoutMs: 500 }) },
  );

  it('is refused with 400 webhook_url_forbidden within the resolver’s bound, and nothing is kept', async () => {
    const started = performance.now();
    const refused = await send(api.baseUrl, 'POST', '/v1/webhooks', {
      body: JSON.stringify({ url: 'https://hangs.example/hook' }),
      headers: jsonHeaders(),
    });
    expect(performance.now() - started).toBeLessThan(1500);
    expect(refused.status).toBe(400);
    expect(refused.body.error).toMatchObject({
      code: 'webhook_url_forbidden',
      message: 'The webhook URL is refused: hangs.example does not resolve (ETIMEOUT).',
    });
    expect(dns.asked).toContain('hangs.example');
    expect((await send(api.baseUrl, 'GET', '/v1/webhooks', { headers: jsonHeaders() })).body).toEqual({ webhooks: [] });
  });
});

describe('DNS rebinding: a name that resolves to a public address at creation and to 127.0.0.1 at delivery', () => {
  /** Creates a webhook for `name` while it resolves to a public address, then makes it resolve to 127.0.0.1 and spawns a session. */
  async function rebound(api: TestApi, dns: ReturnType<typeof switchableResolver>, url: string, userId: string) {
    const created = await send(api.baseUrl, 'POST', '/v1/webhooks', {
      body: JSON.stringify({ url, events: ['pending'] }),
      headers: jsonHeaders(),
    });
    expect(created.status).toBe(201);
    dns.answer(['127.0.0.1']);
    const askedBefore = dns.asked.length;
    const admission = await api.client.spawn((await api.client.issueToken({ userId })).token);
    return { id: created.body.id as string, askedBefore, sessionId: admission.sessionId };
  }

  it('is not called: the delivery attempt is refused before connecting, and the delivery log records why', async () => {
    const dns = switchableResolver([PUBLIC]);
    const api = await startTestApi({}, { webhookResolve: dns.resolve });
    const local = await localServer();
    const url = `http://hooks.rebind.test:${local.port}/hook`;
    const hook = await rebound(api, dns, url, 'rebind-1');
    expect(hook.askedBefore).toBe(1); // at creation, answered with the public address

    await until(async () => (await api.client.deliveries(hook.id)).length > 0, 15_000, 'the first attempt logged');
    const [attempt] = await api.client.deliveries(hook.id);
    expect(attempt).toMatchObject({ type: 'pending', attempt: 1, error: expect.any(String) as string });
    expect(attempt!.error).toBe(
      'hooks.rebind.test resolves to 127.0.0.1, a loopback address; set WEBHOOK_ALLOW_PRIVATE=true to allow it',
    );
    expect(attempt!.status).toBeUndefined();
    expect(attempt!.nextAttemptAt).toBeDefined(); // refused now, retried later (checked again then)
    // The name was resolved again at delivery, and nothing connected to the local server.
    expect(dns.asked.length).toBeGreaterThan(hook.askedBefore);
    expect(local.connections()).toBe(0);
    expect(local.requests).toEqual([]);
    expect(await send(api.baseUrl, 'GET', '/metrics').then((r) => r.body as string)).toContain(
      'cq_webhook_deliveries_total{outcome="retrying"} 1',
    );
  });

  it('is resolved once per attempt, by the connection itself: the addresses checked are the ones connected to', async () => {
    // Public for the creation, loopback for the delivery: no separate check before the connection's own
    // lookup could pass a name that the connection then resolves elsewhere.
    const answers = [[PUBLIC], ['127.0.0.1']];
    const asked: string[] = [];
    const resolve: Resolver = async (host) => {
      asked.push(host);
      return answers[Math.min(asked.length, answers.length) - 1]!;
    };
    const api = await startTestApi({}, { webhookResolve: resolve });
    const local = await localServer();
    const created = await send(api.baseUrl, 'POST', '/v1/webhooks', {
      body: JSON.stringify({ url: `http://late.rebind.test:${local.port}/hook`, events: ['pending'] }),
      headers: jsonHeaders(),
    });
    expect(created.status).toBe(201);
    await api.client.spawn((await api.client.issueToken({ userId: 'rebind-2' })).token);
    await until(async () => (await api.client.deliveries(created.body.id)).length > 0, 15_000, 'the first attempt');
    const [attempt] = await api.client.deliveries(created.body.id);
    expect(asked).toEqual(['late.rebind.test', 'late.rebind.test']);
    expect(attempt!.error).toBe(
      'late.rebind.test resolves to 127.0.0.1, a loopback address; set WEBHOOK_ALLOW_PRIVATE=true to allow it',
    );
    expect(local.connections()).toBe(0);
  });

  it('control: with WEBHOOK_ALLOW_PRIVATE=true the same rebinding name does reach the local server', async () => {
    // Shows the resolver steers the connection: the refusals above are the guard's, not a name that goes nowhere.
    const dns = switchableResolver([PUBLIC]);
    const api = await startTestApi({ WEBHOOK_ALLOW_PRIVATE: 'true' }, { webhookResolve: dns.resolve });
    const local = await localServer();
    const hook = await rebound(api, dns, `http://hooks.rebind.test:${local.port}/hook`, 'rebind-3');
    await until(() => local.requests.length > 0, 15_000, 'the delivery at the local server');
    await until(async () => (await api.client.deliveries(hook.id)).length > 0, 15_000, 'the attempt logged');
    expect((await api.client.deliveries(hook.id))[0]).toMatchObject({ type: 'pending', attempt: 1, status: 200 });
    expect(local.connections()).toBe(1);
  });
});

describe('which events a webhook receives', () => {
  it('those from its creation on, by the Redis clock: an event a request before it is not queued for it, the next is', async () => {
    const api = await startTestApi({ WEBHOOK_ALLOW_PRIVATE: 'true' });
    const earlier = await localServer();
    const later = await localServer();
    const create = async (port: number): Promise<string> => {
      const created = await send(api.baseUrl, 'POST', '/v1/webhooks', {
        body: JSON.stringify({ url: `http://127.0.0.1:${port}/hook`, events: ['pending'] }),
        headers: jsonHeaders(),
      });
      expect(created.status).toBe(201);
      return created.body.id as string;
    };
    // The first webhook sees both events; the second is created between them, a few ms after the first.
    const first = await create(earlier.port);
    await api.client.spawn((await api.client.issueToken({ userId: 'from-creation-a' })).token);
    const second = await create(later.port);
    await api.client.spawn((await api.client.issueToken({ userId: 'from-creation-b' })).token);

    await until(() => earlier.requests.length === 2 && later.requests.length === 1, 15_000, 'the deliveries');
    const [before, after] = earlier.requests;
    expect(later.requests).toEqual([after]);
    // Not merely late: the first event was dispatched (its job for the first webhook exists) and no job
    // was made of it for the second. Both events went through the dispatcher before the second's delivery.
    const redis = api.coordinator.redis as Redis;
    const job = (webhookId: string, eventId: string): string =>
      `${api.coordinator.keys.webhooks().queuePrefix}:${DELIVERY_QUEUE}:${deliveryJobId(webhookId, eventId)}`;
    expect(await redis.exists(job(first, before!))).toBe(1);
    expect(await redis.exists(job(second, before!))).toBe(0);
    expect(await redis.exists(job(second, after!))).toBe(1);
  });
});
