import { randomUUID } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import { NoSessionError, type OutputLineData } from '@cq/client';
import { describe, expect, it } from 'vitest';
import { until } from '../support/processes.js';
import { addedRate, callRates, commandCalls, totalRate } from '../support/commands.js';
import { allLines, percentile, spawnWith } from '../support/output.js';
import { API_KEY, startSystem } from '../support/system.js';

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
    await expect(client.logs('out-owner', randomUUID())).rejects.toBeInstanceOf(NoSessionError);
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
    await expect(client.followLogs('out-after', randomUUID()).next()).rejects.toBeInstanceOf(NoSessionError);
  });

  it('100 readers of one session cost Redis no more commands per second than one', async () => {
    const s = await spawnWith(system, 'out-cost', { tickEveryMs: 100 });
    await until(async () => (await client.logs('out-cost', s.sessionId)).lines.length > 0, 10_000, 'first line');
    // Long enough that a timer firing once more in one window than in the other adds little per second.
    const WINDOW_MS = 6000;
    const cost = async (readers: number): Promise<Map<string, number>> => {
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
      const before = await commandCalls(system);
      const startedAt = performance.now();
      await sleep(WINDOW_MS);
      const rates = callRates(before, await commandCalls(system), performance.now() - startedAt);
      // Every reader got the lines of the window.
      for (let i = 0; i < readers; i++) expect(received[i]! - counts[i]!).toBeGreaterThanOrEqual(20);
      controller.abort();
      await Promise.all(reading);
      return rates;
    };
    const one = await cost(1);
    const many = await cost(100);
    const { added, top } = addedRate(one, many);
    console.info(
      `Redis commands per second, a session printing 10 lines/s: ${Math.round(totalRate(one))} with 1 reader, ` +
        `${Math.round(totalRate(many))} with 100; 100 readers add ${added.toFixed(1)}/s (${top || 'nothing'})`,
    );
    expect(totalRate(one)).toBeGreaterThan(0);
    // Command by command, the increases only (a total would let timers slowed by the readers' CPU hide a
    // cost): within 15 commands per second, the timers of the host and the API differ a little between windows.
    expect(added, top).toBeLessThan(15);
    await client.stopSession('out-cost');
    await system.ended('out-cost', s.sessionId);
  });
});
