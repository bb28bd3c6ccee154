import { readFile } from 'node:fs/promises';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { fakeDns } from '../test-support/fake-dns.js';
import { checkWebhookUrl } from './address-guard.js';
import { createHostResolver } from './host-resolver.js';
import { postWebhook } from './post-webhook.js';
import { cleanUp } from '@cq/test-harness';

/** How long `promise` takes to settle, ms, and how it settled. */
async function timed<T>(promise: Promise<T>): Promise<{ ms: number; result: T | undefined; error: unknown }> {
  const started = performance.now();
  try {
    const result = await promise;
    return { ms: performance.now() - started, result, error: undefined };
  } catch (error) {
    return { ms: performance.now() - started, result: undefined, error };
  }
}

describe('the webhook host resolver (c-ares)', async () => {
  const answering = await fakeDns({
    'both.test': ['93.184.215.14', '2606:2800:21f:cb07:6820:80da:af6b:8b2c'],
    'v4only.test': ['93.184.215.14'],
    'nothing.test': [],
  });
  const hanging = await fakeDns();

  it('answers every A and AAAA address from the DNS servers it is given', async () => {
    const resolve = createHostResolver({ servers: [answering.server] });
    expect((await resolve('both.test')).sort()).toEqual(['2606:2800:21f:cb07:6820:80da:af6b:8b2c', '93.184.215.14']);
    expect(await resolve('v4only.test')).toEqual(['93.184.215.14']);
    expect(await resolve('nothing.test')).toEqual([]);
    await expect(resolve('unknown.test')).rejects.toMatchObject({ code: 'ENOTFOUND' });
  });

  it('gives up on a DNS server that never answers at its bound, with ETIMEOUT', async () => {
    const resolve = createHostResolver({ servers: [hanging.server], tryTimeoutMs: 5000, tries: 3, timeoutMs: 300 });
    const before = hanging.asked.length;
    const { ms, error } = await timed(resolve('hangs.test'));
    expect(error).toMatchObject({ code: 'ETIMEOUT' });
    expect(ms).toBeGreaterThanOrEqual(290);
    expect(ms).toBeLessThan(1000);
    expect(hanging.asked.slice(before)).toContain('hangs.test');
  });

  it('answers an IP address as itself and localhost as loopback without asking DNS', async () => {
    const resolve = createHostResolver({ servers: [hanging.server], timeoutMs: 300 });
    const before = hanging.asked.length;
    expect(await resolve('93.184.215.14')).toEqual(['93.184.215.14']);
    expect(await resolve('::1')).toEqual(['::1']);
    expect(await resolve('localhost')).toEqual(['127.0.0.1', '::1']);
    expect(await resolve('LocalHost.')).toEqual(['127.0.0.1', '::1']);
    expect(await resolve('api.localhost')).toEqual(['127.0.0.1', '::1']);
    expect(hanging.asked.length).toBe(before);
  });

  it('keeps libuv’s thread pool free: file reads finish at once during 50 hanging lookups', async () => {
    const resolve = createHostResolver({ servers: [hanging.server], tryTimeoutMs: 5000, tries: 1, timeoutMs: 1500 });
    let settled = 0;
    const lookups = Array.from({ length: 50 }, (_, i) => resolve(`hangs-${i}.test`).finally(() => settled++));
    // dns.lookup would hold all 4 of the pool's threads now, and these reads would wait behind them.
    const reads = await timed(
      Promise.all(Array.from({ length: 8 }, () => readFile(fileURLToPath(import.meta.url), 'utf8'))),
    );
    expect(reads.error).toBeUndefined();
    expect(reads.ms).toBeLessThan(250);
    expect(settled, 'the lookups were still pending during the reads').toBe(0);
    const results = await Promise.allSettled(lookups);
    expect(results.every((r) => r.status === 'rejected' && (r.reason as { code?: string }).code === 'ETIMEOUT')).toBe(
      true,
    );
  });
});

describe('checks and attempts with a DNS that never answers', async () => {
  const hanging = await fakeDns();
  const resolve = createHostResolver({ servers: [hanging.server], tryTimeoutMs: 5000, tries: 1, timeoutMs: 300 });

  it('refuses the name at registration within the bound', async () => {
    const { ms, result } = await timed(checkWebhookUrl('https://hangs.test/hook', { allowPrivate: false, resolve }));
    expect(result).toEqual({ ok: false, reason: 'hangs.test does not resolve (ETIMEOUT)' });
    expect(ms).toBeLessThan(1000);
  });

  it('fails a delivery attempt within the bound, long before the attempt’s own deadline', async () => {
    const { ms, result } = await timed(
      postWebhook({ url: 'http://hangs.test/hook', body: '{}', allowPrivate: true, resolve, timeoutMs: 10_000 }),
    );
    expect(result).toEqual({ error: 'resolving hangs.test took longer than 300 ms' });
    expect(ms).toBeLessThan(1000);
  });

  it('connects to localhost with WEBHOOK_ALLOW_PRIVATE, and refuses it without, asking DNS nothing', async () => {
    let requests = 0;
    const server = createServer((req, res) => {
      requests++;
      req.resume();
      req.on('end', () => res.end());
    });
    await new Promise<void>((done) => server.listen(0, '127.0.0.1', done));
    cleanUp(() => new Promise<void>((done) => server.close(() => done())));
    const url = `http://localhost:${(server.address() as AddressInfo).port}/hook`;

    expect(await postWebhook({ url, body: '{}', allowPrivate: true, resolve })).toEqual({ status: 200 });
    expect(await postWebhook({ url, body: '{}', allowPrivate: false, resolve })).toEqual({
      error: 'localhost resolves to 127.0.0.1, a loopback address; set WEBHOOK_ALLOW_PRIVATE=true to allow it',
    });
    expect((await checkWebhookUrl(url, { allowPrivate: false, resolve })).ok).toBe(false);
    expect(requests).toBe(1);
    expect(hanging.asked).not.toContain('localhost');
  });
});
