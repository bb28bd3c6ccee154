// Session events: delivery latency on the real path (a state change made in Redis → its SSE line read by
// a client of the built API), beside the limit (a minimal PUBLISH → SSE relay) and what many write
// instead (an XREAD BLOCK loop per reader); and what emitting events costs the admission and claim scripts.
import { spawn } from 'node:child_process';
import { cpSync, mkdtempSync, writeFileSync } from 'node:fs';
import { request } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { Coordinator, loadScripts, type Claim } from '@cq/coordinator';
import { Redis } from 'ioredis';
import { API_KEY, Stack, startProc, type Proc } from './sessions.js';

export interface LatencyRow {
  case: string;
  readers: number;
  /** Deliveries measured (events × readers). */
  n: number;
  p50: number;
  p99: number;
  /** Redis commands processed per event over the run (INFO total_commands_processed), driver included. */
  commandsPerEvent: number;
}

function percentiles(values: number[]): { p50: number; p99: number; n: number } {
  const sorted = [...values].sort((a, b) => a - b);
  const at = (q: number): number => sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))] ?? NaN;
  return { p50: at(0.5), p99: at(0.99), n: sorted.length };
}

async function commandsProcessed(redis: Redis): Promise<number> {
  return Number(/total_commands_processed:(\d+)/.exec(await redis.info('stats'))![1]);
}

/**
 * Opens `count` SSE readers on `url`; each calls `onData(text, receivedAt)` for every `data:` line.
 * Resolves once every reader's headers are in (each stream is subscribed).
 */
async function openReaders(
  url: string,
  count: number,
  headers: Record<string, string>,
  onData: (data: string, at: number) => void,
): Promise<() => void> {
  const requests = await Promise.all(
    Array.from(
      { length: count },
      () =>
        new Promise<ReturnType<typeof request>>((resolve, reject) => {
          const req = request(url, { headers: { accept: 'text/event-stream', ...headers } }, (res) => {
            let buffer = '';
            res.setEncoding('utf8');
            res.on('data', (chunk: string) => {
              const at = performance.now();
              buffer += chunk;
              let end: number;
              while ((end = buffer.indexOf('\n')) >= 0) {
                const line = buffer.slice(0, end);
                buffer = buffer.slice(end + 1);
                if (line.startsWith('data: ')) onData(line.slice(6), at);
              }
            });
            res.on('error', () => {});
            resolve(req);
          });
          req.on('error', reject);
          req.end();
        }),
    ),
  );
  return () => requests.forEach((req) => req.destroy());
}

/** Drives `events` changes, one every `everyMs`, and returns when each was made (performance.now()). */
async function drive(events: number, everyMs: number, change: (seq: number) => Promise<unknown>): Promise<number[]> {
  const sentAt: number[] = [];
  const start = performance.now();
  for (let seq = 0; seq < events; seq++) {
    const due = start + seq * everyMs - performance.now();
    if (due > 0) await sleep(due);
    sentAt[seq] = performance.now();
    await change(seq);
  }
  return sentAt;
}

/** Waits until `done()` or `ms` have passed (a slow path shows as missing deliveries, not as a hang). */
async function settle(done: () => boolean, ms: number): Promise<void> {
  const until = performance.now() + ms;
  while (!done() && performance.now() < until) await sleep(10);
}

/**
 * Event delivery latency, p50/p99 over every (event, reader) pair, with 1 and 200 readers: the change is
 * made by a driver in this process (for ours, `markReady` with a new endpoint: one script, one event),
 * one every 5 ms, and timed from just before its call to the moment a reader's SSE line arrives.
 */
export async function benchEventLatency(redisUrl: string, quick: boolean): Promise<LatencyRow[]> {
  const EVENTS = quick ? 100 : 1000;
  const EVERY_MS = 5;
  const stats = new Redis(redisUrl);
  const rows: LatencyRow[] = [];
  const measure = async (
    name: string,
    readers: number,
    url: string,
    headers: Record<string, string>,
    change: (seq: number) => Promise<unknown>,
    seqOf: (data: string) => number | undefined,
  ): Promise<void> => {
    const received: number[][] = Array.from({ length: EVENTS }, () => []);
    let deliveries = 0;
    const close = await openReaders(url, readers, headers, (data, at) => {
      const seq = seqOf(data);
      if (seq === undefined || seq >= EVENTS) return;
      received[seq]!.push(at);
      deliveries++;
    });
    const before = await commandsProcessed(stats);
    const sentAt = await drive(EVENTS, EVERY_MS, change);
    await settle(() => deliveries >= EVENTS * readers, 10_000);
    const commands = (await commandsProcessed(stats)) - before;
    close();
    const latencies = received.flatMap((times, seq) => times.map((at) => at - sentAt[seq]!));
    if (latencies.length < EVENTS * readers)
      throw new Error(`${name}: ${EVENTS * readers - latencies.length} deliveries missing`);
    rows.push({ case: name, readers, ...percentiles(latencies), commandsPerEvent: commands / EVENTS });
  };

  // Ours: the built API; the driver's session is claimed by the driver itself (no host needed).
  const stack = new Stack(redisUrl, 'benchevents', 'exit 0');
  await stack.startApi({ SWEEP_INTERVAL_MS: '3600000', CAPACITY_CHECK: 'false' });
  const driver = new Coordinator({ redis: new Redis(redisUrl), keyPrefix: 'benchevents' });
  const [token] = await stack.tokens(['bench-events-driver']);
  const admitted = await driver.sessions.admit(token!);
  if (admitted.outcome !== 'admitted') throw new Error(`driver session not admitted: ${admitted.outcome}`);
  const claimed = await driver.claims.claim(admitted, { workerId: 'bench', leaseMs: 3_600_000, graceMs: 1000 });
  if (!claimed.claimed) throw new Error('driver session not claimed');
  const claim: Claim = claimed.claim;
  let round = 0;
  const ours = (readers: number): Promise<void> => {
    const tag = `r${round++}-`;
    return measure(
      'ours: GET /v1/events (built API, real HTTP)',
      readers,
      `${stack.baseUrl}/v1/events`,
      { authorization: `Bearer ${API_KEY}` },
      (seq) => driver.claims.markReady(claim, `${tag}${seq}`),
      (data) => {
        const match = /"endpoint":"([^"]+)"/.exec(data);
        return match?.[1]?.startsWith(tag) ? Number(match[1].slice(tag.length)) : undefined;
      },
    );
  };

  // The limit and the per-reader pattern: minimal relays, each a process of its own.
  const relays: Proc[] = [];
  const relay = async (mode: string): Promise<string> => {
    const proc = startProc('test/bench/dist/sse-relays.js', { REDIS_URL: redisUrl, RELAY_MODE: mode });
    relays.push(proc);
    return String((await proc.waitFor((l) => l['msg'] === 'listening'))['url']);
  };
  const publishUrl = await relay('publish');
  const xreadUrl = await relay('xread');
  const publisher = new Redis(redisUrl);
  const seqTagged = (tag: string) => (data: string) =>
    data.startsWith(tag) ? Number(data.slice(tag.length)) : undefined;
  try {
    for (const readers of [1, 200]) {
      await ours(readers);
      const p = `p${round++}-`;
      await measure(
        'limit: PUBLISH → one subscriber → SSE (minimal relay)',
        readers,
        publishUrl,
        {},
        (seq) => publisher.publish('bench:relay:events', `${p}${seq}`),
        seqTagged(p),
      );
      const x = `x${round++}-`;
      await measure(
        'XREAD BLOCK per reader → SSE (minimal relay)',
        readers,
        xreadUrl,
        {},
        (seq) => publisher.xadd('bench:relay:stream', 'MAXLEN', '~', 10_000, '*', 'e', `${x}${seq}`),
        seqTagged(x),
      );
    }
  } finally {
    await stack.stop();
    await Promise.all(relays.map((proc) => proc.stop()));
    driver.redis.disconnect();
    publisher.disconnect();
    stats.disconnect();
  }
  return rows;
}

export interface ScriptCostRow {
  script: string;
  withEvents: number;
  withoutEvents: number;
}

/**
 * What emitting events costs the admission and claim scripts: ops/s from 50 concurrent callers (in
 * process, EVALSHA on a local Redis; an in-process row, not an end-to-end one), with the scripts as they
 * are and with `emitEvent` made a no-op, alternating runs in the same Redis, median of the runs. An event
 * channel subscriber (a redis-cli process) is connected meanwhile, as an API process is in production.
 */
export async function benchEventScripts(redisUrl: string, quick: boolean): Promise<ScriptCostRow[]> {
  const SESSIONS = quick ? 2000 : 10_000;
  const RUNS = quick ? 1 : 5;
  const CALLERS = 50;
  const withoutDir = mkdtempSync(join(tmpdir(), 'cq-lua-noevents-'));
  cpSync(join(new URL('../../../lua/', import.meta.url).pathname), withoutDir, { recursive: true });
  writeFileSync(join(withoutDir, 'includes', 'events.lua'), 'local function emitEvent() end\n');
  loadScripts(withoutDir); // fails here, not halfway, if the copy is incomplete
  // The event channels' subscriber is a process of its own, as an API process is: it takes no CPU from
  // the callers here. Every run's channel is subscribed before the runs start.
  const channels = Array.from({ length: RUNS }, (_, run) => `benchscriptswith${run}:events`);
  const subscriber = spawn('redis-cli', ['-u', redisUrl, 'subscribe', ...channels], {
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  subscriber.stdout.resume();
  const stats = new Redis(redisUrl);
  while (Number(((await stats.call('PUBSUB', 'NUMSUB', channels[0]!)) as Array<string | number>)[1]) === 0)
    await sleep(10);
  stats.disconnect();
  const samples = new Map<string, number[]>();
  const record = (key: string, value: number): void => void samples.set(key, [...(samples.get(key) ?? []), value]);
  const pool = Array.from({ length: CALLERS }, () => new Redis(redisUrl));
  const parallel = async (count: number, op: (i: number, redis: Redis) => Promise<unknown>): Promise<number> => {
    let next = 0;
    const t0 = performance.now();
    await Promise.all(
      pool.map(async (redis) => {
        while (next < count) await op(next++, redis);
      }),
    );
    return (count * 1000) / (performance.now() - t0);
  };
  try {
    for (let run = 0; run < RUNS; run++) {
      const variants: Array<[string, string | undefined]> = [
        ['with', undefined],
        ['without', withoutDir],
      ];
      for (const [name, scriptsDir] of run % 2 === 0 ? variants : [...variants].reverse()) {
        const keyPrefix = `benchscripts${name}${run}`;
        const coordinators = pool.map(
          (redis) =>
            new Coordinator({
              redis: redis.duplicate(),
              keyPrefix,
              policy: { spawnIntervalMs: 1, spawnBurst: 1000 },
              ...(scriptsDir === undefined ? {} : { scriptsDir }),
            }),
        );
        const issuer = coordinators[0]!;
        const tokens: string[] = [];
        for (let i = 0; i < SESSIONS; i += 500)
          tokens.push(
            ...(await Promise.all(
              Array.from({ length: Math.min(500, SESSIONS - i) }, async (_, j) => {
                const issued = await issuer.tokens.issue(`u${i + j}`);
                if (issued.outcome !== 'issued') throw new Error('not issued');
                return issued.token;
              }),
            )),
          );
        await Promise.all(coordinators.map((c) => c.preload()));
        const admitted: Array<{ sessionId: string; userId: string; fence: number }> = [];
        let c = 0;
        const half = SESSIONS / 2;
        const admit = (offset: number) => async (i: number) => {
          const outcome = await coordinators[c++ % CALLERS]!.sessions.admit(tokens[offset + i]!);
          if (outcome.outcome !== 'admitted') throw new Error(`not admitted: ${outcome.outcome}`);
          admitted[offset + i] = outcome;
        };
        // A fresh prefix: most of these admissions create their slot's event stream.
        record(`admit-cold ${name}`, await parallel(half, admit(0)));
        // Then every slot's stream exists, as in a running system (a stream lives 15 min past its last event).
        const warm = issuer.redis.pipeline();
        for (let slot = 0; slot < 16384; slot++)
          warm.xadd(issuer.keys.events(slot), '*', 'e', '{}').pexpire(issuer.keys.events(slot), 900_000);
        await warm.exec();
        record(`admit ${name}`, await parallel(half, admit(half)));
        record(
          `claimSession ${name}`,
          await parallel(SESSIONS, async (i) => {
            const outcome = await coordinators[c++ % CALLERS]!.claims.claim(admitted[i]!, {
              workerId: 'bench',
              leaseMs: 60_000,
              graceMs: 1000,
            });
            if (!outcome.claimed) throw new Error('not claimed');
          }),
        );
        for (const coordinator of coordinators) coordinator.redis.disconnect();
      }
    }
  } finally {
    subscriber.kill();
    pool.forEach((redis) => redis.disconnect());
  }
  const median = (values: number[]): number => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)]!;
  const labels: Record<string, string> = {
    'admit-cold': "admit, fresh prefix (most admissions create their slot's stream)",
    admit: "admit, every slot's stream exists (a running system)",
    claimSession: 'claimSession',
  };
  return Object.keys(labels).map((script) => ({
    script: labels[script]!,
    withEvents: median(samples.get(`${script} with`)!),
    withoutEvents: median(samples.get(`${script} without`)!),
  }));
}
