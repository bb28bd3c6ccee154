import { connect, type Socket } from 'node:net';
import { describe, expect, it } from 'vitest';
import { until } from '@cq/test-harness';
import { TEST_API_KEY, startTestApi } from '../test-support/app.js';

/** Opens a connection and resolves once it is connected, with a promise of its close. */
async function open(baseUrl: string): Promise<{ socket: Socket; closed: Promise<void>; received: () => string }> {
  const url = new URL(baseUrl);
  const socket = connect(Number(url.port), url.hostname);
  let text = '';
  socket.on('data', (chunk: Buffer) => (text += chunk.toString('latin1')));
  socket.on('error', () => {});
  const closed = new Promise<void>((resolve) => socket.once('close', () => resolve()));
  await new Promise<void>((resolve, reject) => {
    socket.once('connect', resolve);
    socket.once('error', reject);
  });
  return { socket, closed, received: () => text };
}

const isClosed = (closed: Promise<void>): Promise<boolean> =>
  Promise.race([closed.then(() => true), new Promise<boolean>((resolve) => setImmediate(() => resolve(false)))]);

describe('client connections', () => {
  it('holds at most MAX_CONNECTIONS: a connection over it is answered 503 with Retry-After and closed, counted, logged once; the bound frees as connections go', async () => {
    const api = await startTestApi({ MAX_CONNECTIONS: '16' });
    const held = await Promise.all(Array.from({ length: 16 }, () => open(api.baseUrl)));
    // Over the bound: answered before anything is read, and closed.
    const over = await Promise.all(Array.from({ length: 24 }, () => open(api.baseUrl)));
    await Promise.all(over.map((c) => c.closed));
    for (const c of over) {
      expect(c.received()).toMatch(/^HTTP\/1\.1 503 Service Unavailable\r\n/);
      expect(c.received()).toContain('Retry-After: 1\r\n');
      expect(c.received()).toContain('"code":"unavailable"');
    }
    // A client that sends its request meanwhile reads the same answer (fetch would wait for ever on a
    // connection closed without one).
    const refusedFetch = await fetch(`${api.baseUrl}/healthz`);
    expect(refusedFetch.status).toBe(503);
    expect(((await refusedFetch.json()) as { error: { message: string } }).error.message).toMatch(/MAX_CONNECTIONS/);
    for (const c of held) expect(await isClosed(c.closed)).toBe(false);
    const warnings = api.logs.filter(
      (l) => l['msg'] === 'client connections refused (counted in cq_http_connections_dropped_total)',
    );
    expect(warnings).toHaveLength(1);
    // Released, the bound serves again.
    for (const c of held) c.socket.destroy();

    await until(async () => (await fetch(`${api.baseUrl}/healthz`)).status === 200, 5000, 'served again');
    const metrics = await (await fetch(`${api.baseUrl}/metrics`)).text();
    // The 25 above, and any of the health checks that came before the released connections had closed.
    const dropped = /^cq_http_connections_dropped_total\{reason="max_connections"\} (\d+)$/m.exec(metrics);
    expect(Number(dropped?.[1])).toBeGreaterThanOrEqual(25);
    expect(metrics).toMatch(/^cq_http_max_connections 16$/m);
  });

  it('closes the connection after an answer to a request without a valid key, or for no route', async () => {
    const api = await startTestApi();
    for (const request of [
      'GET /v1/events HTTP/1.1\r\nHost: x\r\n\r\n',
      `GET /v1/events HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer not-${TEST_API_KEY}\r\n\r\n`,
      'GET /v1/nothing-here HTTP/1.1\r\nHost: x\r\n\r\n',
    ]) {
      const c = await open(api.baseUrl);
      c.socket.write(request);
      await c.closed;
      expect(c.received()).toMatch(/^HTTP\/1\.1 40[14] /);
      expect(c.received().toLowerCase()).toContain('connection: close');
    }
  });

  it('keeps an answered connection idle at most KEEP_ALIVE_TIMEOUT_MS', async () => {
    const api = await startTestApi({ KEEP_ALIVE_TIMEOUT_MS: '300' });
    const c = await open(api.baseUrl);
    c.socket.write('GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n');
    await until(() => c.received().includes('"status":"ok"'), 5000, 'answered');
    expect(c.received().toLowerCase()).toContain('keep-alive: timeout=0');
    await c.closed;
  });

  it('a failed accept (EMFILE, as libuv reports it once the descriptors are gone) is logged and counted, and the API goes on answering', async () => {
    const api = await startTestApi();
    const emfile = Object.assign(new Error('accept EMFILE'), { code: 'EMFILE', errno: -24, syscall: 'accept' });
    // What Node's net.Server does when accept(2) fails: an 'error' event on the listening server.
    api.app.server.emit('error', emfile);
    expect((await fetch(`${api.baseUrl}/healthz`)).status).toBe(200);
    const warning = api.logs.find((l) => l['acceptErrors'] === 1);
    expect(warning).toMatchObject({ err: { code: 'EMFILE' } });
    const metrics = await (await fetch(`${api.baseUrl}/metrics`)).text();
    expect(metrics).toMatch(/^cq_http_connections_dropped_total\{reason="accept_error"\} 1$/m);
  });
});
