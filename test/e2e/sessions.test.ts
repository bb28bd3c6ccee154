import { LifetimeTooLongError, NoSessionError } from '@cq/client';
import { describe, expect, it } from 'vitest';
import { alive, sessionPids, until } from '../support/processes.js';
import { startSystem } from '../support/system.js';

describe('sessions end to end through the API', async () => {
  const system = await startSystem({ apiEnv: { PENDING_TIMEOUT_MS: '60000' } });
  const { client } = system;
  const spawn = async (userId: string, metadata: Record<string, unknown> = {}, extra: { lifetimeMs?: number } = {}) =>
    client.spawn((await client.issueToken({ userId, metadata, ...extra })).token);

  it('completed: the process exits 0 on its own', async () => {
    const s = await spawn('u-completed', { durationMs: 300 });
    expect(await system.ended('u-completed', s.sessionId)).toMatchObject({
      state: 'completed',
      exitCode: 0,
      workerId: 'host-1',
      fence: s.fence,
    });
  });

  it('failed: the process exits non-zero on its own', async () => {
    const s = await spawn('u-failed', { durationMs: 300, exitCode: 7 });
    expect(await system.ended('u-failed', s.sessionId)).toMatchObject({ state: 'failed', exitCode: 7 });
  });

  it('running: the session shows its worker host, lease (held under its host lease as it runs) and deadline while it runs', async () => {
    const s = await spawn('u-running', {}, { lifetimeMs: 60_000 });
    await until(async () => (await client.findSession('u-running'))?.state === 'running', 10_000, 'running');
    const live = await client.getSession('u-running');
    expect(live).toMatchObject({ sessionId: s.sessionId, workerId: 'host-1', state: 'running' });
    expect(Date.parse(live.deadline!) - Date.parse(live.startedAt!)).toBe(60_000);
    // The lease shown is the session's own (renewals move the lease, not the session's record): once the
    // host holds the session under its host lease (its first heartbeat after the start), it is renewed
    // to 20 leases ahead (LEASE_MS 3000 here), the host lease keeping the session within LEASE_MS.
    expect(Date.parse(live.leaseExpiresAt!)).toBeGreaterThan(Date.now());
    await until(
      async () => Date.parse((await client.getSession('u-running')).leaseExpiresAt!) > Date.now() + 20 * 3000 - 5000,
      5000,
      'the lease shown renewed as the session is held under its host lease',
    );
    await client.stopSession('u-running');
    await system.ended('u-running', s.sessionId);
  });

  it('ready: a session that announces itself on SESSION_NOTIFY_FD shows ready and its endpoint; before that it runs, not ready', async () => {
    await spawn('u-ready', { readyAfterMs: 500, endpoint: 'http://10.1.2.3:8888' });
    await until(async () => (await client.findSession('u-ready'))?.state === 'running', 10_000, 'running');
    expect(await client.getSession('u-ready')).toMatchObject({ state: 'running', ready: false });
    expect((await client.getSession('u-ready')).endpoint).toBeUndefined();
    await until(async () => (await client.findSession('u-ready'))?.ready === true, 5000, 'ready');
    expect(await client.getSession('u-ready')).toMatchObject({ ready: true, endpoint: 'http://10.1.2.3:8888' });
    await client.stopSession('u-ready');
  });

  it('stopped: a stop through the API is noticed within 1 s and ends the process', async () => {
    const s = await spawn('u-stopped');
    await until(async () => (await client.findSession('u-stopped'))?.state === 'running', 10_000, 'running');
    await until(() => system.observed().some((o) => o.userId === 'u-stopped'), 5000, 'session process beating');
    const pids = sessionPids('u-stopped');
    expect(pids.length).toBeGreaterThan(0);
    const askedAt = Date.now();
    expect((await client.stopSession('u-stopped')).state).toBe('stopping');
    const entry = await system.ended('u-stopped', s.sessionId);
    expect(entry).toMatchObject({ state: 'stopped', exitCode: 143 });
    // Noticed at once (the host's channel; within a renewal, a second here, at worst), then SIGTERM ends it.
    expect(Date.parse(entry.endedAt) - askedAt).toBeLessThan(1000 + 500);
    expect(pids.some(alive)).toBe(false);
  });

  it('a session that ignores SIGTERM is still killed after the grace time', async () => {
    const s = await spawn('u-stubborn', { ignoreTerm: true });
    await until(() => system.observed().some((o) => o.userId === 'u-stubborn'), 10_000, 'session process beating');
    const pids = sessionPids('u-stubborn');
    expect(pids.length).toBeGreaterThan(0);
    const askedAt = Date.now();
    await client.stopSession('u-stubborn');
    const entry = await system.ended('u-stubborn', s.sessionId);
    expect(entry).toMatchObject({ state: 'stopped', exitCode: 137 });
    // It outlived SIGTERM by the grace time (1 s), then SIGKILL ended it.
    expect(Date.parse(entry.endedAt) - askedAt).toBeGreaterThanOrEqual(1000);
    expect(pids.some(alive)).toBe(false);
  });

  it('expired: a session with lifetimeMs 2000 that would run forever ends within 2000 ms + SESSION_GRACE_MS + 1 s', async () => {
    const s = await spawn('u-expired', { ignoreTerm: true }, { lifetimeMs: 2000 });
    await until(async () => (await client.findSession('u-expired'))?.state === 'running', 10_000, 'running');
    const live = await client.getSession('u-expired');
    const entry = await system.ended('u-expired', s.sessionId, 10_000);
    expect(entry.state).toBe('expired');
    const ranFor = Date.parse(entry.endedAt) - Date.parse(live.startedAt!);
    expect(ranFor).toBeGreaterThanOrEqual(2000);
    expect(ranFor).toBeLessThanOrEqual(2000 + 1000 + 1000);
  });

  /** The heartbeats of the user's session with `fence` as the observer file has them (epoch ms). */
  const beats = (userId: string, fence: number): number[] =>
    system
      .observed()
      .filter((o) => o.userId === userId && o.fence === fence)
      .map((o) => o.at);

  it('extended: a 2 s session given 3.5 s after 1 s runs until its new deadline and ends as expired', async () => {
    const s = await spawn('u-extended', {}, { lifetimeMs: 2000 });
    await until(() => beats('u-extended', s.fence).length > 0, 10_000, 'session process beating');
    const startedAt = beats('u-extended', s.fence)[0]!;
    await until(() => Date.now() >= startedAt + 1000, 5000, 'one second of the session gone');
    const askedAt = Date.now();
    const extended = await client.extend('u-extended', startedAt + 3500 - askedAt);
    const answeredAt = Date.now();
    expect(extended).toMatchObject({ sessionId: s.sessionId, state: 'running' });
    // The lifetime left counts from when the API handled the request: between asking and the answer.
    const late = Date.parse(extended.deadline!) - (startedAt + 3500);
    expect(late).toBeGreaterThan(-100);
    expect(late).toBeLessThan(answeredAt - askedAt + 100);
    const entry = await system.ended('u-extended', s.sessionId, 10_000);
    expect(entry).toMatchObject({ state: 'expired', exitCode: 143 });
    // Judged from outside: the process beat every 50 ms until the new deadline, not the first one.
    const lastBeat = Math.max(...beats('u-extended', s.fence));
    expect(lastBeat).toBeGreaterThanOrEqual(startedAt + 3500 - 500);
    expect(lastBeat).toBeLessThanOrEqual(startedAt + 3500 + 500);
  });

  it('shortened: a session with a minute left given 1 s ends about a second later, as expired', async () => {
    const s = await spawn('u-shortened', {}, { lifetimeMs: 60_000 });
    await until(() => beats('u-shortened', s.fence).length > 0, 10_000, 'session process beating');
    const askedAt = Date.now();
    const shortened = await client.extend('u-shortened', 1000);
    expect(Date.parse(shortened.deadline!) - askedAt).toBeLessThanOrEqual(1000 + 100);
    const entry = await system.ended('u-shortened', s.sessionId, 10_000);
    expect(entry).toMatchObject({ state: 'expired', exitCode: 143 });
    const lastBeat = Math.max(...beats('u-shortened', s.fence));
    expect(lastBeat).toBeGreaterThanOrEqual(askedAt + 1000 - 500);
    expect(lastBeat).toBeLessThanOrEqual(askedAt + 1000 + 500);
  });

  it('beyond its start + MAX_LIFETIME_MS: 400 lifetime_too_long naming the largest lifetimeMs; no session: 404', async () => {
    const s = await spawn('u-capped', {}, { lifetimeMs: 60_000 });
    await until(async () => (await client.findSession('u-capped'))?.state === 'running', 10_000, 'running');
    const refused = await client.extend('u-capped', 3_600_000).catch((err: unknown) => err);
    expect(refused).toBeInstanceOf(LifetimeTooLongError);
    const { status, code, message, largestLifetimeMs } = refused as LifetimeTooLongError;
    expect({ status, code }).toEqual({ status: 400, code: 'lifetime_too_long' });
    expect(largestLifetimeMs).toBeLessThan(3_600_000);
    expect(largestLifetimeMs).toBeGreaterThan(3_600_000 - 10_000);
    expect(message).toContain(`at most ${largestLifetimeMs}`);
    expect((await client.getSession('u-capped')).deadline).toBe(
      new Date(Date.parse((await client.getSession('u-capped')).startedAt!) + 60_000).toISOString(),
    );
    await client.stopSession('u-capped');
    await system.ended('u-capped', s.sessionId);
    await expect(client.extend('u-capped', 1000)).rejects.toBeInstanceOf(NoSessionError);
  });
});

describe('lost: no worker host claims the session in time', async () => {
  // No host at all: with the capacity check the spawn would be refused (503 no_capacity); without it
  // (a pool that scales on queue length) it is admitted and waits for a host until its pending deadline.
  const system = await startSystem({ workers: 0, apiEnv: { PENDING_TIMEOUT_MS: '500', CAPACITY_CHECK: 'false' } });

  it('the sweep ends it as lost, with nobody asking about the user', async () => {
    const s = await system.client.spawn((await system.client.issueToken({ userId: 'u-unclaimed' })).token);
    const entry = await system.ended('u-unclaimed', s.sessionId, 5000);
    expect(entry).toMatchObject({ state: 'lost', reason: 'not_claimed', fence: s.fence });
    expect(entry.workerId).toBeUndefined();
    // A worker host that comes up later takes the stale job and starts nothing.
    const late = await system.addWorker('late-host');
    await late.waitForLog((l) => l['msg'] === 'spawn job is stale; nothing started');
    expect(system.observed().filter((o) => o.userId === 'u-unclaimed')).toEqual([]);
  });
});
