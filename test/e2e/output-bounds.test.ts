// Bounds on session output with real hosts (standalone Redis: a proxy cuts one host off, MEMORY USAGE
// reads a stream's size): retention, a flood, a host cut off from Redis. What must hold is asserted here;
// how fast things go under a flood is measured by the bench (test/bench/src/output-flood.ts).
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { NoSessionError } from '@cq/client';
import { describe, expect, it } from 'vitest';
import { until, type Started, rss } from '../support/processes.js';
import { allLines, spawnWith } from '../support/output.js';
import { sessionVisibleDir, startSystem } from '../support/system.js';
import { startTcpProxy } from '../support/tcp-proxy.js';
import { cleanUp } from '@cq/test-harness';

describe('bounds on output', () => {
  it('past its retention a session output is 404', async () => {
    const system = await startSystem({ workerEnv: { LOG_RETENTION_MS: '1000' } });
    const s = await spawnWith(system, 'out-retention', { output: [['stdout', 'soon gone']], durationMs: 100 });
    await system.ended('out-retention', s.sessionId);
    const endedAt = Date.now();
    const kept = await system.client.logs('out-retention', s.sessionId).catch(() => undefined);
    await until(
      async () =>
        (await system.client.logs('out-retention', s.sessionId).catch((err: unknown) => err)) instanceof NoSessionError,
      5000,
      'output gone after its retention',
    );
    console.info(
      `retention 1000 ms: output read ${kept === undefined ? 'already gone' : 'kept'} at the end, gone ${Date.now() - endedAt} ms after`,
    );
    expect(Date.now() - endedAt).toBeGreaterThan(500);
  });

  it('a session writing 100 MB of short lines as fast as it can: Redis holds at most LOG_KEEP_LINES lines of it, the dropped bytes are counted and marked (never more than was written), a neighbour loses no line and a spawn meanwhile runs', async () => {
    const KEEP = 2000;
    const system = await startSystem({ workerEnv: { LOG_KEEP_LINES: String(KEEP), SLOTS: '4' } });
    const { client } = system;
    const neighbour = await spawnWith(system, 'out-neighbour', { tickEveryMs: 100 });
    await until(
      async () => (await client.logs('out-neighbour', neighbour.sessionId)).lines.length > 3,
      10_000,
      'neighbour prints',
    );
    /** Spawns a session for `userId` and waits for its `running` event on the user's stream. */
    const runs = async (userId: string): Promise<void> => {
      let opened!: () => void;
      const open = new Promise<void>((resolve) => (opened = resolve));
      const events = client.events({ userId, onOpen: () => opened() });
      const running = (async () => {
        for await (const event of events) if (event.type === 'running') return;
        throw new Error(`${userId}'s stream ended before running`);
      })();
      await open;
      await spawnWith(system, userId, { durationMs: 100 });
      await running;
    };
    const FLOOD = 100_000_000;
    const flood = await spawnWith(system, 'out-flood', { floodBytes: FLOOD });
    await runs('out-probe-flood');
    const redis = system.connect();
    cleanUp(() => redis.disconnect());
    const keyOf = (sessionId: string): string => `${system.keyPrefix}:{u:out-flood}:out:${sessionId}`;
    let peak = 0;
    // The flood goes through in about 100 MB / the machine's pipe speed; watch its stream meanwhile.
    await until(
      async () => {
        const bytes = Number((await redis.call('MEMORY', 'USAGE', keyOf(flood.sessionId), 'SAMPLES', '0')) ?? 0);
        peak = Math.max(peak, bytes);
        const page = await client.logs('out-flood', flood.sessionId, { limit: 1 }).catch(() => undefined);
        return page !== undefined && page.droppedBytes > 90_000_000;
      },
      60_000,
      'the flood written and mostly dropped',
    );
    const lines = await allLines(client, 'out-flood', flood.sessionId);
    expect(lines.length).toBeLessThanOrEqual(KEEP);
    expect(Number(await redis.xlen(keyOf(flood.sessionId)))).toBeLessThanOrEqual(KEEP);
    const markers = lines.filter((l) => /^\[output dropped: \d+ bytes\]$/.test(l.line));
    expect(markers.length).toBeGreaterThan(0);
    // What is kept and what is counted as dropped are never more than the session wrote (the flood comes
    // in chunks of 65,516 bytes, after a line of under 100 bytes saying who the session is; LOG_KEEP_LINES
    // trims the rest).
    const { droppedBytes } = await client.logs('out-flood', flood.sessionId, { limit: 1 });
    const keptBytes = lines
      .filter((l) => !markers.includes(l))
      .reduce((sum, l) => sum + Buffer.byteLength(l.line) + 1, 0);
    const written = Math.ceil(FLOOD / 65_516) * 65_516 + 100;
    expect(droppedBytes + keptBytes).toBeLessThanOrEqual(written);
    // The bound: LOG_KEEP_LINES × (the 16 KiB line cap + 100 bytes of entry overhead).
    const bound = KEEP * (16_384 + 100);
    console.info(
      `flood of 100 MB: ${lines.length} lines kept, Redis memory of its output at most ${peak} bytes (bound ${bound}), ` +
        `${(await client.logs('out-flood', flood.sessionId, { limit: 1 })).droppedBytes} bytes dropped`,
    );
    expect(peak).toBeLessThan(bound);
    // The neighbour's lines all arrived, in order, none missing (how fast: the bench's output-flood).
    const own = await allLines(client, 'out-neighbour', neighbour.sessionId);
    const ticks = own.filter((l) => l.line.startsWith('tick')).map((l) => Number(l.line.split(' ')[1]));
    expect(ticks.length).toBeGreaterThan(3);
    expect(ticks).toEqual(Array.from({ length: ticks.length }, (_, i) => i));
    for (const userId of ['out-flood', 'out-neighbour']) await client.stopSession(userId);
  }, 120_000);

  it('a host cut off from Redis holds at most a bounded amount of unsent output, then sends it with a marker and logs how much it dropped', async () => {
    const system = await startSystem({ workers: 0 });
    const redisPort = Number(new URL(system.target.kind === 'standalone' ? system.target.url : 'redis://x:0').port);
    const proxy = await startTcpProxy(redisPort);
    cleanUp(() => proxy.close());
    const host: Started = await system.addWorker('host-cut', {
      REDIS_URL: proxy.url,
      LEASE_MS: '20000',
      LOG_RATE_BYTES: '50000000',
      // Every line kept, so the marker of what was dropped unsent is still there to see.
      LOG_KEEP_LINES: '1000000',
    });
    // Where the session can see it (its /tmp is its own).
    const trigger = join(sessionVisibleDir('flood'), 'now');
    const s = await spawnWith(system, 'out-cut', { tickEveryMs: 100, floodBytes: 50_000_000, floodWhenFile: trigger });
    await until(async () => (await system.client.logs('out-cut', s.sessionId)).lines.length > 2, 10_000, 'prints');
    let peak = 0;
    const before = rss(host.child.pid!);
    const sampler = setInterval(() => (peak = Math.max(peak, rss(host.child.pid!))), 20);
    try {
      // Cut off, then 50 MB of output: at most 1 MiB of it may wait on the host.
      proxy.cut();
      writeFileSync(trigger, '');
      await host.waitForLog((l) => String(l['msg']).startsWith('session output piles up unsent'), 30_000);
      proxy.heal();
      const dropped = await host.waitForLog(
        (l) => l['msg'] === 'session output dropped while Redis was unreachable',
        30_000,
      );
      expect(Number(dropped['droppedBytes'])).toBeGreaterThan(0);
      console.info(
        `host cut off: RSS ${Math.round(before / 1048576)} MiB before, peak ${Math.round(peak / 1048576)} MiB; ` +
          `${String(dropped['droppedBytes'])} bytes dropped unsent`,
      );
      expect(peak - before).toBeLessThan(200 * 1048576);
      const lines = await allLines(system.client, 'out-cut', s.sessionId);
      expect(lines.some((l) => l.line === `[output dropped: ${String(dropped['droppedBytes'])} bytes]`)).toBe(true);
      await system.client.stopSession('out-cut');
      await system.ended('out-cut', s.sessionId);
    } finally {
      clearInterval(sampler);
      proxy.heal();
    }
  }, 90_000);
});
