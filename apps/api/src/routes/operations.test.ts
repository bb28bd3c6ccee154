import { cleanUp, startRedisServer, watchServer, type Seen } from '@cq/test-harness';
import { describe, expect, it, vi } from 'vitest';
import { send, startTestApi } from '../test-support/app.js';
import { METRICS_READ_EVERY_MS } from '../redis-gauges.js';

describe('GET /metrics', () => {
  it(`reads Redis at most once per ${METRICS_READ_EVERY_MS} ms however often it is scraped, together or one after another`, async () => {
    const api = await startTestApi();
    const { workers } = api.app.coordinator;
    const pools = vi.spyOn(workers, 'pools');
    const started = performance.now();
    const together = await Promise.all(Array.from({ length: 20 }, () => send(api.baseUrl, 'GET', '/metrics')));
    for (let i = 0; i < 20; i++) expect((await send(api.baseUrl, 'GET', '/metrics')).status).toBe(200);
    const periods = Math.floor((performance.now() - started) / METRICS_READ_EVERY_MS) + 1;
    expect(
      together.every((r) => r.status === 200 && String(r.body).includes('cq_worker_slots{pool="default",kind="free"}')),
    ).toBe(true);
    expect(pools.mock.calls.length).toBeGreaterThanOrEqual(1);
    expect(pools.mock.calls.length).toBeLessThanOrEqual(periods);
  });
});

describe('GET /metrics on a Redis of its own', async () => {
  // Kept on disk, as a deployment's Redis must be (the API checks at start).
  const server = await startRedisServer({ args: ['--appendonly', 'yes'] });
  cleanUp(() => server.stop());
  // One interval longer than the test: every scrape after the first falls within it.
  const api = await startTestApi({}, { redisUrl: server.url, metricsReadEveryMs: 3_600_000 });
  const redis = await watchServer(server.url);
  cleanUp(() => redis.stop());
  const scrape = async (): Promise<string> => {
    const answer = await send(api.baseUrl, 'GET', '/metrics');
    expect(answer.status).toBe(200);
    return String(answer.body);
  };
  /** The one command this API sends by itself, whoever scrapes: the webhook dispatcher's poll (a GET each 10 s). */
  const dispatcherPoll = ({ args }: Seen): boolean =>
    args[0]?.toLowerCase() === 'get' && args[1] === api.app.coordinator.keys.webhooks().version;

  it('every Redis-backed gauge is read once per interval: 40 more scrapes, together and one after another, send Redis no command', async () => {
    // Something for each Redis-backed gauge to show: a host's slots, a webhook delivery waiting.
    await api.coordinator.workers.heartbeat({ workerId: 'metrics-host', slots: 4, busy: 0, startedAt: 1 }, 3_600_000);
    await api.app.webhooks.queue.add('completed', {
      webhookId: 'wh_metrics',
      eventId: '1-0-0',
      type: 'completed',
      body: '{}',
    } as never);

    let first = '';
    const read = await redis.during(async () => (first = await scrape()));
    expect(read.filter((args) => !dispatcherPoll(args)).length).toBeGreaterThan(0);
    expect(first).toContain('cq_worker_slots{pool="default",kind="total"} 4');
    expect(first).toContain('cq_worker_hosts{state="active"} 1');
    expect(first).toContain('cq_webhook_queue_jobs{state="waiting"} 1');
    expect(first).toMatch(/^cq_webhook_oldest_undelivered_seconds [0-9.e-]+$/m);

    const bodies: string[] = [];
    const after = await redis.during(async () => {
      bodies.push(...(await Promise.all(Array.from({ length: 20 }, () => scrape()))));
      for (let i = 0; i < 20; i++) bodies.push(await scrape());
    });
    expect(after.filter((args) => !dispatcherPoll(args))).toEqual([]);
    // The same values, from this process's last read.
    for (const body of bodies) {
      expect(body).toContain('cq_worker_slots{pool="default",kind="total"} 4');
      expect(body).toContain('cq_webhook_queue_jobs{state="waiting"} 1');
    }
  });
});

describe('a body of another type than JSON', () => {
  it.each([
    ['POST', '/v1/spawn', 'text/plain'],
    ['POST', '/v1/tokens', 'text/plain'],
    ['POST', '/v1/webhooks', 'application/x-www-form-urlencoded'],
    ['PATCH', '/v1/users/u/session', 'text/plain'],
    ['DELETE', '/v1/users/u/session', 'text/plain'],
    ['POST', '/v1/users/u/session/activity', 'application/octet-stream'],
    ['POST', '/v1/hosts/h/drain', 'text/plain'],
  ])('%s %s with %s is 415 unsupported_media_type', async (method, path, type) => {
    const api = await startTestApi();
    const answer = await send(api.baseUrl, method, path, {
      headers: { 'content-type': type, authorization: `Bearer test-key-0123456789abcdef` },
      body: 'token=abc',
    });
    expect(answer.status).toBe(415);
    expect(answer.body).toEqual({
      error: { code: 'unsupported_media_type', message: 'Send the body as application/json.' },
    });
  });
});
