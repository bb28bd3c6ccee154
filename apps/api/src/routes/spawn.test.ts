import { SessionExistsError, ThrottledError } from '@cq/client';
import { describe, expect, it } from 'vitest';
import { jsonHeaders, send, startTestApi } from '../test-support/app.js';
import { setTimeout as sleep } from 'node:timers/promises';

describe('POST /v1/spawn', async () => {
  const api = await startTestApi({
    TOKEN_LIMIT: '100000',
    SPAWN_INTERVAL_MS: '60000',
    SPAWN_BURST: '1',
    MAX_LIFETIME_MS: '120000',
  });
  const spawn = (token: unknown) =>
    send(api.baseUrl, 'POST', '/v1/spawn', { body: JSON.stringify({ token }), headers: jsonHeaders(false) });
  const token = async (userId: string, extra: Record<string, unknown> = {}) =>
    (await api.client.issueToken({ userId, ...extra })).token;

  it('202 admits a pending session with its fence and lifetime, and queues one spawn job', async () => {
    const res = await spawn(await token('alice', { lifetimeMs: 30_000 }));
    expect(res.status).toBe(202);
    expect(res.body).toEqual({
      sessionId: expect.any(String),
      userId: 'alice',
      fence: 1,
      state: 'pending',
      lifetimeMs: 30_000,
    });
    const jobs = await api.app.spawnQueues.all[0]!.getJobs(['wait']);
    expect(jobs.filter((j) => j.data.sessionId === res.body.sessionId)).toHaveLength(1);
    expect(jobs.find((j) => j.data.sessionId === res.body.sessionId)?.data).toEqual({
      userId: 'alice',
      sessionId: res.body.sessionId,
      fence: 1,
      pool: 'default',
    });
  });

  it('403 for unknown, used, expired and malformed tokens alike', async () => {
    const used = await token('bob');
    expect((await spawn(used)).status).toBe(202);
    const answers = await Promise.all([spawn(used), spawn('v1.Ym9i.' + 'A'.repeat(43)), spawn('garbage')]);
    for (const res of answers) {
      expect(res.status).toBe(403);
      expect(res.body).toEqual({ error: { code: 'token_invalid', message: expect.any(String) } });
    }
    expect(answers[0]!.body).toEqual(answers[1]!.body);
    expect(answers[1]!.body).toEqual(answers[2]!.body);
  });

  it('409 names the live session; 429 carries the headers; both leave the token valid', async () => {
    const first = await spawn(await token('carol'));
    const second = await token('carol');
    const conflict = await spawn(second);
    expect(conflict.status).toBe(409);
    expect(conflict.body.error).toMatchObject({ code: 'session_exists', sessionId: first.body.sessionId });
    await api.client.stopSession('carol');
    const throttled = await spawn(second);
    expect(throttled.status).toBe(429);
    expect(throttled.body.error.code).toBe('throttled');
    expect(throttled.body.error.retryAfterMs).toBeGreaterThan(55_000);
    expect(Number(throttled.headers.get('retry-after'))).toBe(Math.ceil(throttled.body.error.retryAfterMs / 1000));
    expect(throttled.headers.get('ratelimit-policy')).toBe('"spawn";q=1;w=60');
    expect(throttled.headers.get('ratelimit')).toMatch(/^"spawn";r=0;t=\d+$/);
    expect((await api.coordinator.tokens.consume(second)).consumed).toBe(true);
  });

  it('the typed client throws typed errors with their advice', async () => {
    await spawn(await token('dave'));
    await expect(api.client.spawn(await token('dave'))).rejects.toBeInstanceOf(SessionExistsError);
    await api.client.stopSession('dave');
    const err = await api.client.spawn(await token('dave')).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ThrottledError);
    expect((err as ThrottledError).retryAfterMs).toBeGreaterThan(0);
  });

  it('200 simultaneous spawns with one token: exactly one 202, all others 403', async () => {
    const t = await token('race-one-token');
    const answers = await Promise.all(Array.from({ length: 200 }, () => spawn(t)));
    expect(answers.filter((a) => a.status === 202)).toHaveLength(1);
    expect(answers.filter((a) => a.status === 403)).toHaveLength(199);
  });

  it('100 simultaneous spawns for one user with their own tokens: one 202, the rest 409 or 429, and every other token still works', async () => {
    const tokens = await Promise.all(Array.from({ length: 100 }, () => token('race-many-tokens')));
    const answers = await Promise.all(tokens.map((t) => spawn(t)));
    expect(answers.filter((a) => a.status === 202)).toHaveLength(1);
    const rest = answers.filter((a) => a.status !== 202);
    expect(rest.every((a) => a.status === 409 || a.status === 429)).toBe(true);
    const unused = tokens.filter((_, i) => answers[i]!.status !== 202);
    expect(unused).toHaveLength(99);
    const consumed = await Promise.all(unused.map((t) => api.coordinator.tokens.consume(t)));
    expect(consumed.every((c) => c.consumed)).toBe(true);
  });
});

describe('POST /v1/spawn after Retry-After', async () => {
  const api = await startTestApi({ TOKEN_LIMIT: '100', SPAWN_INTERVAL_MS: '1500', SPAWN_BURST: '1' });

  it('waiting Retry-After seconds and asking again gets 202', async () => {
    const first = await api.client.issueToken({ userId: 'patient' });
    await api.client.spawn(first.token);
    await api.client.stopSession('patient');
    const second = await api.client.issueToken({ userId: 'patient' });
    const refused = await send(api.baseUrl, 'POST', '/v1/spawn', {
      body: JSON.stringify({ token: second.token }),
      headers: jsonHeaders(false),
    });
    expect(refused.status).toBe(429);
    const seconds = Number(refused.headers.get('retry-after'));
    expect(seconds).toBeGreaterThanOrEqual(1);
    await sleep(seconds * 1000); // the claim is about this wait
    const again = await send(api.baseUrl, 'POST', '/v1/spawn', {
      body: JSON.stringify({ token: second.token }),
      headers: jsonHeaders(false),
    });
    expect(again.status).toBe(202);
  });

  describe('when the spawn queue fails to take the job', async () => {
    const api = await startTestApi({ TOKEN_LIMIT: '100000', SPAWN_INTERVAL_MS: '1', SPAWN_BURST: '100' });
    const spawn = (token: unknown) =>
      send(api.baseUrl, 'POST', '/v1/spawn', { body: JSON.stringify({ token }), headers: jsonHeaders(false) });
    const token = async (userId: string) => (await api.client.issueToken({ userId })).token;
    const queueOf = (userId: string) => api.app.spawnQueues.forUser(userId);

    it('503 rolls the admission back: the same token then works', async () => {
      const t = await token('dora');
      const queue = queueOf('dora');
      const add = queue.add.bind(queue);
      queue.add = () => Promise.reject(new Error('queue unreachable'));
      try {
        const res = await spawn(t);
        expect(res.status).toBe(503);
        expect(res.body.error).toMatchObject({
          code: 'unavailable',
          message: 'The spawn queue is unavailable; the token is still valid, retry shortly.',
        });
        await expect(api.client.findSession('dora')).resolves.toBeUndefined();
      } finally {
        queue.add = add;
      }
      expect((await spawn(t)).status).toBe(202);
    });

    it("202 when the enqueue's answer is lost but a worker host already took the job (a timed-out add that went through)", async () => {
      const t = await token('eddie');
      const queue = queueOf('eddie');
      const add = queue.add.bind(queue);
      // The job goes through and a worker host claims it, but the answer never comes back (as in a failover).
      queue.add = (async (name: string, data: { userId: string; sessionId: string; fence: number }, opts: object) => {
        await add(name, data, opts);
        await api.app.coordinator.claims.claim(data, { workerId: 'w-eddie', leaseMs: 5000, graceMs: 100 });
        return new Promise(() => {});
      }) as typeof queue.add;
      try {
        const res = await spawn(t);
        expect(res.status).toBe(202);
        expect(await api.client.getSession('eddie')).toMatchObject({
          sessionId: res.body.sessionId,
          state: 'running',
          workerId: 'w-eddie',
        });
      } finally {
        queue.add = add;
      }
    });
  });
});
