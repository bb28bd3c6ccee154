import {
  commandsDuring,
  midSweepInterval,
  startRedisServer,
  topCalls as top,
  totalCalls as total,
  windowOf as waitMs,
} from '@cq/test-harness';
import { Redis } from 'ioredis';
import { describe, expect, it, onTestFinished } from 'vitest';
import { until, type Started } from '../support/processes.js';
import { startSystem, type System } from '../support/system.js';

// What Redis pays per API process, judged by Redis itself: INFO commandstats counts every command,
// those run inside scripts included. The system runs with its defaults (a sweep every 5 s) on a Redis
// of its own.

const SWEEP_INTERVAL_MS = 5000;
/** A flow window: 6 s of spawns, then the last sessions' ends. */
const FLOW_MS = 7000;

describe('what Redis pays per API process', () => {
  it('idle: one API process costs under 50 commands/s, ten at most 1.2× one; with 20 sessions/s and an SSE reader, ten at most 1.5× one', async () => {
    const server = await startRedisServer();
    onTestFinished(() => server.stop());
    const redis = new Redis(server.url);
    onTestFinished(() => redis.disconnect());
    const system: System = await startSystem({
      redisUrl: server.url,
      workers: 2,
      apiEnv: { SWEEP_INTERVAL_MS: String(SWEEP_INTERVAL_MS) },
      // Room for every user of a flow at once: with the default 4 slots a host, 20 spawns a second were
      // refused (503 no_capacity) whenever a session took over 400 ms from spawn to end, as on a slow day
      // here, on the code before the loss guard as on this one. What is measured is Redis's cost per API
      // process, not capacity.
      // The contract's LEASE_MS (the system tests' 3000 would have the hosts renew their host leases every
      // second rather than every 2 s, as they do with any LEASE_MS of 6 s and more).
      workerEnv: { SLOTS: '60', LEASE_MS: '15000' },
    });
    const turnKey = `${system.keyPrefix}:{sweep}:turn`;
    // It has taken the sweeping turn and read every slot once (it logs that).
    await system.api.waitForLog((line) => line['fullScans'] === 1, 15_000);

    // Idle windows of two whole intervals (10 s), each holding exactly two sweeps.
    const idle = async (): Promise<Map<string, number>> => {
      await midSweepInterval(redis, turnKey, SWEEP_INTERVAL_MS);
      return commandsDuring(redis, () => waitMs(2 * SWEEP_INTERVAL_MS));
    };

    // The same work in each flow window: 120 sessions of 60 users, 20 a second, each ending at once,
    // followed by an SSE reader of every event on the first API process.
    const stop = new AbortController();
    onTestFinished(() => stop.abort());
    let opened!: () => void;
    const open = new Promise<void>((resolve) => (opened = resolve));
    let completed = 0;
    const reading = (async () => {
      for await (const event of system.client.events({ signal: stop.signal, onOpen: () => opened() }))
        if (event.type === 'completed') completed++;
    })().catch(() => {});
    await open;
    let round = 0;
    // How every session of the flows ended, as recorded: the reader must have seen each `completed`.
    const ends: Array<{ state: string; reason?: string; sessionId: string }> = [];
    const flow = async (): Promise<void> => {
      round++;
      const sessions: Array<{ userId: string; sessionId: string }> = [];
      const startedAt = performance.now();
      for (let i = 0; i < 120; i++) {
        await until(() => performance.now() - startedAt >= i * 50, 2000, 'the next spawn time');
        const userId = `flow-${round}-${i % 60}`;
        if (i >= 60) ends.push(await system.ended(userId, sessions[i - 60]!.sessionId));
        const admission = await system.client.spawn(
          (await system.client.issueToken({ userId, metadata: { durationMs: 0 } })).token,
        );
        sessions.push({ userId, sessionId: admission.sessionId });
      }
      for (const { userId, sessionId } of sessions.slice(60)) ends.push(await system.ended(userId, sessionId));
      await until(() => performance.now() - startedAt >= FLOW_MS, FLOW_MS + 1000, 'the end of the window');
    };

    const idleOne = await idle();
    const flowOne = await commandsDuring(redis, flow);
    const more: Started[] = await Promise.all(Array.from({ length: 9 }, () => system.addApi()));
    expect(more).toHaveLength(9);
    const idleTen = await idle();
    const flowTen = await commandsDuring(redis, flow);
    // The last session's end is in its history a moment before its event reaches the reader (a flow
    // that ran past its window, on a busy machine, came here without that moment: 239 seen).
    await until(() => completed >= 240, 5000, "the reader saw every session's completed event");
    stop.abort();
    await reading;

    const perSecond = (calls: Map<string, number>, ms: number): string => ((total(calls) * 1000) / ms).toFixed(1);
    console.info(
      `idle, commands/s (2 idle hosts included): 1 API process ${perSecond(idleOne, 10_000)} (${top(idleOne)}); ` +
        `10 API processes ${perSecond(idleTen, 10_000)} (${top(idleTen)}); ratio ${(total(idleTen) / total(idleOne)).toFixed(2)}`,
    );
    console.info(
      `20 sessions/s and one SSE reader, commands/s: 1 API process ${perSecond(flowOne, FLOW_MS)} (${top(flowOne)}); ` +
        `10 API processes ${perSecond(flowTen, FLOW_MS)} (${top(flowTen)}); ratio ${(total(flowTen) / total(flowOne)).toFixed(2)}`,
    );
    // The API process and the hosts together: the API process alone costs less still.
    expect(total(idleOne) / 10).toBeLessThan(50);
    expect(total(idleTen)).toBeLessThanOrEqual(total(idleOne) * 1.2);
    expect(ends.filter((e) => e.state !== 'completed')).toEqual([]);
    expect(ends).toHaveLength(240);
    expect(completed).toBe(240);
    expect(total(flowTen)).toBeLessThanOrEqual(total(flowOne) * 1.5);
  }, 180_000);
});
