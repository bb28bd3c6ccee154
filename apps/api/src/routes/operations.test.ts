import { describe, expect, it, vi } from 'vitest';
import { send, startTestApi } from '../test-support/app.js';
import { METRICS_READ_EVERY_MS } from './operations.js';

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
