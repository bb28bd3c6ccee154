import { setTimeout as sleep } from 'node:timers/promises';
import { readFileSync } from 'node:fs';
import { ApiError, NoSessionError, type StreamedEvent } from '@cq/client';
import { describe, expect, it } from 'vitest';
import { until } from '../support/processes.js';
import { startSystem } from '../support/system.js';

/**
 * Idle sessions end to end: the real API (IDLE_TIMEOUT_MS 2000), a real worker host running
 * test/support/session.mjs, real Redis. A session is judged from outside: its events and history
 * (Redis's clock) and the observer file its process writes (this machine's clock, the same one).
 */
describe('idle sessions end to end', async () => {
  const system = await startSystem({ apiEnv: { IDLE_TIMEOUT_MS: '2000' } });
  const { client } = system;
  const spawn = async (userId: string, metadata: Record<string, unknown>, extra: { idleTimeoutMs?: number } = {}) =>
    client.spawn((await client.issueToken({ userId, metadata, ...extra })).token);

  /** Collects the user's session events from before its spawn until its final event. */
  async function eventsOf(userId: string, spawned: () => Promise<unknown>): Promise<StreamedEvent[]> {
    const events: StreamedEvent[] = [];
    let opened!: () => void;
    const open = new Promise<void>((resolve) => (opened = resolve));
    const reading = (async () => {
      for await (const event of client.events({ userId, onOpen: opened })) {
        events.push(event);
        if (['completed', 'failed', 'expired', 'stopped', 'lost', 'withdrawn'].includes(event.type)) break;
      }
    })();
    await open;
    await spawned();
    await reading;
    return events;
  }

  /** Instants (epoch ms) at which the user's session with `fence` wrote {"active": true}, from the observer file. */
  const activeWrites = (userId: string, fence: number): number[] =>
    readFileSync(system.observerLog, 'utf8')
      .split('\n')
      .map((line) => line.split(' '))
      .filter((f) => f[0] === userId && Number(f[1]) === fence && f[4] === 'active')
      .map((f) => Number(f[2]));

  it('a session with idleTimeoutMs 1500 that does nothing ends stopped (idle) 1.5 to 3.5 s after it started running', async () => {
    let sessionId = '';
    const events = await eventsOf('idle-quiet', async () => {
      sessionId = (await spawn('idle-quiet', {}, { idleTimeoutMs: 1500 })).sessionId;
    });
    const changes = events.filter((e) => e.type !== 'error');
    expect(changes.map((e) => e.type)).toEqual(['pending', 'running', 'stopping', 'stopped']);
    const running = changes[1]!;
    const stopped = changes.at(-1)!;
    expect(stopped).toMatchObject({ type: 'stopped', sessionId, reason: 'idle' });
    const ranFor = Date.parse(stopped.at) - Date.parse(running.at);
    expect(ranFor).toBeGreaterThanOrEqual(1500);
    expect(ranFor).toBeLessThanOrEqual(3500);
    // The history says the same.
    const entry = await system.ended('idle-quiet', sessionId);
    expect(entry).toMatchObject({ state: 'stopped', reason: 'idle', exitCode: 143 });
    const historyRan = Date.parse(entry.endedAt) - Date.parse(entry.startedAt!);
    expect(historyRan).toBeGreaterThanOrEqual(1500);
    expect(historyRan).toBeLessThanOrEqual(3500);
  });

  it('GET session shows idleTimeoutMs and lastActivityAt; POST activity moves lastActivityAt', async () => {
    const s = await spawn('idle-view', {}, { idleTimeoutMs: 60_000 });
    await until(async () => (await client.findSession('idle-view'))?.state === 'running', 10_000, 'running');
    const live = await client.getSession('idle-view');
    expect(live).toMatchObject({ sessionId: s.sessionId, state: 'running', idleTimeoutMs: 60_000 });
    expect(live.lastActivityAt).toBe(live.startedAt);
    await until(() => Date.now() > Date.parse(live.startedAt!) + 50, 1000, 'time past the start');
    const sentAt = Date.now();
    await client.recordActivity('idle-view');
    const moved = Date.parse((await client.getSession('idle-view')).lastActivityAt!);
    expect(moved).toBeGreaterThanOrEqual(sentAt);
    expect(moved).toBeLessThanOrEqual(Date.now());
    await client.stopSession('idle-view');
    expect((await system.ended('idle-view', s.sessionId)).reason).toBeUndefined();
    // No live session: 404 no_session.
    await expect(client.recordActivity('idle-view')).rejects.toBeInstanceOf(NoSessionError);
  });

  it('a session writing {"active": true} every 500 ms runs on until it stops writing, then ends idle', async () => {
    const s = await spawn('idle-active', { activeEveryMs: 500, activeForMs: 3000 }, { idleTimeoutMs: 1500 });
    const entry = await system.ended('idle-active', s.sessionId, 15_000);
    expect(entry).toMatchObject({ state: 'stopped', reason: 'idle' });
    const writes = activeWrites('idle-active', s.fence);
    expect(writes.length).toBeGreaterThanOrEqual(5);
    const lastWrite = Math.max(...writes);
    // It ran well past its idle timeout while it wrote ...
    expect(lastWrite - Date.parse(entry.startedAt!)).toBeGreaterThanOrEqual(2500);
    // ... and ended 1.5 to 3.5 s after its last write.
    const endedAfter = Date.parse(entry.endedAt) - lastWrite;
    expect(endedAfter).toBeGreaterThanOrEqual(1500);
    expect(endedAfter).toBeLessThanOrEqual(3500);
  });

  it('activity from the service every 500 ms keeps it running; once it stops, the session ends idle', async () => {
    const s = await spawn('idle-service', {}, { idleTimeoutMs: 1500 });
    await until(async () => (await client.findSession('idle-service'))?.state === 'running', 10_000, 'running');
    const startedAt = Date.parse((await client.getSession('idle-service')).startedAt!);
    let lastSent = 0;
    let lastAnswered = 0;
    while (Date.now() < startedAt + 3000) {
      lastSent = Date.now();
      await client.recordActivity('idle-service');
      lastAnswered = Date.now();
      await sleep(500); // the service's pace: the behaviour under test, not a wait for a condition
    }
    // Still running after twice its idle timeout.
    expect((await client.getSession('idle-service')).state).toBe('running');
    const entry = await system.ended('idle-service', s.sessionId, 15_000);
    expect(entry).toMatchObject({ state: 'stopped', reason: 'idle' });
    expect(Date.parse(entry.endedAt) - lastSent).toBeGreaterThanOrEqual(1500);
    expect(Date.parse(entry.endedAt) - lastAnswered).toBeLessThanOrEqual(3500);
  });

  it('a readiness line counts as activity', async () => {
    // Ready 1 s after its process starts, idle after 3 s: without the readiness counted it would end at
    // 3 s. (The idle clock starts at the claim, before the process: the 2 s between leave room for a
    // process that is slow to start on a busy machine.)
    const s = await spawn('idle-ready', { readyAfterMs: 1000 }, { idleTimeoutMs: 3000 });
    const entry = await system.ended('idle-ready', s.sessionId, 15_000);
    expect(entry).toMatchObject({ state: 'stopped', reason: 'idle' });
    const ranFor = Date.parse(entry.endedAt) - Date.parse(entry.startedAt!);
    expect(ranFor).toBeGreaterThanOrEqual(1000 + 3000);
    expect(ranFor).toBeLessThanOrEqual(1000 + 5000 + 500);
  });

  it('IDLE_TIMEOUT_MS applies when the token sets none; idleTimeoutMs 0 overrides it', async () => {
    const defaulted = await spawn('idle-default', {});
    const never = await spawn('idle-never', {}, { idleTimeoutMs: 0 });
    await until(async () => (await client.findSession('idle-never'))?.state === 'running', 10_000, 'running');
    expect((await client.findSession('idle-never'))?.idleTimeoutMs).toBeUndefined();
    const entry = await system.ended('idle-default', defaulted.sessionId, 15_000);
    expect(entry).toMatchObject({ state: 'stopped', reason: 'idle' });
    const ranFor = Date.parse(entry.endedAt) - Date.parse(entry.startedAt!);
    expect(ranFor).toBeGreaterThanOrEqual(2000);
    expect(ranFor).toBeLessThanOrEqual(2000 + 2000);
    // The one with 0 has run for longer than that and runs on: its process still beats.
    const neverStarted = Date.parse((await client.getSession('idle-never')).startedAt!);
    await until(() => Date.now() > neverStarted + 4500, 10_000, 'past the default idle timeout and then some');
    expect((await client.getSession('idle-never')).state).toBe('running');
    const beats = system.observed().filter((o) => o.userId === 'idle-never' && o.fence === never.fence);
    expect(Math.max(...beats.map((b) => b.at))).toBeGreaterThan(neverStarted + 4000);
    await client.stopSession('idle-never');
    expect((await system.ended('idle-never', never.sessionId)).reason).toBeUndefined();
  });

  it('bad idle timeouts are 400 naming the field: negative, over MAX_LIFETIME_MS, not an integer', async () => {
    for (const idleTimeoutMs of [-1, 3_600_001, 1.5]) {
      const refused = await client.issueToken({ userId: 'idle-bad', idleTimeoutMs }).catch((err: unknown) => err);
      expect(refused, String(idleTimeoutMs)).toBeInstanceOf(ApiError);
      expect((refused as ApiError).status).toBe(400);
      expect((refused as ApiError).code).toBe('invalid_request');
      expect((refused as ApiError).message).toContain('idleTimeoutMs');
    }
  });
});
