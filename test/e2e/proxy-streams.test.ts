import { randomBytes } from 'node:crypto';
import { request as httpRequest } from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { connectTo, hostRequest, openWebSocket, originHost } from '../support/proxy.js';
import { rss, until } from '../support/processes.js';
import { sessionProgram, startSystem, type System } from '../support/system.js';

// The session proxy's streams, judged from outside: bytes counted at both ends, the API's and the
// host's memory read from /proc while they flow, events and frames as the session sent them.
const PROXY_SECRET = randomBytes(32).toString('hex');
const MB = 1024 * 1024;

describe('the session proxy streams', () => {
  let system: System;
  let sessionId: string;
  let token: string;
  let host: string;

  beforeAll(async () => {
    system = await startSystem({
      apiEnv: { PROXY_SECRET },
      workerEnv: { PROXY_SECRET, SESSION_COMMAND: `exec ${process.execPath} ${sessionProgram('proxy-session.mjs')}` },
    });
    const { client } = system;
    sessionId = (await client.spawn((await client.issueToken({ userId: 'stream-a' })).token)).sessionId;
    await until(async () => (await client.findSession('stream-a'))?.ready === true, 15_000, 'the session ready');
    token = (await connectTo(system.api.baseUrl, sessionId)).token;
    host = originHost(system.api.baseUrl, sessionId, 8080);
  });
  afterAll(async () => {
    await system.client.stopSession('stream-a').catch(() => {});
  });

  /** The API's and the host's resident memory, sampled every 20 ms while `run` runs: their highest rise. */
  async function peakGrowth(run: () => Promise<void>): Promise<{ api: number; host: number }> {
    const pids = { api: system.api.child.pid!, host: system.workers[0]!.child.pid! };
    const base = { api: rss(pids.api), host: rss(pids.host) };
    const peak = { ...base };
    const timer = setInterval(() => {
      peak.api = Math.max(peak.api, rss(pids.api));
      peak.host = Math.max(peak.host, rss(pids.host));
    }, 20);
    try {
      await run();
    } finally {
      clearInterval(timer);
    }
    return { api: peak.api - base.api, host: peak.host - base.host };
  }

  /** A raw request through the proxy; `onResponse` reads the answer as it likes. */
  function raw(
    method: string,
    path: string,
    onResponse: (res: import('node:http').IncomingMessage) => void,
  ): import('node:http').ClientRequest {
    const port = Number(new URL(system.api.baseUrl).port);
    const req = httpRequest(
      { host: '127.0.0.1', port, method, path, headers: { host, 'cq-connect-token': token }, agent: false },
      onResponse,
    );
    req.on('error', () => {});
    return req;
  }

  it('200 MB down and 200 MB up arrive whole; the API and the host each grow by less than 100 MB meanwhile', async () => {
    let received = 0;
    const down = await peakGrowth(
      () =>
        new Promise<void>((resolve, reject) => {
          raw('GET', `/bytes?n=${200 * MB}`, (res) => {
            expect(res.statusCode).toBe(200);
            res.on('data', (c: Buffer) => (received += c.length));
            res.on('end', () => resolve());
            res.on('error', reject);
          }).end();
        }),
    );
    expect(received).toBe(200 * MB);
    let counted = -1;
    const up = await peakGrowth(
      () =>
        new Promise<void>((resolve, reject) => {
          const req = raw('PUT', '/count', (res) => {
            let body = '';
            res.on('data', (c: Buffer) => (body += c.toString()));
            res.on('end', () => {
              counted = (JSON.parse(body) as { bytes: number }).bytes;
              resolve();
            });
            res.on('error', reject);
          });
          const chunk = Buffer.alloc(MB, 7);
          let sent = 0;
          const write = (): void => {
            while (sent < 200) {
              sent++;
              if (!req.write(chunk)) {
                req.once('drain', write);
                return;
              }
            }
            req.end();
          };
          write();
        }),
    );
    expect(counted).toBe(200 * MB);
    console.log(
      `proxy streams: 200 MB down, growth API ${(down.api / MB).toFixed(1)} MiB, host ${(down.host / MB).toFixed(1)} MiB; ` +
        `up, API ${(up.api / MB).toFixed(1)} MiB, host ${(up.host / MB).toFixed(1)} MiB`,
    );
    for (const growth of [down, up]) {
      expect(growth.api).toBeLessThan(100 * MB);
      expect(growth.host).toBeLessThan(100 * MB);
    }
  });

  it('a reader that stops reading makes neither the API nor the host buffer the rest: both stay under 100 MB more while the session has 200 MB to send', async () => {
    const sent = async (): Promise<number> =>
      (await hostRequest(system.api.baseUrl, host, '/sent', { headers: { 'cq-connect-token': token } })).json<{
        sent: number;
      }>().sent;
    const before = await sent();
    let res: import('node:http').IncomingMessage | undefined;
    const req = raw('GET', `/bytes?n=${200 * MB}`, (r) => {
      res = r;
      r.pause();
    });
    req.end();
    await until(() => res !== undefined, 5000, 'the answer’s headers');
    // The reader reads nothing. Backpressure reaches the session: it stops sending, far short of the 200 MB
    // (were the API or the host reading on for the reader, it would send them all); both are watched
    // meanwhile.
    let held = -1;
    const growth = await peakGrowth(async () => {
      await until(
        async () => {
          const now = (await sent()) - before;
          const stopped = now === held;
          held = now;
          return stopped && now > 0;
        },
        10_000,
        'the session to stop sending',
      );
    });
    console.log(`proxy streams: a reader that stops reading holds the session at ${(held / MB).toFixed(1)} MiB sent`);
    expect(held).toBeLessThan(100 * MB);
    expect(growth.api).toBeLessThan(100 * MB);
    expect(growth.host).toBeLessThan(100 * MB);
    // It reads again, and gets every byte.
    let received = res!.readableLength;
    await new Promise<void>((resolve) => {
      res!.on('data', (c: Buffer) => (received += c.length));
      res!.on('end', () => resolve());
      res!.resume();
    });
    expect(received).toBeGreaterThanOrEqual(200 * MB);
  });

  it('server-sent events pass one at a time, as the session writes them: a held-back event would leave this reader waiting', async () => {
    const seen: string[] = [];
    let waiting: (() => void) | undefined;
    const req = raw('GET', '/step', (res) => {
      expect(res.headers['content-type']).toBe('text/event-stream');
      res.setEncoding('utf8');
      let buffered = '';
      res.on('data', (chunk: string) => {
        buffered += chunk;
        for (let end = buffered.indexOf('\n\n'); end !== -1; end = buffered.indexOf('\n\n')) {
          seen.push(buffered.slice(0, end));
          buffered = buffered.slice(end + 2);
          waiting?.();
        }
      });
    });
    req.end();
    for (let i = 0; i < 20; i++) {
      if (seen.length <= i) await new Promise<void>((resolve) => (waiting = resolve));
      // The next event is written only once this one has arrived.
      const next = await hostRequest(system.api.baseUrl, host, '/next', {
        method: 'POST',
        headers: { 'cq-connect-token': token },
      });
      expect(next.status).toBe(204);
    }
    await until(() => seen.length === 21, 5000, 'the last event');
    expect(seen.map((e) => Number(e.replace('data: ', '')) - Number(seen[0]!.replace('data: ', '')))).toEqual(
      Array.from({ length: 21 }, (_, i) => i),
    );
    req.destroy();
  });

  it('10,000 WebSocket messages are echoed whole and in order; a client that goes away closes the session’s side within a second', async () => {
    const port = new URL(system.api.baseUrl).port;
    const ws = await openWebSocket(`ws://127.0.0.1:${port}/ws`, { host, 'cq-connect-token': token });
    const got: string[] = [];
    const all = new Promise<void>((resolve) =>
      ws.on('message', (data) => {
        got.push(data.toString());
        if (got.length === 10_000) resolve();
      }),
    );
    for (let i = 0; i < 10_000; i++) ws.send(`message ${i} ${'x'.repeat(i % 300)}`);
    await all;
    expect(got).toEqual(Array.from({ length: 10_000 }, (_, i) => `message ${i} ${'x'.repeat(i % 300)}`));
    const open = async (): Promise<number> =>
      (await hostRequest(system.api.baseUrl, host, '/ws-count', { headers: { 'cq-connect-token': token } })).json<{
        open: number;
      }>().open;
    expect(await open()).toBe(1);
    // The client's connection is cut (no close frame): the session's end closes within a second.
    ws.terminate();
    await until(async () => (await open()) === 0, 1000, 'the session’s WebSocket closed');
  });
});
