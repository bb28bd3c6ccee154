import { describe, expect, it } from 'vitest';
import { alive, until } from '../support/processes.js';
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

  it('running: the session shows its worker host, lease and deadline while it runs', async () => {
    const s = await spawn('u-running', {}, { lifetimeMs: 60_000 });
    await until(async () => (await client.findSession('u-running'))?.state === 'running', 10_000, 'running');
    const live = await client.getSession('u-running');
    expect(live).toMatchObject({ sessionId: s.sessionId, workerId: 'host-1', state: 'running' });
    expect(Date.parse(live.deadline!) - Date.parse(live.startedAt!)).toBe(60_000);
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
    const pid = system.observed().find((o) => o.userId === 'u-stopped')!.pid;
    const askedAt = Date.now();
    expect((await client.stopSession('u-stopped')).state).toBe('stopping');
    const entry = await system.ended('u-stopped', s.sessionId);
    expect(entry).toMatchObject({ state: 'stopped', exitCode: 143 });
    // Noticed within a second (one renewal), then SIGTERM ends it at once.
    expect(Date.parse(entry.endedAt) - askedAt).toBeLessThan(1000 + 500);
    expect(alive(pid)).toBe(false);
  });

  it('a session that ignores SIGTERM is still killed after the grace time', async () => {
    const s = await spawn('u-stubborn', { ignoreTerm: true });
    await until(() => system.observed().some((o) => o.userId === 'u-stubborn'), 10_000, 'session process beating');
    const pid = system.observed().find((o) => o.userId === 'u-stubborn')!.pid;
    const askedAt = Date.now();
    await client.stopSession('u-stubborn');
    const entry = await system.ended('u-stubborn', s.sessionId);
    expect(entry).toMatchObject({ state: 'stopped', exitCode: 137 });
    // It outlived SIGTERM by the grace time (1 s), then SIGKILL ended it.
    expect(Date.parse(entry.endedAt) - askedAt).toBeGreaterThanOrEqual(1000);
    expect(alive(pid)).toBe(false);
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
