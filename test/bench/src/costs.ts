// What each part of a deployment costs Redis, as Redis counts it (INFO commandstats, the commands run
// inside scripts included): API processes (the one holding the sweeping turn and the others), worker
// hosts, running sessions, an SSE reader, and a session's whole way with its events. The built
// main.js processes with their defaults, on a Redis of the section's own; each figure is the
// difference between two windows, one part added between them.
import { setTimeout as sleep } from 'node:timers/promises';
import { commandsDuring, midSweepInterval, startRedisServer, totalCalls, until, windowOf } from '@cq/test-harness';
import { Coordinator, SLOT_COUNT } from '@cq/coordinator';
import { Redis } from 'ioredis';
import { API_KEY, Stack } from './sessions.js';

/** One part's cost. */
export interface CostRow {
  readonly part: string;
  /** Commands per second (or per item, see `per`), all of them. */
  readonly commands: number;
  /** Of those, script calls (EVALSHA and EVAL). */
  readonly scripts: number;
  readonly per: 'second' | 'session';
  /** Bytes it holds in Redis, when it holds any (MEMORY USAGE). */
  readonly bytes?: number;
  readonly note: string;
}

export interface CostBench {
  readonly sweepIntervalMs: number;
  readonly windowMs: number;
  readonly rows: CostRow[];
  /** Events a session's way emits, and what one takes in its slot's stream (bytes). */
  readonly eventsPerSession: number;
  readonly eventBytes: number;
}

const scriptsOf = (calls: ReadonlyMap<string, number>): number =>
  (calls.get('evalsha') ?? 0) + (calls.get('eval') ?? 0);

/** Runs the section; `quick` measures over shorter windows (a smoke run). */
/** The contract's LEASE_MS, which the host runs with here. */
const LEASE_MS = 15_000;

export async function benchCosts(quick: boolean): Promise<CostBench> {
  // A sweep interval of its own so each window holds a whole number of sweeps (see midSweepInterval).
  const sweepIntervalMs = quick ? 1000 : 5000;
  const windowMs = (quick ? 1 : 2) * sweepIntervalMs;
  const RUNNING = quick ? 10 : 50;
  const FLOWING = quick ? 20 : 200;
  const server = await startRedisServer();
  const redis = new Redis(server.url);
  const keyPrefix = 'costs';
  const coordinator = new Coordinator({ redis, keyPrefix });
  const turnKey = coordinator.keys.sweepTurn();
  // Sessions sleep, or exit at once when their metadata says so.
  const stack = new Stack(server.url, keyPrefix, `case "$SESSION_METADATA" in *short*) exit 0;; esac; exec sleep 600`);
  const apiEnv = { SWEEP_INTERVAL_MS: String(sweepIntervalMs), LOG_LEVEL: 'info' };
  // Windows of two sweeps; running sessions over one renewal period of a held session (a third of 20
  // leases: each renews exactly once in it, whatever its phase), scaled to the same length.
  const window = async (ms = windowMs): Promise<Map<string, number>> => {
    await midSweepInterval(redis, turnKey, sweepIntervalMs);
    const calls = await commandsDuring(redis, () => windowOf(ms));
    return new Map([...calls].map(([command, n]) => [command, (n * windowMs) / ms]));
  };
  const perSecond = (n: number): number => (n * 1000) / windowMs;
  const rows: CostRow[] = [];
  const difference = (
    part: string,
    after: Map<string, number>,
    before: Map<string, number>,
    note: string,
    divideBy = 1,
  ): void =>
    void rows.push({
      part,
      commands: perSecond(totalCalls(after) - totalCalls(before)) / divideBy,
      scripts: perSecond(scriptsOf(after) - scriptsOf(before)) / divideBy,
      per: 'second',
      note,
    });
  const abort = new AbortController();
  let second: Stack | undefined;
  try {
    await stack.startApi(apiEnv);
    await stack.api.waitFor((l) => l['fullScans'] === 1, 30_000);
    const oneApi = await window();
    rows.push({
      part: 'API process holding the sweeping turn (idle)',
      commands: perSecond(totalCalls(oneApi)),
      scripts: perSecond(scriptsOf(oneApi)),
      per: 'second',
      note: `a sweep every ${sweepIntervalMs} ms: its renewal, TIME, and one ZRANGE per slot read (128 in turn + those with live sessions)`,
    });
    second = new Stack(server.url, keyPrefix, 'exit 0');
    await second.startApi(apiEnv);
    const twoApis = await window();
    difference(
      'API process not holding it (idle)',
      twoApis,
      oneApi,
      'one SET NX PX per sweep interval, a look for webhooks every 10 s',
    );
    await stack.addHost('costs-host', RUNNING + 10);
    const host = await window();
    difference('worker host (idle)', host, twoApis, 'its heartbeat every 2 s and its queue worker');
    for (let i = 0; i < RUNNING; i++) {
      const token = (await stack.post('/v1/tokens', { userId: `running-${i}` }))['token'] as string;
      await stack.post('/v1/spawn', { token }, false);
    }
    await until(async () => (await stack.get('/v1/hosts'))['freeSlots'] === 10, 30_000, 'the sessions running');
    // Held under the host lease by the first heartbeat after each start (every 2 s).
    await sleep(quick ? 1000 : 5000);
    const running = await window(quick ? windowMs : (LEASE_MS * 20) / 3);
    difference(
      'running session',
      running,
      host,
      'its own lease renewed every third of 20 leases (the host lease and the probes cost per host), the sweep reading its slot when due',
      RUNNING,
    );
    const user = coordinator.keys.user('running-0');
    const usage = async (key: string): Promise<number> =>
      Number((await redis.call('MEMORY', 'USAGE', key, 'SAMPLES', '0')) ?? 0);
    (rows.at(-1) as { bytes?: number }).bytes =
      (await usage(user.session)) + (await usage(user.lease)) + (await usage(user.fence));

    // An SSE reader of every event: nothing while nothing happens (the feed's rounds run only while events wait).
    const response = await fetch(`${stack.baseUrl}/v1/events`, {
      headers: { authorization: `Bearer ${API_KEY}` },
      signal: abort.signal,
    });
    let received = 0;
    const body = response.body!.getReader();
    void (async () => {
      for (;;) {
        const { done, value } = await body.read();
        if (done) return;
        received += value.length;
      }
    })().catch(() => {});
    // Over as long a window as the one before it: the held sessions' renewals come every 100 s.
    const reading = await window(quick ? windowMs : (LEASE_MS * 20) / 3);
    difference('SSE reader of /v1/events (idle)', reading, running, 'nothing while no event flows');

    // A session's whole way: token, spawn, claim, exit, finish, with its events; the same window's
    // steady costs (above) taken off. Sessions exit at once; 20 a second.
    const before = received;
    const flowStartedAt = performance.now();
    const flow = await commandsDuring(redis, async () => {
      for (let i = 0; i < FLOWING; i++) {
        const token = (await stack.post('/v1/tokens', { userId: `flow-${i}`, metadata: { short: true } }))[
          'token'
        ] as string;
        await stack.post('/v1/spawn', { token }, false);
        await windowOf(Math.max(0, flowStartedAt + (i + 1) * 50 - performance.now()));
      }
      await until(
        async () => (await redis.llen(coordinator.keys.user(`flow-${FLOWING - 1}`).history)) > 0,
        30_000,
        'the last session ended',
      );
      await windowOf(1000);
    });
    const flowMs = performance.now() - flowStartedAt;
    const steady = (totalCalls(reading) * flowMs) / windowMs;
    const steadyScripts = (scriptsOf(reading) * flowMs) / windowMs;
    const slots = Array.from({ length: SLOT_COUNT }, (_, i) => coordinator.keys.events(i));
    let entries = 0;
    let streamBytes = 0;
    for (let i = 0; i < slots.length; i += 2048) {
      const batch = slots.slice(i, i + 2048);
      const lengths = await Promise.all(batch.map((key) => redis.xlen(key)));
      for (const [j, n] of lengths.entries())
        if (n > 0) {
          entries += n;
          streamBytes += await usage(batch[j]!);
        }
    }
    const eventsPerSession = entries / (FLOWING + RUNNING);
    rows.push({
      part: 'a session, from its token to its end (with its events)',
      commands: (totalCalls(flow) - steady) / FLOWING,
      scripts: (scriptsOf(flow) - steadyScripts) / FLOWING,
      per: 'session',
      bytes: (streamBytes / entries) * eventsPerSession,
      note: `${eventsPerSession.toFixed(1)} events each, kept 15 minutes in its slot's stream; the SSE reader got ${Math.round((received - before) / FLOWING)} bytes per session`,
    });
    return { sweepIntervalMs, windowMs, rows, eventsPerSession, eventBytes: streamBytes / entries };
  } finally {
    abort.abort();
    await stack.stop();
    await second?.stop();
    redis.disconnect();
    await server.stop();
  }
}
