import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { createServer, type AddressInfo } from 'node:net';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import WebSocket from 'ws';
import { cq, cqStarted } from '../support/cli.js';
import { connectTo, hostRequest, openWebSocket, originHost } from '../support/proxy.js';
import { until } from '../support/processes.js';
import { API_KEY, sessionProgram, startSystem, type System } from '../support/system.js';

// The session proxy (the contract's "The session proxy"): every request reaches a session's port only
// through the API, with a connect token, on the session's own origin.
const PROXY_SECRET = randomBytes(32).toString('hex');

/** A port nothing listens on now (the system's choice). */
function freePort(): Promise<number> {
  return new Promise((resolve) => {
    const server = createServer().listen(0, '127.0.0.1', () => {
      const { port } = server.address() as AddressInfo;
      server.close(() => resolve(port));
    });
  });
}

describe('the session proxy', () => {
  let system: System;
  const sessions = new Map<string, { sessionId: string; fence: number }>();

  /** A session serving proxy-session.mjs on port 8080, ready. */
  async function serving(userId: string): Promise<string> {
    const { client } = system;
    const session = await client.spawn((await client.issueToken({ userId })).token);
    sessions.set(userId, session);
    await until(async () => (await client.findSession(userId))?.ready === true, 15_000, `${userId}'s session ready`);
    return session.sessionId;
  }

  beforeAll(async () => {
    system = await startSystem({
      apiEnv: { PROXY_SECRET },
      workerEnv: {
        PROXY_SECRET,
        SESSION_COMMAND: `exec ${process.execPath} ${sessionProgram('proxy-session.mjs')}`,
        SLOTS: '8',
      },
    });
  });
  afterAll(async () => {
    for (const userId of sessions.keys()) await system.client.stopSession(userId).catch(() => {});
  });

  it('a connect token opens its session’s port from a program (CQ-Connect-Token); the session sees the request as sent, less the proxy’s own', async () => {
    const sessionId = await serving('proxy-a');
    const connect = await connectTo(system.api.baseUrl, sessionId);
    expect(connect.status).toBe(201);
    expect(connect.port).toBe(8080);
    expect(connect.url).toMatch(new RegExp(`^http://8080-${sessionId}\\.localhost:\\d+/\\?cq_connect=`));
    const host = originHost(system.api.baseUrl, sessionId, 8080);
    const res = await hostRequest(system.api.baseUrl, host, '/echo?a=1&cq_connect=x&b=2', {
      method: 'POST',
      headers: {
        'cq-connect-token': connect.token,
        'x-forwarded-for': '203.0.113.9',
        'x-forwarded-host': 'evil.example',
        'cq-user-id': 'someone-else',
        'cq-session-id': 'not-this',
        cookie: `cq_proxy=${connect.token}; theirs=1`,
        'content-type': 'text/plain',
      },
      body: 'hello',
    });
    expect(res.status).toBe(200);
    const seen = res.json<{ method: string; url: string; headers: Record<string, string>; body: number }>();
    expect(seen.method).toBe('POST');
    expect(seen.url).toBe('/echo?a=1&b=2');
    expect(seen.body).toBe(5);
    expect(seen.headers['host']).toBe(host);
    expect(seen.headers['cq-user-id']).toBe('proxy-a');
    expect(seen.headers['cq-session-id']).toBe(sessionId);
    expect(seen.headers['x-forwarded-for']).toBe('127.0.0.1');
    expect(seen.headers['x-forwarded-host']).toBe(host);
    expect(seen.headers['x-forwarded-proto']).toBe('http');
    expect(seen.headers['cookie']).toBe('theirs=1');
    expect(seen.headers['cq-connect-token']).toBeUndefined();
    expect(JSON.stringify(seen)).not.toContain(connect.token);
  });

  it('a connect URL is exchanged for a host-only HttpOnly SameSite=Lax cookie and a redirect without the token; the cookie then opens the page', async () => {
    const sessionId = sessions.get('proxy-a')?.sessionId ?? (await serving('proxy-a'));
    const connect = await connectTo(system.api.baseUrl, sessionId);
    const host = originHost(system.api.baseUrl, sessionId, 8080);
    const url = new URL(connect.url);
    const first = await hostRequest(system.api.baseUrl, host, `${url.pathname}${url.search}`);
    expect(first.status).toBe(302);
    expect(first.headers['location']).toBe('/');
    const cookie = String(first.headers['set-cookie']);
    expect(cookie).toMatch(/^cq_proxy=cqc1\.[^;]+; Path=\/; Max-Age=\d+; HttpOnly; SameSite=Lax$/);
    expect(cookie).not.toMatch(/Domain/i);
    const page = await hostRequest(system.api.baseUrl, host, '/', { headers: { cookie: cookie.split(';')[0]! } });
    expect(page.status).toBe(200);
    expect(page.body.toString()).toContain('<script src="/app.js">');
  });

  it('refuses: no token 401, a bad one 401, another session’s 403, another port’s 403, a closed port 502 port_closed', async () => {
    const a = sessions.get('proxy-a')?.sessionId ?? (await serving('proxy-a'));
    const b = await serving('proxy-b');
    const tokenA = (await connectTo(system.api.baseUrl, a)).token;
    const hostB = originHost(system.api.baseUrl, b, 8080);
    const cases: Array<[Record<string, string>, string, number, string]> = [
      [{}, hostB, 401, 'unauthorized'],
      [{ 'cq-connect-token': `${tokenA}x` }, hostB, 401, 'unauthorized'],
      [{ 'cq-connect-token': tokenA }, hostB, 403, 'forbidden'],
      [{ 'cq-connect-token': tokenA }, originHost(system.api.baseUrl, a, 9090), 403, 'forbidden'],
    ];
    for (const [headers, host, status, code] of cases) {
      const res = await hostRequest(system.api.baseUrl, host, '/echo', { headers });
      expect(res.status, `${host} ${JSON.stringify(headers)}`).toBe(status);
      expect(res.json<{ error: { code: string } }>().error.code).toBe(code);
    }
    const closed = await connectTo(system.api.baseUrl, a, { port: 9090 });
    const res = await hostRequest(system.api.baseUrl, originHost(system.api.baseUrl, a, 9090), '/', {
      headers: { 'cq-connect-token': closed.token },
    });
    expect(res.status).toBe(502);
    expect(res.json<{ error: { code: string } }>().error.code).toBe('port_closed');
  });

  it('WebSockets with the header token: 2,000 messages echoed whole and in order', async () => {
    const sessionId = sessions.get('proxy-b')?.sessionId ?? (await serving('proxy-b'));
    const { token } = await connectTo(system.api.baseUrl, sessionId);
    const port = new URL(system.api.baseUrl).port;
    const ws = await openWebSocket(`ws://127.0.0.1:${port}/ws`, {
      host: originHost(system.api.baseUrl, sessionId, 8080),
      'cq-connect-token': token,
    });
    const got: string[] = [];
    const all = new Promise<void>((resolve) =>
      ws.on('message', (data) => {
        got.push(data.toString());
        if (got.length === 2000) resolve();
      }),
    );
    for (let i = 0; i < 2000; i++) ws.send(`m${i}`);
    await all;
    expect(got).toEqual(Array.from({ length: 2000 }, (_, i) => `m${i}`));
    const closed = new Promise<number>((resolve) => ws.once('close', (code) => resolve(code)));
    ws.close(1000);
    expect(await closed).toBe(1000);
  });

  it('the API-origin route /v1/sessions/{id}/ports/{port}/ takes an API key, answers with CSP sandbox, and passes no Authorization on', async () => {
    const sessionId = sessions.get('proxy-a')?.sessionId ?? (await serving('proxy-a'));
    const res = await fetch(`${system.api.baseUrl}/v1/sessions/${sessionId}/ports/8080/echo?x=1`, {
      headers: { authorization: `Bearer ${API_KEY}` },
    });
    expect(res.status).toBe(200);
    expect(res.headers.get('content-security-policy')).toBe('sandbox');
    const seen = (await res.json()) as { url: string; headers: Record<string, string> };
    expect(seen.url).toBe('/echo?x=1');
    expect(seen.headers['authorization']).toBeUndefined();
    const anonymous = await fetch(`${system.api.baseUrl}/v1/sessions/${sessionId}/ports/8080/echo`);
    expect(anonymous.status).toBe(401);
  });

  it('cq open prints a connect URL of the user’s session (its ready port by default, --port another); cq forward serves the port locally, tried with curl', async () => {
    const sessionId = sessions.get('proxy-a')?.sessionId ?? (await serving('proxy-a'));
    const env = { CQ_API_URL: system.api.baseUrl, CQ_API_KEY: API_KEY };
    const opened = await cq(['open', 'proxy-a'], env);
    expect(opened.code, opened.stderr).toBe(0);
    expect(opened.stdout.trim()).toMatch(
      new RegExp(`^http://8080-${sessionId}\\.localhost:\\d+/\\?cq_connect=cqc1\\.`),
    );
    const other = await cq(['open', 'proxy-a', '--port', '9090', '--json'], env);
    expect(JSON.parse(other.stdout)).toMatchObject({ port: 9090 });
    expect((await cq(['open', 'nobody-here'], env)).code).toBe(5);

    const localPort = await freePort();
    const forwarding = cqStarted(['forward', 'proxy-a', `${localPort}:8080`], env);
    await until(() => forwarding.output.stderr.includes('forwarding'), 10_000, 'cq forward listening');
    const curl = promisify(execFile);
    const { stdout } = await curl('curl', [
      '-sS',
      '-X',
      'POST',
      '--data',
      'hello',
      `http://127.0.0.1:${localPort}/echo?q=1`,
    ]);
    const seen = JSON.parse(stdout) as { method: string; url: string; body: number; headers: Record<string, string> };
    expect(seen).toMatchObject({ method: 'POST', url: '/echo?q=1', body: 5 });
    expect(seen.headers['cq-session-id']).toBe(sessionId);
    const big = await curl('curl', [
      '-sS',
      '-o',
      '/dev/null',
      '-w',
      '%{http_code} %{size_download}',
      `http://127.0.0.1:${localPort}/bytes?n=5000000`,
    ]);
    expect(big.stdout).toBe('200 5000000');
    // A WebSocket through the forwarded port.
    const ws = await openWebSocket(`ws://127.0.0.1:${localPort}/ws`);
    const echoed = new Promise<string>((resolve) => ws.once('message', (data) => resolve(data.toString())));
    ws.send('through cq forward');
    expect(await echoed).toBe('through cq forward');
    ws.close(1000);
    forwarding.stop();
    expect(await forwarding.exited).toBe(0);
  });

  it('the client: connect() answers the URL, the origin, the headers and the WebSocket URL a program uses', async () => {
    const sessionId = sessions.get('proxy-a')?.sessionId ?? (await serving('proxy-a'));
    const session = await system.client.session(sessionId);
    const connection = await session.connect();
    expect(connection.port).toBe(8080);
    expect(connection.origin).toBe(`http://8080-${sessionId}.localhost:${new URL(system.api.baseUrl).port}`);
    expect(connection.headers).toEqual({ 'CQ-Connect-Token': connection.token });
    expect(connection.webSocketUrl('/ws')).toBe(
      `ws://8080-${sessionId}.localhost:${new URL(system.api.baseUrl).port}/ws`,
    );
    const host = new URL(connection.origin).host;
    const res = await hostRequest(system.api.baseUrl, host, '/echo', { headers: { ...connection.headers } });
    expect(res.status).toBe(200);
    const ws = await openWebSocket(`ws://127.0.0.1:${new URL(system.api.baseUrl).port}/ws`, {
      host,
      ...connection.headers,
    });
    ws.close(1000);
  });

  it('the built-in demo session serves a small page on port 8080 and announces it: cq open works on it as it is', async () => {
    await system.addWorker('demo-host', { SESSION_COMMAND: '', POOL: 'demo' });
    const { client } = system;
    const { sessionId } = await client.spawn((await client.issueToken({ userId: 'proxy-demo', pool: 'demo' })).token);
    sessions.set('proxy-demo', { sessionId, fence: 1 });
    await until(async () => (await client.findSession('proxy-demo'))?.ready === true, 15_000, 'the demo ready');
    expect((await client.findSession('proxy-demo'))?.port).toBe(8080);
    const env = { CQ_API_URL: system.api.baseUrl, CQ_API_KEY: API_KEY };
    const opened = await cq(['open', 'proxy-demo', '--json'], env);
    const { url } = JSON.parse(opened.stdout) as { url: string };
    const first = await hostRequest(
      system.api.baseUrl,
      new URL(url).host,
      `${new URL(url).pathname}${new URL(url).search}`,
    );
    const cookie = String(first.headers['set-cookie']).split(';')[0]!;
    const page = await hostRequest(system.api.baseUrl, new URL(url).host, '/', { headers: { cookie } });
    expect(page.status).toBe(200);
    expect(page.body.toString()).toContain(`User <b>proxy-demo</b>, session <code>${sessionId}</code>`);
  });

  it('with the proxy’s cookie, another origin’s page (a sibling session) may not open a WebSocket or POST; the session’s own page may', async () => {
    const a = sessions.get('proxy-a')?.sessionId ?? (await serving('proxy-a'));
    const b = sessions.get('proxy-b')?.sessionId ?? (await serving('proxy-b'));
    const { token } = await connectTo(system.api.baseUrl, a);
    const hostA = originHost(system.api.baseUrl, a, 8080);
    const cookie = `cq_proxy=${token}`;
    const siblingOrigin = `http://${originHost(system.api.baseUrl, b, 8080)}`;
    const post = (origin: string) =>
      hostRequest(system.api.baseUrl, hostA, '/echo', { method: 'POST', headers: { cookie, origin }, body: 'x' });
    expect((await post(siblingOrigin)).status).toBe(403);
    expect((await post(`http://${hostA}`)).status).toBe(200);
    const port = new URL(system.api.baseUrl).port;
    const upgrade = (origin: string) =>
      new Promise<number>((resolve) => {
        const ws = new WebSocket(`ws://127.0.0.1:${port}/ws`, { headers: { host: hostA, cookie, origin } });
        ws.once('open', () => {
          ws.close(1000);
          resolve(101);
        });
        ws.once('unexpected-response', (_req, res) => resolve(res.statusCode ?? 0));
      });
    expect(await upgrade(siblingOrigin)).toBe(403);
    expect(await upgrade(`http://${hostA}`)).toBe(101);
  });

  it('a session’s own 503 reaches the client as it is, sent to the session once (no retries on its behalf); an h2c offer to the API is answered as a plain request', async () => {
    const sessionId = sessions.get('proxy-a')?.sessionId ?? (await serving('proxy-a'));
    const { token } = await connectTo(system.api.baseUrl, sessionId);
    const host = originHost(system.api.baseUrl, sessionId, 8080);
    const seen = async () =>
      (await hostRequest(system.api.baseUrl, host, '/seen', { headers: { 'cq-connect-token': token } })).json<{
        seen: string[];
      }>().seen;
    const before = (await seen()).length;
    const busy = await hostRequest(system.api.baseUrl, host, '/unavailable', {
      headers: { 'cq-connect-token': token },
    });
    expect(busy.status).toBe(503);
    expect(busy.body.toString()).toBe('busy');
    expect((await seen()).slice(before)).toEqual(['GET /unavailable']);
    const curl = promisify(execFile);
    const { stdout } = await curl('curl', [
      '-sS',
      '--http2',
      '-o',
      '/dev/null',
      '-w',
      '%{http_code}',
      `${system.api.baseUrl}/healthz`,
    ]);
    expect(stdout).toBe('200');
  });

  it('on the host’s network a token opens only its own session’s port: another session’s port, or the host’s, is 502 port_closed', async () => {
    await system.addWorker('hostnet-host', { POOL: 'hostnet', SESSION_NETWORK: 'host' });
    const { client } = system;
    const ports = [await freePort(), await freePort()];
    const ids: string[] = [];
    for (const [i, port] of ports.entries()) {
      const userId = `proxy-hostnet-${i}`;
      const { sessionId } = await client.spawn(
        (await client.issueToken({ userId, pool: 'hostnet', metadata: { port } })).token,
      );
      sessions.set(userId, { sessionId, fence: 1 });
      await until(async () => (await client.findSession(userId))?.port === port, 15_000, `${userId} ready`);
      ids.push(sessionId);
    }
    const ask = async (sessionId: string, port: number) => {
      const { token } = await connectTo(system.api.baseUrl, sessionId, { port });
      return hostRequest(system.api.baseUrl, originHost(system.api.baseUrl, sessionId, port), '/echo', {
        headers: { 'cq-connect-token': token },
      });
    };
    expect((await ask(ids[0]!, ports[0]!)).status).toBe(200);
    const other = await ask(ids[0]!, ports[1]!);
    expect(other.status).toBe(502);
    expect(other.json<{ error: { code: string } }>().error.code).toBe('port_closed');
    // The API's own port, on the same loopback: not the session's either.
    const api = await ask(ids[1]!, Number(new URL(system.api.baseUrl).port));
    expect(api.json<{ error: { code: string } }>().error.code).toBe('port_closed');
  });

  it('a session that ends closes its proxied connections at once, and its token then gets 404 no_session', async () => {
    const sessionId = await serving('proxy-c');
    const { token } = await connectTo(system.api.baseUrl, sessionId);
    const host = originHost(system.api.baseUrl, sessionId, 8080);
    const port = new URL(system.api.baseUrl).port;
    const ws = await openWebSocket(`ws://127.0.0.1:${port}/ws`, { host, 'cq-connect-token': token });
    const closedAt = new Promise<number>((resolve) => ws.once('close', () => resolve(Date.now())));
    const stoppedAt = Date.now();
    await system.client.stopSession('proxy-c');
    await system.ended('proxy-c', sessionId);
    const endedAt = Date.now();
    expect(await closedAt).toBeLessThanOrEqual(endedAt + 1000);
    expect(await closedAt).toBeGreaterThanOrEqual(stoppedAt);
    // At once: the first request after the end is refused (the host no longer runs it, whatever the API
    // still had of it in its lookup's second).
    const res = await hostRequest(system.api.baseUrl, host, '/echo', { headers: { 'cq-connect-token': token } });
    expect(res.status).toBe(404);
    expect(res.json<{ error: { code: string } }>().error.code).toBe('no_session');
    sessions.delete('proxy-c');
  });
});
