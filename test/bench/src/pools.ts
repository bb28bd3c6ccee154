// Pools (issue 35): what an admission, a hold and a claim cost Redis with one pool and with 20, and
// whether a pool saturated with queued work delays another pool's sessions (the built API and worker
// hosts, real HTTP, real processes).
import { Coordinator, slotOf, type AdmitOutcome, type Claim } from '@cq/coordinator';
import type { RedisServer } from '@cq/test-harness';
import { Redis } from 'ioredis';
import { benchRedis } from './redis.js';
import { Stack } from './sessions.js';

/** µs of Redis per decision, each round. */
export interface PoolCostRow {
  readonly decision: string;
  readonly onePool: number[];
  readonly twentyPools: number[];
}

export interface PoolLatency {
  readonly p50: number;
  readonly p99: number;
  readonly n: number;
}

export interface PoolsBench {
  readonly rounds: number;
  readonly decisions: number;
  readonly cost: PoolCostRow[];
  /** Pool b's spawn → session started, ms: with pool a idle, and with pool a's queue full of waiting work. */
  readonly independence: {
    readonly alone: PoolLatency;
    readonly besideSaturated: PoolLatency;
    readonly queuedInA: number;
  };
}

/** µs of EVALSHA Redis counted while `during` ran, per decision (the scripts' inside commands are in it). */
async function scriptUs(observer: Redis, n: number, during: () => Promise<unknown>): Promise<number> {
  await observer.config('RESETSTAT');
  await during();
  // ioredis sends EVAL the first time a connection runs a script, EVALSHA after: both are the script (a
  // first EVALSHA answered NOSCRIPT is counted as failed, not as a call, and is sent again as EVAL).
  let calls = 0;
  let usec = 0;
  for (const [, , c, us] of (await observer.info('commandstats')).matchAll(
    /^cmdstat_(evalsha|eval):calls=(\d+),usec=(\d+)/gm,
  )) {
    calls += Number(c);
    usec += Number(us);
  }
  if (Math.abs(calls - n) > 5) throw new Error(`pools bench: ${calls} scripts for ${n} decisions`);
  return usec / n;
}

/** Runs `work(k)` for k = 0 … n-1 from 50 concurrent loops. */
async function concurrently(n: number, work: (k: number) => Promise<unknown>): Promise<void> {
  let next = 0;
  await Promise.all(
    Array.from({ length: 50 }, async () => {
      while (next < n) await work(next++);
    }),
  );
}

/** For each distinct slot of users u0 … u(n-1), one other user id in that slot (`w0`, `w1`, ...). */
function warmUsers(n: number): string[] {
  const wanted = new Set(Array.from({ length: n }, (_, k) => slotOf(`{u:u${k}}`)));
  const found: string[] = [];
  for (let i = 0; wanted.size > 0; i++) if (wanted.delete(slotOf(`{u:w${i}}`))) found.push(`w${i}`);
  return found;
}

function percentiles(values: number[]): PoolLatency {
  const sorted = [...values].sort((a, b) => a - b);
  const at = (q: number): number => sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))]!;
  return { p50: at(0.5), p99: at(0.99), n: sorted.length };
}

/** The Redis cost, in rounds that alternate one pool and twenty. */
async function poolCost(quick: boolean): Promise<{ rounds: number; decisions: number; cost: PoolCostRow[] }> {
  const rounds = quick ? 2 : 5;
  const n = quick ? 1000 : 10_000;
  const server: RedisServer = await benchRedis();
  const redis = new Redis(server.url, { maxRetriesPerRequest: 1 });
  const observer = new Redis(server.url, { maxRetriesPerRequest: 1 });
  const rows = new Map<string, PoolCostRow>(
    ['admit: admitted', 'reserveSlot: a slot held', 'claimSession: claimed'].map((d) => [
      d,
      { decision: d, onePool: [], twentyPools: [] },
    ]),
  );
  try {
    for (let round = -1; round < rounds; round++)
      for (const pools of round % 2 === 0 ? [1, 20] : [20, 1]) {
        await observer.flushall('SYNC');
        const c = new Coordinator({
          redis,
          keyPrefix: `pools${pools}r${round + 1}`,
          policy: { tokenLimit: 1_000_000, spawnIntervalMs: 1, spawnBurst: 1_000_000 },
        });
        const poolOf = (k: number): string => (pools === 1 ? 'default' : `pool-${k % pools}`);
        for (let p = 0; p < pools; p++)
          await c.workers.heartbeat(
            { workerId: `host-${p}`, slots: n, busy: 0, startedAt: 1, pool: pools === 1 ? 'default' : `pool-${p}` },
            3_600_000,
          );
        // A session of another user in each measured user's slot first: the slot is in the session list's
        // directory then, as any slot in use is (its first admission enters it, once).
        const warm = warmUsers(n);
        await concurrently(warm.length, async (k) => {
          const issued = await c.tokens.issue(warm[k]!, { pool: poolOf(k) });
          if (issued.outcome !== 'issued' || (await c.sessions.admit(issued.token)).outcome !== 'admitted')
            throw new Error('pools bench: a warm-up session was not admitted');
        });
        const tokens: string[] = [];
        await concurrently(n, async (k) => {
          const issued = await c.tokens.issue(`u${k}`, { pool: poolOf(k) });
          if (issued.outcome !== 'issued') throw new Error('pools bench: a token was not issued');
          tokens[k] = issued.token;
        });
        const admitted: Array<Extract<AdmitOutcome, { outcome: 'admitted' }>> = [];
        const admitUs = await scriptUs(observer, n, () =>
          concurrently(n, async (k) => {
            const outcome = await c.sessions.admit(tokens[k]!);
            if (outcome.outcome !== 'admitted') throw new Error(`pools bench: ${outcome.outcome}`);
            admitted[k] = outcome;
          }),
        );
        const reserveUs = await scriptUs(observer, n, () =>
          concurrently(n, async (k) => {
            const held = await c.workers.reserve(admitted[k]!.sessionId, 60_000, true, poolOf(k));
            if (held.outcome !== 'reserved') throw new Error('pools bench: no slot held');
          }),
        );
        const claims: Claim[] = [];
        const claimUs = await scriptUs(observer, n, () =>
          concurrently(n, async (k) => {
            const got = await c.claims.claim(admitted[k]!, {
              workerId: `host-${k % pools}`,
              leaseMs: 30_000,
              graceMs: 1000,
              pool: poolOf(k),
            });
            if (!got.claimed) throw new Error(`pools bench: not claimed (${got.reason})`);
            claims[k] = got.claim;
          }),
        );
        if (round < 0) continue; // the warm-up round: scripts loaded, connections open
        const side = pools === 1 ? 'onePool' : 'twentyPools';
        rows.get('admit: admitted')![side].push(admitUs);
        rows.get('reserveSlot: a slot held')![side].push(reserveUs);
        rows.get('claimSession: claimed')![side].push(claimUs);
      }
  } finally {
    redis.disconnect();
    observer.disconnect();
    await server.stop();
  }
  return { rounds, decisions: n, cost: [...rows.values()] };
}

/**
 * Pool b's spawn → start latency, one spawn at a time, first with pool a idle, then with pool a's one
 * host busy and thousands of its sessions queued behind it (CAPACITY_CHECK=false: admitted, waiting).
 */
async function independence(redisUrl: string, quick: boolean): Promise<PoolsBench['independence']> {
  const SAMPLES = quick ? 20 : 100;
  const QUEUED = quick ? 300 : 3000;
  const stack = new Stack(redisUrl, 'benchpools', 'exit 0');
  try {
    await stack.startApi({ CAPACITY_CHECK: 'false' });
    await stack.addHost('pool-a-1', 1, { POOL: 'a', SESSION_COMMAND: 'exec sleep 600' });
    await stack.addHost('pool-b-1', 8, { POOL: 'b' });
    const tokens = async (users: string[], pool: string): Promise<string[]> =>
      Promise.all(users.map(async (userId) => String((await stack.post('/v1/tokens', { userId, pool }))['token'])));
    const measure = async (tag: string): Promise<number[]> => {
      const users = Array.from({ length: SAMPLES + 5 }, (_, i) => `b-${tag}-${i}`);
      const ready = await tokens(users, 'b');
      const samples: number[] = [];
      for (let i = 0; i < users.length; i++) {
        const t0 = performance.timeOrigin + performance.now();
        await stack.post('/v1/spawn', { token: ready[i] }, false);
        const started = (await stack.waitStarted([users[i]!])).get(users[i]!)!;
        if (i >= 5) samples.push(started - t0); // the first five warm up
      }
      return samples;
    };
    const alone = await measure('alone');
    // Pool a saturated: its one slot taken for good, and QUEUED more of its sessions waiting.
    const aUsers = Array.from({ length: QUEUED }, (_, i) => `a-${i}`);
    const aTokens = await tokens(aUsers, 'a');
    for (let i = 0; i < aTokens.length; i += 100)
      await Promise.all(aTokens.slice(i, i + 100).map((token) => stack.post('/v1/spawn', { token }, false)));
    const beside = await measure('beside');
    return { alone: percentiles(alone), besideSaturated: percentiles(beside), queuedInA: QUEUED };
  } finally {
    await stack.stop();
  }
}

export async function benchPools(redisUrl: string, quick: boolean): Promise<PoolsBench> {
  const cost = await poolCost(quick);
  return { ...cost, independence: await independence(redisUrl, quick) };
}
