// What keeping sessions running costs Redis, per session, and how fast a stop reaches a session.
//
// Ours: the built API and one worker host with the contract's defaults (LEASE_MS 15000), with 0, 100 and
// 1,000 running sessions that sleep, each count taken by Redis itself (INFO commandstats: script calls
// and every command inside them) over a window of one whole renewal period of a session held under its
// host's lease (a third of 20 leases, 100 s: each session renews exactly once in it, whatever its phase),
// which is also whole heartbeats and sweeps; per session is the difference from the idle window, divided
// by the sessions. Beside it, BullMQ keeping the same number of active jobs
// locked: one Worker with that concurrency whose jobs wait, its defaults (lockDuration 30 s, renewed
// every 15 s, one batched extendLocks per renewal), on a Redis of its own.
//
// Then DELETE → SIGTERM: the session (bash) traps SIGTERM and writes the instant its trap started to an
// observer's FIFO ($EPOCHREALTIME: no fork; its own clock, in µs; a session may write no file of the host's); the bench sends DELETE /v1/users/{userId}/session at a known instant, 20 times.
import { readFileSync } from 'node:fs';
import { setTimeout as sleep } from 'node:timers/promises';
import { commandsDuring, startRedisServer, totalCalls, until, windowOf } from '@cq/test-harness';
import { Queue, Worker } from 'bullmq';
import { Redis } from 'ioredis';
import { Observer, Stack } from './sessions.js';

export interface KeepaliveCostRow {
  readonly sessions: number;
  /** Commands per second over the window, all of them (script-internal included). */
  readonly commandsPerSecond: number;
  /** Per running session beyond the idle window: (this − idle) / sessions. */
  readonly perSession?: number;
  /** The same, command by command (the largest first). */
  readonly perSessionByCommand?: Array<[string, number]>;
  /** The same for BullMQ keeping as many active jobs locked. */
  readonly bullmqPerSecond: number;
  readonly bullmqPerJob?: number;
}

export interface KeepaliveCostBench {
  readonly leaseMs: number;
  readonly windowMs: number;
  /** BullMQ's windows (whole lock extensions), ms. */
  readonly bullWindowMs: number;
  readonly rows: KeepaliveCostRow[];
  /** DELETE sent → SIGTERM seen by the session, ms, sorted. */
  readonly stopMs: number[];
}

const LEASE_MS = 15_000; // the contract's default, which the host runs with here

/** Commands per second a window of `windowMs` counts on `redis`, in all and command by command. */
async function rates(redis: Redis, windowMs: number): Promise<{ total: number; by: Map<string, number> }> {
  const calls = await commandsDuring(redis, () => windowOf(windowMs));
  const by = new Map([...calls].map(([command, n]) => [command, (n * 1000) / windowMs]));
  return { total: (totalCalls(calls) * 1000) / windowMs, by };
}

async function rate(redis: Redis, windowMs: number): Promise<number> {
  return (await rates(redis, windowMs)).total;
}

/** BullMQ: `jobs` active jobs held by one Worker (they wait until released); commands/s while they do. */
async function bullmqHolding(jobs: number, windowMs: number): Promise<number> {
  const server = await startRedisServer();
  const connection = { host: '127.0.0.1', port: Number(new URL(server.url).port) };
  const redis = new Redis(server.url);
  const queue = new Queue('keepalive-cost', { connection });
  let release!: () => void;
  const released = new Promise<void>((resolve) => (release = resolve));
  let active = 0;
  const worker = new Worker(
    'keepalive-cost',
    async () => {
      active++;
      await released;
    },
    { connection, concurrency: Math.max(1, jobs) },
  );
  try {
    await worker.waitUntilReady();
    if (jobs > 0) await queue.addBulk(Array.from({ length: jobs }, (_, i) => ({ name: 'hold', data: { i } })));
    await until(() => active === jobs, 60_000, `${jobs} BullMQ jobs active`);
    return await rate(redis, windowMs);
  } finally {
    release();
    await worker.close();
    await queue.close();
    redis.disconnect();
    await server.stop();
  }
}

/** Runs the section; `quick` uses 10 sessions and windows of 2 s (a smoke run: its figures mean little). */
export async function benchKeepaliveCost(quick: boolean): Promise<KeepaliveCostBench> {
  const counts = quick ? [0, 10] : [0, 100, 1000];
  // One renewal period of a held session (a third of 20 leases: 100 s); whole BullMQ renewals (15 s): 30 s.
  const windowMs = quick ? 2000 : (LEASE_MS * 20) / 3;
  const bullWindowMs = quick ? 2000 : 30_000;
  const server = await startRedisServer();
  const redis = new Redis(server.url);
  const terms = new Observer('terms');
  const stack = new Stack(
    server.url,
    'keepalive',
    // The instant is bash's $EPOCHREALTIME, read as the trap starts: a `$(date)` there is a fork after the
    // signal, which the namespace's init, passing the SIGTERM on to every process, may kill, and the trap
    // then runs again. That measured the session's own second fork (up to 150 ms), not the stop's arrival.
    `exec bash -c 'trap "echo \\"\\$USER_ID term \\\${EPOCHREALTIME/./}000\\" >> ${terms.fifo}; exit 0" TERM; sleep 3600 & wait'`,
  );
  const rows: KeepaliveCostRow[] = [];
  const stopMs: number[] = [];
  try {
    await stack.startApi();
    // The sweep's first full read of every slot (once per API start) is not part of any window.
    await stack.api.waitFor((l) => l['fullScans'] === 1, 30_000);
    const most = counts.at(-1)!;
    await stack.addHost('keepalive-host', most);
    let started = 0;
    let idle = { total: 0, by: new Map<string, number>() };
    let bullIdle = 0;
    for (const count of counts) {
      for (; started < count; started++) {
        const token = (await stack.post('/v1/tokens', { userId: `keep-${started}` }))['token'] as string;
        await stack.post('/v1/spawn', { token }, false);
      }
      await until(
        async () => (await stack.get('/v1/hosts'))['freeSlots'] === most - count,
        120_000,
        `${count} sessions running`,
      );
      // The claims' extra heartbeats and the renewals that hold the sessions under the host lease (at the
      // first heartbeat after each start, every 2 s) are over well within a third of the lease.
      await sleep(quick ? 1000 : LEASE_MS / 3);
      const ours = await rates(redis, windowMs);
      const bull = await bullmqHolding(count, bullWindowMs);
      if (count === 0) {
        idle = ours;
        bullIdle = bull;
      }
      const byCommand = [...ours.by]
        .map(([command, n]): [string, number] => [command, (n - (idle.by.get(command) ?? 0)) / count])
        .filter(([, n]) => n >= 0.005)
        .sort((a, b) => b[1] - a[1]);
      rows.push({
        sessions: count,
        commandsPerSecond: ours.total,
        bullmqPerSecond: bull,
        ...(count === 0
          ? {}
          : {
              perSession: (ours.total - idle.total) / count,
              perSessionByCommand: byCommand,
              bullmqPerJob: (bull - bullIdle) / count,
            }),
      });
    }
    // DELETE → SIGTERM, one session at a time (the others keep running).
    const stops = quick ? 3 : 20;
    for (let i = 0; i < stops; i++) {
      const userId = `keep-${i}`;
      const sentAtNs = BigInt(Date.now()) * 1_000_000n;
      await stack.request('DELETE', `/v1/users/${userId}/session`, undefined, true);
      // The first instant the session wrote (the trap may run twice: the group's SIGTERM, then its init's).
      let at: bigint | undefined;
      await until(
        () => {
          const seen = readFileSync(terms.log, 'utf8')
            .split('\n')
            .flatMap((l) => {
              const match = new RegExp(`^${userId} term (\\d+)$`).exec(l);
              return match === null ? [] : [BigInt(match[1]!)];
            });
          at = seen.length === 0 ? undefined : seen.reduce((a, b) => (a < b ? a : b));
          return at !== undefined;
        },
        30_000,
        `SIGTERM in ${userId}'s session`,
      );
      stopMs.push(Number(at! - sentAtNs) / 1e6);
      // Spread over the renewal period, so a stop riding on a renewal would show.
      await sleep(LEASE_MS / 3 / stops);
    }
    stopMs.sort((a, b) => a - b);
    return { leaseMs: LEASE_MS, windowMs, bullWindowMs, rows, stopMs };
  } finally {
    await stack.stop();
    terms.stop();
    redis.disconnect();
    await server.stop();
  }
}
