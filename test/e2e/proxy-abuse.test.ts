import { createHash, createHmac, randomBytes } from 'node:crypto';
import { loadScripts } from '@cq/coordinator';
import { setTimeout as sleep } from 'node:timers/promises';
import { connect as netConnect } from 'node:net';
import { startRedisServer, watchServer } from '@cq/test-harness';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import WebSocket from 'ws';
import { connectTo, hostRequest, openWebSocket, originHost } from '../support/proxy.js';
import { ROOT, startNode, until } from '../support/processes.js';
import { sessionProgram, startSystem, type System } from '../support/system.js';

// The session proxy against abuse from outside: its per-session bound, what a client without a valid
// token costs Redis (counted by MONITOR), a flood of bad tokens beside valid requests, and request
// smuggling forms sent as raw bytes, judged by what the session itself received.
const PROXY_SECRET = randomBytes(32).toString('hex');
const MAX = 4;

describe('the session proxy against abuse', () => {
  let system: System;
  let redisUrl: string;
  let stopRedis: () => Promise<void>;
  let sessionId: string;
  let token: string;
  let host: string;

  beforeAll(async () => {
    const server = await startRedisServer();
    redisUrl = server.url;
    stopRedis = () => server.stop();
    system = await startSystem({
      redisUrl,
      apiEnv: { PROXY_SECRET, PROXY_MAX_CONNECTIONS: String(MAX) },
      workerEnv: { PROXY_SECRET, SESSION_COMMAND: `exec ${process.execPath} ${sessionProgram('proxy-session.mjs')}` },
    });
    const { client } = system;
    sessionId = (await client.spawn((await client.issueToken({ userId: 'abuse-a' })).token)).sessionId;
    await until(async () => (await client.findSession('abuse-a'))?.ready === true, 15_000, 'the session ready');
    token = (await connectTo(system.api.baseUrl, sessionId)).token;
    host = originHost(system.api.baseUrl, sessionId, 8080);
  });
  afterAll(async () => {
    await system.client.stopSession('abuse-a').catch(() => {});
    await stopRedis();
  });

  const ask = (headers: Record<string, string>, path = '/echo') =>
    hostRequest(system.api.baseUrl, host, path, { headers });

  it(`PROXY_MAX_CONNECTIONS (${MAX}) open connections of one session through one API process; the next gets 503 proxy_busy with Retry-After, and goes through once one closes`, async () => {
    const port = new URL(system.api.baseUrl).port;
    const open: WebSocket[] = [];
    for (let i = 0; i < MAX; i++) {
      const ws = await openWebSocket(`ws://127.0.0.1:${port}/ws`, { host, 'cq-connect-token': token });
      open.push(ws);
    }
    const busy = await ask({ 'cq-connect-token': token });
    expect(busy.status).toBe(503);
    expect(busy.json<{ error: { code: string } }>().error.code).toBe('proxy_busy');
    expect(busy.headers['retry-after']).toBe('1');
    const refused = new WebSocket(`ws://127.0.0.1:${port}/ws`, { headers: { host, 'cq-connect-token': token } });
    const status = await new Promise<number>((resolve) =>
      refused.once('unexpected-response', (_req, res) => resolve(res.statusCode ?? 0)),
    );
    expect(status).toBe(503);
    const closed = new Promise((resolve) => open[0]!.once('close', resolve));
    open[0]!.close(1000);
    await closed;
    await until(async () => (await ask({ 'cq-connect-token': token })).status === 200, 2000, 'a slot again');
    for (const ws of open) ws.terminate();
  });

  it('requests without a token, or with a bad one, cost Redis nothing: the session’s host is looked up only for valid tokens, at most once a second', async () => {
    const watch = await watchServer(redisUrl);
    try {
      const lookups = (seen: Array<{ args: string[] }>): number =>
        seen.filter((s) => s.args[0]?.toLowerCase() === 'hget' && s.args[2] === 'proxy').length;
      const invalid = await watch.during(async () => {
        for (let i = 0; i < 100; i++) {
          expect((await ask({})).status).toBe(401);
          expect(
            (await ask({ 'cq-connect-token': `cqc1.${sessionId}.8080.9999999999999.${'A'.repeat(43)}` })).status,
          ).toBe(401);
          expect((await ask({ cookie: 'cq_proxy=nonsense' })).status).toBe(401);
        }
      });
      expect(lookups(invalid)).toBe(0);
      const startedAt = Date.now();
      const valid = await watch.during(async () => {
        for (let i = 0; i < 300; i++) expect((await ask({ 'cq-connect-token': token })).status).toBe(200);
      });
      const seconds = (Date.now() - startedAt) / 1000;
      console.log(`proxy abuse: 300 valid requests in ${seconds.toFixed(2)} s cost ${lookups(valid)} host lookups`);
      expect(lookups(valid)).toBeLessThanOrEqual(Math.ceil(seconds) + 1);
    } finally {
      await watch.stop();
    }
  });

  it('a flood of bad tokens, 2,000 at once, locks out no valid request beside it', async () => {
    const bad = Array.from({ length: 2000 }, (_, i) =>
      ask({
        'cq-connect-token': `cqc1.${sessionId}.8080.9999999999999.${randomBytes(32).toString('base64url').slice(0, 43)}${i % 10}`,
      }),
    );
    // The valid ones one after another (this API allows the session MAX at once) while the flood is in flight.
    const good = (async () => {
      const answers = [];
      for (let i = 0; i < 50; i++) answers.push(await ask({ 'cq-connect-token': token }));
      return answers;
    })();
    const [badAnswers, goodAnswers] = await Promise.all([Promise.all(bad), good]);
    expect(new Set(badAnswers.map((a) => a.status))).toEqual(new Set([401]));
    expect(goodAnswers.map((a) => a.status)).toEqual(goodAnswers.map(() => 200));
  });

  it('requests through the proxy are activity: a session with a 2 s idle timeout stays running while used for 5 s, at most one activity write a second; left alone, it stops idle', async () => {
    const { client } = system;
    const idle = await client.spawn((await client.issueToken({ userId: 'abuse-idle', idleTimeoutMs: 2000 })).token);
    await until(async () => (await client.findSession('abuse-idle'))?.ready === true, 15_000, 'the session ready');
    const idleToken = (await connectTo(system.api.baseUrl, idle.sessionId)).token;
    const idleHost = originHost(system.api.baseUrl, idle.sessionId, 8080);
    const watch = await watchServer(redisUrl);
    let used = 0;
    const startedAt = Date.now();
    const writes = await watch
      .during(async () => {
        // The workload: a request every 100 ms for 5 s (2.5 idle timeouts).
        while (Date.now() - startedAt < 5000) {
          const answer = await hostRequest(system.api.baseUrl, idleHost, '/echo', {
            headers: { 'cq-connect-token': idleToken },
          });
          expect(answer.status).toBe(200);
          used++;
          await sleep(100);
        }
      })
      .finally(() => watch.stop());
    // The watch's window: the workload, then until MONITOR caught up (a write due at the end of the
    // last second of activity may land in it).
    const windowSeconds = (Date.now() - startedAt) / 1000;
    // The API's activity writes: calls of recordActivity (the host's renewals write the session's activity
    // too, on their own schedule).
    const sha = createHash('sha1').update(loadScripts().get('recordActivity')!.lua).digest('hex');
    const activity = writes.filter((w) => w.args[0]?.toLowerCase() === 'evalsha' && w.args[1] === sha);
    console.log(
      `proxy activity: ${used} requests in 5 s wrote activity ${activity.length} times (window ${windowSeconds.toFixed(1)} s)`,
    );
    expect((await client.findSession('abuse-idle'))?.state).toBe('running');
    expect(activity.length).toBeGreaterThanOrEqual(3);
    // One a second at most: no more than a write per whole second of the window, plus the first.
    expect(activity.length).toBeLessThanOrEqual(Math.ceil(windowSeconds) + 1);
    const ended = await system.ended('abuse-idle', idle.sessionId, 10_000);
    expect(ended).toMatchObject({ state: 'stopped', reason: 'idle' });
  });

  it('the host’s listener refuses anything without a valid ticket before a byte reaches a session: garbage, a ticket of another secret, an expired one', async () => {
    const started = await system.workers[0]!.waitForLog((l) => l['msg'] === 'session proxy listener started');
    const [listenHost, listenPort] = String(started['advertise']).split(':') as [string, string];
    const seenBefore = (await ask({ 'cq-connect-token': token }, '/seen')).json<{ seen: string[] }>().seen.length;
    const ticket = (secret: string, expiresAt: number): string => {
      const body = `CQP1 ${sessionId} 8080 ${expiresAt}`;
      const key = createHmac('sha256', secret).update('cq session proxy: host ticket').digest();
      return `${body} ${createHmac('sha256', key).update(body).digest('hex')}\n`;
    };
    const request = `GET /hidden HTTP/1.1\r\nHost: x\r\n\r\n`;
    const attempts = [
      request,
      `CQP1 ${sessionId} 8080 ${Date.now() + 10_000} ${'0'.repeat(64)}\n${request}`,
      ticket(randomBytes(32).toString('hex'), Date.now() + 10_000) + request,
      ticket(PROXY_SECRET, Date.now() - 1000) + request,
    ];
    for (const bytes of attempts) {
      const answer = await new Promise<string>((resolve) => {
        const socket = netConnect({ host: listenHost, port: Number(listenPort) });
        let got = '';
        socket.on('data', (c: Buffer) => (got += c.toString('latin1')));
        socket.on('error', () => {});
        socket.on('close', () => resolve(got));
        socket.setTimeout(7000, () => socket.destroy());
        socket.write(bytes);
      });
      expect(answer).toBe('CQP1 ERR unauthorized\n');
    }
    // The right secret, and the session answers (the refusals above were about the tickets alone).
    const good = await new Promise<string>((resolve) => {
      const socket = netConnect({ host: listenHost, port: Number(listenPort) });
      let got = '';
      socket.on('data', (c: Buffer) => {
        got += c.toString('latin1');
        if (got.includes('\r\n\r\n')) socket.destroy();
      });
      socket.on('close', () => resolve(got));
      socket.write(ticket(PROXY_SECRET, Date.now() + 10_000) + `GET /echo HTTP/1.1\r\nHost: x\r\n\r\n`);
    });
    expect(good.startsWith('CQP1 OK\nHTTP/1.1 200 OK')).toBe(true);
    const seen = (await ask({ 'cq-connect-token': token }, '/seen')).json<{ seen: string[] }>().seen.slice(seenBefore);
    expect(seen).toEqual(['GET /echo']);
  });

  it('a client without a token that sends a body slowly is answered 401 and its connection closed, not held', async () => {
    const closedByServer = await new Promise<{ answer: string; ended: boolean }>((resolve) => {
      const socket = netConnect({ host: '127.0.0.1', port: Number(new URL(system.api.baseUrl).port) });
      let answer = '';
      let ended = false;
      socket.on('data', (c: Buffer) => (answer += c.toString('latin1')));
      socket.on('end', () => (ended = true));
      socket.on('error', () => {});
      socket.on('close', () => resolve({ answer, ended }));
      // Without an end of its own: the test gives up after 8 s, the server should not wait so long.
      socket.setTimeout(8000, () => socket.destroy());
      socket.write(`POST /echo HTTP/1.1\r\nHost: ${host}\r\nContent-Length: 1000000000\r\n\r\nsome`);
      const drip = setInterval(() => (socket.writable ? socket.write('x') : clearInterval(drip)), 200);
      socket.once('close', () => clearInterval(drip));
    });
    expect(closedByServer.answer).toMatch(/^HTTP\/1\.1 401 /);
    expect(closedByServer.answer.toLowerCase()).toContain('connection: close');
    expect(closedByServer.ended).toBe(true);
  });

  it('a host whose PROXY_LISTEN is taken exits 1 with one line naming the variable', async () => {
    const taken = new URL(system.api.baseUrl).port;
    const host = startNode(`${ROOT}apps/worker/dist/main.js`, {
      ...system.workerEnv,
      WORKER_ID: 'proxy-listen-taken',
      PROXY_LISTEN: `127.0.0.1:${taken}`,
    });
    expect((await host.exited()).code).toBe(1);
    expect(host.stderr.join('')).toBe(
      `PROXY_LISTEN: cannot listen on 127.0.0.1:${taken} (EADDRINUSE: another process listens there); ` +
        'pick a free port on an address of this machine\n',
    );
  });

  /** Sends raw bytes to the API, answers what came back until the connection closed (or 2 s passed). */
  function rawExchange(bytes: string): Promise<string> {
    return new Promise((resolve) => {
      const socket = netConnect({ host: '127.0.0.1', port: Number(new URL(system.api.baseUrl).port) });
      let got = '';
      socket.on('data', (c: Buffer) => (got += c.toString('latin1')));
      socket.on('error', () => {});
      socket.on('close', () => resolve(got));
      socket.setTimeout(2000, () => socket.destroy());
      socket.write(bytes);
    });
  }

  it('request smuggling forms are refused or normalised: the session receives exactly the requests the proxy answered, never a hidden one', async () => {
    const seenBefore = (await ask({ 'cq-connect-token': token }, '/seen')).json<{ seen: string[] }>().seen.length;
    const head = (extra: string) => `Host: ${host}\r\nCQ-Connect-Token: ${token}\r\n${extra}`;
    const hidden = `GET /smuggled HTTP/1.1\r\nHost: ${host}\r\nCQ-Connect-Token: ${token}\r\n\r\n`;
    const forms: Array<[string, string]> = [
      [
        'two different Content-Lengths',
        `POST /echo HTTP/1.1\r\n${head(`Content-Length: 4\r\nContent-Length: ${4 + hidden.length}\r\n\r\n`)}abcd${hidden}`,
      ],
      [
        'Content-Length beside Transfer-Encoding (CL.TE)',
        `POST /echo HTTP/1.1\r\n${head(`Content-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n`)}0\r\n\r\n${hidden}`,
      ],
      [
        'an obfuscated Transfer-Encoding (TE.TE)',
        `POST /echo HTTP/1.1\r\n${head(`Transfer-Encoding: chunked\r\nTransfer-Encoding: x\r\nContent-Length: 3\r\n\r\n`)}0\r\n\r\n${hidden}`,
      ],
      [
        'a Transfer-Encoding with a space before the colon',
        `POST /echo HTTP/1.1\r\n${head(`Transfer-Encoding : chunked\r\n\r\n`)}0\r\n\r\n${hidden}`,
      ],
      ['an absolute-form target naming another host', `GET http://evil.example/echo HTTP/1.1\r\n${head('\r\n')}`],
      ['a request line with a bare LF', `GET /echo HTTP/1.1\n${head('\r\n')}`],
    ];
    const outcomes: string[] = [];
    for (const [what, bytes] of forms) {
      const answer = await rawExchange(bytes);
      const statuses = [...answer.matchAll(/HTTP\/1\.1 (\d{3})/g)].map((m) => m[1]);
      outcomes.push(`${what}: ${statuses.join(', ') || 'closed'}`);
    }
    console.log(`proxy abuse: ${outcomes.join('; ')}`);
    const seen = (await ask({ 'cq-connect-token': token }, '/seen')).json<{ seen: string[] }>().seen.slice(seenBefore);
    expect(seen.filter((line) => line.includes('smuggled'))).toEqual([]);
    // Whatever the session got was answered to the client as one request each: no more than the 200s sent back.
    const answered = outcomes.reduce((n, o) => n + (o.match(/200/g)?.length ?? 0), 0);
    expect(seen.length).toBeLessThanOrEqual(answered);
    // The absolute form never reaches another host: refused.
    expect(outcomes.find((o) => o.startsWith('an absolute-form'))).toMatch(/: 400$/);
  });
});
