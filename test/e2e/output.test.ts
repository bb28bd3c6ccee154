import { setTimeout as sleep } from 'node:timers/promises';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { NoSessionError, type CoordinatorClient, type OutputLineData } from '@cq/client';
import { afterAll, describe, expect, it } from 'vitest';
import { until, type Started } from '../support/processes.js';
import { API_KEY, startSystem, type System } from '../support/system.js';
import { startTcpProxy } from '../support/tcp-proxy.js';

const spawnWith = async (system: System, userId: string, metadata: Record<string, unknown>) =>
  system.client.spawn((await system.client.issueToken({ userId, metadata })).token);

/** Every kept line of a session, page by page. */
async function allLines(client: CoordinatorClient, userId: string, sessionId: string): Promise<OutputLineData[]> {
  const lines: OutputLineData[] = [];
  for (let page = await client.logs(userId, sessionId); ;) {
    lines.push(...page.lines);
    if (!page.more) return lines;
    page = await client.logs(userId, sessionId, { after: page.lines.at(-1)!.id });
  }
}

/** Commands the system's Redis masters have processed so far (INFO stats), summed. */
async function commandsProcessed(system: System): Promise<number> {
  const redis = system.connect();
  try {
    if (redis.status !== 'ready') await new Promise((resolve) => redis.once('ready', resolve));
    const nodes = 'nodes' in redis ? redis.nodes('master') : [redis];
    const infos = await Promise.all(nodes.map((node) => node.info('stats')));
    return infos.reduce((sum, info) => sum + Number(/total_commands_processed:(\d+)/.exec(info)![1]), 0);
  } finally {
    redis.disconnect();
  }
}

function rss(pid: number): number {
  try {
    const match = /^VmRSS:\s+(\d+) kB$/m.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
    return match === null ? 0 : Number(match[1]) * 1024;
  } catch {
    return 0;
  }
}

const percentile = (sorted: number[], p: number): number =>
  sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]!;

describe("a session's output through the API", async () => {
  // The sweep reads every slot's index each interval: slowed down, so the commands counted below are the work's.
  const system = await startSystem({ apiEnv: { SWEEP_INTERVAL_MS: '600000' } });
  const { client } = system;

  it('a session that prints to stdout and stderr and exits: its lines in order, with stream and time, during and after; exact pages; a 100 KB line cut and marked', async () => {
    const printed = Array.from({ length: 30 }, (_, i) => [i % 3 === 0 ? 'stderr' : 'stdout', `line ${i}`]);
    const s = await spawnWith(system, 'out-print', { output: printed, longLineBytes: 100_000, durationMs: 4000 });
    // During: every line is there while the session still runs (its end comes later than this read).
    let during: OutputLineData[] = [];
    await until(
      async () =>
        (during = await allLines(client, 'out-print', s.sessionId)).filter((l) =>
          /^(line \d+|y+ \[line cut\])$/.test(l.line),
        ).length ===
        printed.length + 1,
      10_000,
      'every line while the session runs',
    );
    const readAt = Date.now();
    const ended = await system.ended('out-print', s.sessionId);
    expect(ended.state).toBe('completed');
    expect(Date.parse(ended.endedAt)).toBeGreaterThan(readAt);
    // Each stream in the order printed (two pipes: their lines interleave as the host read them).
    for (const stream of ['stdout', 'stderr'])
      expect(during.filter((l) => l.stream === stream && l.line.startsWith('line')).map((l) => l.line)).toEqual(
        printed.filter(([s]) => s === stream).map(([, text]) => text),
      );
    const long = during.find((l) => l.line.startsWith('y'))!;
    expect(long.stream).toBe('stderr');
    expect(long.line).toBe(`${'y'.repeat(16_384)} [line cut]`);
    for (const line of during) expect(Math.abs(Date.parse(line.at) - readAt)).toBeLessThan(15_000);
    // Ids increase; after the end the same lines, with the same ids.
    const ids = during.map((l) => l.id);
    const order = (id: string): [number, number] => id.split('-').map(Number) as [number, number];
    for (let i = 1; i < ids.length; i++) {
      const [am, as] = order(ids[i - 1]!);
      const [bm, bs] = order(ids[i]!);
      expect(bm > am || (bm === am && bs > as), `${ids[i - 1]} before ${ids[i]}`).toBe(true);
    }
    expect(await allLines(client, 'out-print', s.sessionId)).toEqual(during);
    // Pages of 7: exactly the lines, none twice, `more` until the last.
    const paged: OutputLineData[] = [];
    let page = await client.logs('out-print', s.sessionId, { limit: 7 });
    for (;;) {
      paged.push(...page.lines);
      expect(page.more).toBe(paged.length < during.length);
      if (!page.more) break;
      expect(page.lines).toHaveLength(7);
      page = await client.logs('out-print', s.sessionId, { after: page.lines.at(-1)!.id, limit: 7 });
    }
    expect(paged).toEqual(during);
  });

  it("an unknown session or another user's session id is 404; no service key is 401", async () => {
    const s = await spawnWith(system, 'out-owner', { output: [['stdout', 'mine']], durationMs: 200 });
    await system.ended('out-owner', s.sessionId);
    await expect(client.logs('out-owner', 'no-such-session')).rejects.toBeInstanceOf(NoSessionError);
    await expect(client.logs('out-someone-else', s.sessionId)).rejects.toBeInstanceOf(NoSessionError);
    const path = `/v1/users/out-owner/sessions/${s.sessionId}/logs`;
    expect((await fetch(`${system.api.baseUrl}${path}`)).status).toBe(401);
    const answer = await fetch(`${system.api.baseUrl}${path}`, { headers: { authorization: `Bearer ${API_KEY}` } });
    expect(answer.status).toBe(200);
  });

  it('SSE: a session printing every 100 ms is followed live; a reader that reconnects with Last-Event-ID gets exactly the rest; the stream ends with end', async () => {
    const s = await spawnWith(system, 'out-live', { tickEveryMs: 100, durationMs: 2500 });
    const first: OutputLineData[] = [];
    const latencies: number[] = [];
    for await (const line of client.followLogs('out-live', s.sessionId)) {
      first.push(line);
      if (line.line.startsWith('tick')) latencies.push(Date.now() - Number(line.line.split(' ')[2]));
      if (first.length === 8) break;
    }
    const rest: OutputLineData[] = [];
    for await (const line of client.followLogs('out-live', s.sessionId, { lastEventId: first.at(-1)!.id }))
      rest.push(line);
    // The stream ended (with `end`: followLogs throws otherwise) after the session did.
    expect((await client.history('out-live'))[0]).toMatchObject({ sessionId: s.sessionId, state: 'completed' });
    const kept = await allLines(client, 'out-live', s.sessionId);
    expect([...first, ...rest]).toEqual(kept);
    const ticks = kept.filter((l) => l.line.startsWith('tick')).map((l) => Number(l.line.split(' ')[1]));
    expect(ticks).toEqual(Array.from({ length: ticks.length }, (_, i) => i));
    expect(ticks.length).toBeGreaterThan(15);
    latencies.sort((a, b) => a - b);
    console.info(
      `output followed live: print to receipt p50 ${percentile(latencies, 50)} ms, max ${latencies.at(-1)} ms`,
    );
  });

  it('a stream of an ended session sends what is kept, then end; of an unknown one, 404', async () => {
    const s = await spawnWith(system, 'out-after', {
      output: [
        ['stdout', 'a'],
        ['stderr', 'b'],
      ],
      durationMs: 100,
    });
    await system.ended('out-after', s.sessionId);
    const lines: string[] = [];
    for await (const line of client.followLogs('out-after', s.sessionId)) lines.push(line.line);
    expect(lines.filter((l) => l === 'a' || l === 'b').sort()).toEqual(['a', 'b']);
    await expect(client.followLogs('out-after', 'no-such-session').next()).rejects.toBeInstanceOf(NoSessionError);
  });

  it('100 readers of one session cost Redis no more commands per second than one', async () => {
    const s = await spawnWith(system, 'out-cost', { tickEveryMs: 100 });
    await until(async () => (await client.logs('out-cost', s.sessionId)).lines.length > 0, 10_000, 'first line');
    const WINDOW_MS = 3000;
    const cost = async (readers: number): Promise<number> => {
      const controller = new AbortController();
      const received = Array.from({ length: readers }, () => 0);
      let opened = 0;
      const reading = Array.from({ length: readers }, async (_, i) => {
        for await (const line of client.followLogs('out-cost', s.sessionId, {
          signal: controller.signal,
          onOpen: () => opened++,
        }))
          if (line.line.startsWith('tick')) received[i]!++;
      });
      await until(() => opened === readers, 10_000, `${readers} readers open`);
      const counts = received.slice();
      const before = await commandsProcessed(system);
      const startedAt = performance.now();
      await sleep(WINDOW_MS);
      const used = (await commandsProcessed(system)) - before;
      const perSecond = (used * 1000) / (performance.now() - startedAt);
      // Every reader got the lines of the window.
      for (let i = 0; i < readers; i++) expect(received[i]! - counts[i]!).toBeGreaterThanOrEqual(20);
      controller.abort();
      await Promise.all(reading);
      return perSecond;
    };
    const one = await cost(1);
    const many = await cost(100);
    console.info(
      `Redis commands per second, a session printing 10 lines/s: ${Math.round(one)} with 1 reader, ${Math.round(many)} with 100`,
    );
    expect(one).toBeGreaterThan(0);
    // Within 15 commands per second (the timers of the host and the API differ a little between windows).
    expect(many - one).toBeLessThan(15);
    await client.stopSession('out-cost');
    await system.ended('out-cost', s.sessionId);
  });
});

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

  it('a session writing 100 MB of short lines as fast as it can: Redis holds at most LOG_KEEP_LINES lines of it, the dropped bytes are counted and marked, a neighbour prints on unaffected', async () => {
    const KEEP = 2000;
    const system = await startSystem({ workerEnv: { LOG_KEEP_LINES: String(KEEP), SLOTS: '4' } });
    const { client } = system;
    const neighbour = await spawnWith(system, 'out-neighbour', { tickEveryMs: 100 });
    await until(
      async () => (await client.logs('out-neighbour', neighbour.sessionId)).lines.length > 3,
      10_000,
      'neighbour prints',
    );
    /** From a spawn to its `running` event on the user's stream, ms. */
    const eventLatency = async (userId: string): Promise<number> => {
      let opened!: () => void;
      const open = new Promise<void>((resolve) => (opened = resolve));
      const events = client.events({ userId, onOpen: () => opened() });
      const running = (async () => {
        for await (const event of events) if (event.type === 'running') return performance.now();
        throw new Error(`${userId}'s stream ended before running`);
      })();
      await open;
      const startedAt = performance.now();
      await spawnWith(system, userId, { durationMs: 100 });
      return (await running) - startedAt;
    };
    const quiet = await eventLatency('out-probe-quiet');
    const flood = await spawnWith(system, 'out-flood', { floodBytes: 100_000_000 });
    const loud = await eventLatency('out-probe-flood');
    console.info(`spawn to running event: ${Math.round(quiet)} ms before the flood, ${Math.round(loud)} ms during it`);
    expect(loud).toBeLessThan(quiet + 2000);
    const redis = system.connect();
    afterAll(() => redis.disconnect());
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
    // The bound: LOG_KEEP_LINES × (the 16 KiB line cap + 100 bytes of entry overhead).
    const bound = KEEP * (16_384 + 100);
    console.info(
      `flood of 100 MB: ${lines.length} lines kept, Redis memory of its output at most ${peak} bytes (bound ${bound}), ` +
        `${(await client.logs('out-flood', flood.sessionId, { limit: 1 })).droppedBytes} bytes dropped`,
    );
    expect(peak).toBeLessThan(bound);
    // The neighbour's lines all arrived, in order, none missing, promptly.
    const own = await allLines(client, 'out-neighbour', neighbour.sessionId);
    const ticks = own.filter((l) => l.line.startsWith('tick')).map((l) => Number(l.line.split(' ')[1]));
    expect(ticks).toEqual(Array.from({ length: ticks.length }, (_, i) => i));
    const delays = own
      .filter((l) => l.line.startsWith('tick'))
      .map((l) => Date.parse(l.at) - Number(l.line.split(' ')[2]))
      .sort((a, b) => a - b);
    console.info(
      `the neighbour's lines during the flood: print to Redis p50 ${percentile(delays, 50)} ms, p99 ${percentile(delays, 99)} ms`,
    );
    expect(percentile(delays, 99)).toBeLessThan(2000);
    for (const userId of ['out-flood', 'out-neighbour']) await client.stopSession(userId);
  }, 120_000);

  it('a host cut off from Redis holds at most a bounded amount of unsent output, then sends it with a marker and logs how much it dropped', async () => {
    const system = await startSystem({ workers: 0 });
    const redisPort = Number(new URL(system.target.kind === 'standalone' ? system.target.url : 'redis://x:0').port);
    const proxy = await startTcpProxy(redisPort);
    afterAll(() => proxy.close());
    const host: Started = await system.addWorker('host-cut', {
      REDIS_URL: proxy.url,
      LEASE_MS: '20000',
      LOG_RATE_BYTES: '50000000',
      // Every line kept, so the marker of what was dropped unsent is still there to see.
      LOG_KEEP_LINES: '1000000',
    });
    const trigger = join(mkdtempSync(join(tmpdir(), 'cq-flood-')), 'now');
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
