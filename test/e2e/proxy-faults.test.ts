import { randomBytes } from 'node:crypto';
import { request as httpRequest } from 'node:http';
import { startRedisServer } from '@cq/test-harness';
import { describe, expect, it, onTestFinished } from 'vitest';
import { connectTo, hostRequest, originHost } from '../support/proxy.js';
import { until } from '../support/processes.js';
import { sessionProgram, startSystem, type System } from '../support/system.js';

// The session proxy under faults injected for real: a host SIGKILLed, an API process SIGKILLed in the
// middle of a stream, Redis restarted. Judged by what a client of the proxy gets.
const PROXY_SECRET = randomBytes(32).toString('hex');
const LEASE_MS = 3000;

async function proxySystem(redisUrl?: string): Promise<System> {
  return startSystem({
    ...(redisUrl === undefined ? {} : { redisUrl }),
    apiEnv: { PROXY_SECRET },
    workerEnv: {
      PROXY_SECRET,
      LEASE_MS: String(LEASE_MS),
      SESSION_COMMAND: `exec ${process.execPath} ${sessionProgram('proxy-session.mjs')}`,
    },
  });
}

/** A ready session of `userId` serving on 8080, and a connect token for it. */
async function serving(system: System, userId: string): Promise<{ sessionId: string; token: string; host: string }> {
  const { client } = system;
  const { sessionId } = await client.spawn((await client.issueToken({ userId })).token);
  await until(async () => (await client.findSession(userId))?.ready === true, 15_000, `${userId}'s session ready`);
  const { token } = await connectTo(system.api.baseUrl, sessionId);
  return { sessionId, token, host: originHost(system.api.baseUrl, sessionId, 8080) };
}

const codeOf = (body: Buffer): string | undefined => {
  try {
    return (JSON.parse(body.toString()) as { error?: { code?: string } }).error?.code;
  } catch {
    return undefined;
  }
};

describe('the session proxy under faults', () => {
  it('the host SIGKILLed: 502 host_unreachable within 2 s, then 404 no_session once the session is recorded lost', async () => {
    const system = await proxySystem();
    const { sessionId, token, host } = await serving(system, 'fault-host');
    const ask = () => hostRequest(system.api.baseUrl, host, '/echo', { headers: { 'cq-connect-token': token } });
    expect((await ask()).status).toBe(200);
    await system.workers[0]!.stop('SIGKILL');
    const killedAt = Date.now();
    let answer = await ask();
    await until(
      async () => {
        answer = await ask();
        return answer.status === 502 && codeOf(answer.body) === 'host_unreachable';
      },
      2000,
      '502 host_unreachable',
    );
    console.log(`proxy faults: host SIGKILLed, 502 host_unreachable after ${Date.now() - killedAt} ms`);
    await system.ended('fault-host', sessionId, 3 * LEASE_MS + 10_000);
    await until(
      async () => {
        answer = await ask();
        return answer.status === 404;
      },
      2000,
      '404 once the session is recorded lost',
    );
    expect(codeOf(answer.body)).toBe('no_session');
  });

  it('an API process SIGKILLed mid-stream: the client reconnects through another API process and reaches the same session', async () => {
    const system = await proxySystem();
    const { sessionId, token } = await serving(system, 'fault-api');
    const other = await system.addApi({ PROXY_SECRET });
    // A stream through the other API process, which is then killed in the middle of it.
    const port = Number(new URL(other.baseUrl).port);
    let events = 0;
    const cut = new Promise<void>((resolve) => {
      const req = httpRequest(
        {
          host: '127.0.0.1',
          port,
          path: '/sse',
          headers: { host: originHost(other.baseUrl, sessionId, 8080), 'cq-connect-token': token },
          agent: false,
        },
        (res) => {
          expect(res.statusCode).toBe(200);
          res.on('data', () => events++);
          res.on('error', () => resolve());
          res.on('close', () => resolve());
        },
      );
      req.on('error', () => resolve());
      req.end();
    });
    await until(() => events >= 3, 5000, 'events through the other API process');
    await other.stop('SIGKILL');
    await cut;
    // The same token, through the API process that is left: the same session answers.
    const again = await hostRequest(system.api.baseUrl, originHost(system.api.baseUrl, sessionId, 8080), '/echo', {
      headers: { 'cq-connect-token': token },
    });
    expect(again.status).toBe(200);
    expect(again.json<{ headers: Record<string, string> }>().headers['cq-session-id']).toBe(sessionId);
  });

  it('Redis restarted: the proxy answers again by itself', async () => {
    const server = await startRedisServer({ args: ['--appendonly', 'yes', '--appendfsync', 'always'] });
    onTestFinished(() => server.stop());
    const system = await proxySystem(server.url);
    const { sessionId, token, host } = await serving(system, 'fault-redis');
    const ask = () => hostRequest(system.api.baseUrl, host, '/echo', { headers: { 'cq-connect-token': token } });
    expect((await ask()).status).toBe(200);
    await server.halt('SIGKILL');
    await server.resume();
    // Nothing is restarted but Redis: the API's connections come back by themselves, and with them new
    // connect tokens and the lookups of the session's host (each kept a second at most).
    let fresh = await connectTo(system.api.baseUrl, sessionId).catch(() => undefined);
    await until(
      async () => {
        fresh = await connectTo(system.api.baseUrl, sessionId).catch(() => undefined);
        return fresh?.status === 201;
      },
      15_000,
      'a connect token after the restart',
    );
    const again = await hostRequest(system.api.baseUrl, host, '/echo', {
      headers: { 'cq-connect-token': fresh!.token },
    });
    expect(again.status).toBe(200);
    expect(again.json<{ headers: Record<string, string> }>().headers['cq-session-id']).toBe(sessionId);
    expect((await ask()).status).toBe(200);
  });
});
