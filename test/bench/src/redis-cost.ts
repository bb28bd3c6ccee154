// What one decision costs Redis, as Redis itself accounts it: INFO commandstats' usec of the top-level
// commands a decision sends (for a script, EVALSHA's usec, which includes the commands run inside it),
// divided by the decisions, after CONFIG RESETSTAT. Every script on a hot path, beside the library doing
// the same job where there is one; ours and the peer alternate in rounds on one Redis of the section's
// own, each round on keys never used before.
import { execFile } from 'node:child_process';
import { cpSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { availableParallelism, tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import type { RedisServer } from '@cq/test-harness';
import {
  Coordinator,
  defaultScriptsDir,
  loadScripts,
  slotOf,
  type AdmitOutcome,
  type Claim,
  type Lease,
  type ScriptName,
} from '@cq/coordinator';
import { Redis } from 'ioredis';
import { RateLimiterRedis } from 'rate-limiter-flexible';
import { Mutex } from 'redis-semaphore';
import Redlock from 'redlock';
import { benchRedis } from './redis.js';

const run = promisify(execFile);

/** The rows of a script with one call taken out, beside the script as it is. */
export const ABLATION = '(one call taken out)';

/** The rows of a script that runs the loss guard, beside a copy of it without the guard. */
export const LOSS_GUARD = '(the loss guard)';

/** The contender whose scripts have the loss guard taken out (for measuring only). */
const UNGUARDED = 'without the loss guard';

/** The row of the script that does nothing: what any EVALSHA costs Redis. */
export const FLOOR = '(an empty script)';

/**
 * Keys in Redis when each contender's turn starts. Redis's main table then has 262,144 buckets, and no
 * turn adds enough keys (at most 40,000 in a limiter's or a lease's turn) to make it grow mid-turn.
 */
export const BACKGROUND_KEYS = 200_000;

/** Concurrent callers of every measurement. */
export const COST_CALLERS = 50;

/** One contender's measurement of a job: how it sends its decisions, and what each round found. */
export interface CostSide {
  readonly name: string;
  /** The top-level commands one decision sends, summed (the commands scripts run inside are not). */
  readonly commands: readonly string[];
  /** Redis µs per decision, each round. */
  readonly usPerRound: number[];
  /** Every command Redis ran per decision (inside scripts included), each round. */
  readonly commandsPerRound: number[];
  /**
   * What the commands run inside the scripts cost, each round: µs per decision by command (Redis counts
   * them under their own names as well; they are part of the top-level µs above, not added to it).
   */
  readonly partsPerRound: Array<Record<string, number>>;
}

/** One row: our script's cost, and the peer's beside it when one does the same job. */
export interface CostRow {
  readonly script: string;
  /** What one decision is. */
  readonly decision: string;
  readonly ours: CostSide;
  readonly peer?: CostSide;
  /** Our µs ÷ the peer's, each round. */
  readonly ratios: number[];
}

export interface RedisCostBench {
  /** Whether Redis ran on a core of its own, apart from the clients (see pinApart). */
  readonly pinned: boolean;
  readonly rounds: number;
  readonly decisions: number;
  readonly callers: number;
  readonly rows: CostRow[];
}

/** Calls and usec of every command, from INFO commandstats. */
type Stats = Map<string, { calls: number; usec: number }>;

async function statsDuring(redis: Redis, during: () => Promise<unknown>): Promise<Stats> {
  await redis.config('RESETSTAT');
  await during();
  const stats: Stats = new Map();
  for (const [, name, calls, usec] of (await redis.info('commandstats')).matchAll(
    /^cmdstat_([^:]+):calls=(\d+),usec=(\d+)/gm,
  ))
    if (name !== 'config|resetstat' && name !== 'info') stats.set(name!, { calls: Number(calls), usec: Number(usec) });
  return stats;
}

/** Runs `decide(k)` for k = 0 … n-1 from `callers` concurrent loops. */
async function decisions(n: number, decide: (k: number) => Promise<unknown>): Promise<void> {
  let next = 0;
  await Promise.all(
    Array.from({ length: COST_CALLERS }, async () => {
      while (next < n) await decide(next++);
    }),
  );
}

/** One measured step of a contender (or, with no `sends`, a step that sets up the next and is not measured). */
interface Phase {
  readonly name: string;
  /** Top-level commands per decision, by name: summed, and checked against what Redis counted. */
  readonly sends?: Readonly<Record<string, number>>;
  /** The k-th decision of `round` (round -1: the warm-up), on keys of that round's own. */
  readonly decide: (round: number, k: number) => Promise<unknown>;
}

/** A contender: its phases run in order each round (a later one may use what an earlier one made). */
interface Contender {
  readonly name: string;
  /** Sets up a round's keys before its phases (not measured). */
  readonly prepare?: (round: number) => Promise<void>;
  readonly phases: readonly Phase[];
}

/** Runs `n` decisions of `phase` in `round` and reads what they cost Redis. */
async function costOf(
  observer: Redis,
  phase: Phase & { sends: Readonly<Record<string, number>> },
  round: number,
  n: number,
): Promise<{ us: number; commands: number; parts: Record<string, number> }> {
  const stats = await statsDuring(observer, () => decisions(n, (k) => phase.decide(round, k)));
  let usec = 0;
  for (const [command, perDecision] of Object.entries(phase.sends)) {
    const counted = stats.get(command) ?? { calls: 0, usec: 0 };
    if (counted.calls !== perDecision * n)
      throw new Error(
        `redis-cost: ${phase.name}: Redis counted ${counted.calls} ${command} for ${n} decisions, expected ${perDecision * n}`,
      );
    usec += counted.usec;
  }
  const all = [...stats.values()].reduce((sum, s) => sum + s.calls, 0);
  const parts: Record<string, number> = {};
  for (const [command, counted] of stats) if (!(command in phase.sends)) parts[command] = counted.usec / n;
  return { us: usec / n, commands: all / n, parts };
}

/** Fails a decision that did not take the path it measures. */
function expect(what: string, ok: boolean): void {
  if (!ok) throw new Error(`redis-cost: ${what}`);
}

/** Runs the section on a Redis of its own; `quick` makes fewer, smaller rounds (a smoke run). */
export async function benchRedisCost(quick: boolean): Promise<RedisCostBench> {
  const rounds = quick ? 2 : 7;
  const n = quick ? 1000 : 20_000;
  const WARM_UP = 100;
  const server: RedisServer = await benchRedis();
  const pinned = await pinApart(server.pid()!);
  const clients: Redis[] = [];
  const client = (): Redis => {
    const c = new Redis(server.url, { maxRetriesPerRequest: 1 });
    clients.push(c);
    return c;
  };
  const observer = client();
  const rows: CostRow[] = [];

  /**
   * Measures contenders in rounds: in each round every contender runs its phases, `n` decisions each,
   * contenders in an order that turns from round to round (so none always follows the same one), on
   * keys of that round's own. Answers each measured phase's side by `contender/phase`.
   */
  const group = async (contenders: readonly Contender[]): Promise<Map<string, CostSide>> => {
    const sides = new Map<string, CostSide>();
    for (const c of contenders)
      for (const p of c.phases)
        if (p.sends !== undefined)
          sides.set(`${c.name}/${p.name}`, {
            name: c.name,
            commands: Object.keys(p.sends).map((command) => command.toUpperCase()),
            usPerRound: [],
            commandsPerRound: [],
            partsPerRound: [],
          });
    // Warm-up: scripts cached (no NOSCRIPT fallback inside a measurement), connections open.
    for (const c of contenders) {
      await c.prepare?.(-1);
      for (const p of c.phases) await decisions(WARM_UP, (k) => p.decide(-1, k));
    }
    for (let round = 0; round < rounds; round++) {
      for (let i = 0; i < contenders.length; i++) {
        const c = contenders[(i + round) % contenders.length]!;
        // Each contender's turn starts on the same keyspace: BACKGROUND_KEYS keys, as a Redis in use
        // holds (a lookup in a large table misses the CPU's caches; in an empty one it does not), and
        // none the others left (which would make Redis grow its tables in the middle of the next one).
        await observer.flushall('SYNC');
        await observer.call('DEBUG', 'POPULATE', String(BACKGROUND_KEYS), 'background');
        await c.prepare?.(round);
        for (const p of c.phases) {
          if (p.sends === undefined) {
            await decisions(n, (k) => p.decide(round, k));
            continue;
          }
          const { us, commands, parts } = await costOf(observer, { ...p, sends: p.sends }, round, n);
          const side = sides.get(`${c.name}/${p.name}`)!;
          side.usPerRound.push(us);
          side.commandsPerRound.push(commands);
          side.partsPerRound.push(parts);
        }
      }
    }
    return sides;
  };
  const row = (script: string, decision: string, ours: CostSide | undefined, peer?: CostSide): void => {
    if (ours === undefined) throw new Error(`redis-cost: nothing measured for ${script}`);
    rows.push({
      script,
      decision,
      ours,
      ...(peer === undefined ? {} : { peer }),
      ratios: peer === undefined ? [] : ours.usPerRound.map((us, i) => us / peer.usPerRound[i]!),
    });
  };
  const script = { evalsha: 1 };

  try {
    const ours = new Coordinator({ redis: client(), keyPrefix: 'cost' });
    await ours.preload();

    // Rate limiters: each decision on a key of its own, never used (a window's first call), then the
    // same key once more (a later call in the window).
    const fixed = ours.fixedWindowLimiter({ name: 'fixed', limit: 1_000_000, windowMs: 60_000 });
    // As rate-limiter-flexible's: a million calls a minute, so a key lives through the section.
    const gcra = ours.gcraLimiter({ name: 'gcra', intervalMs: 60_000, burst: 1_000_000 });
    const sliding = ours.slidingWindowLimiter({ name: 'sliding', limit: 1000, windowMs: 60_000 });
    const flexible = new RateLimiterRedis({ storeClient: client(), keyPrefix: 'rlf', points: 1_000_000, duration: 60 });
    const key = (round: number, k: number): string => `r${round + 1}k${k}`;
    const limiter = (name: string, check: (id: string) => Promise<unknown>): Contender => ({
      name,
      phases: ['fresh', 'again'].map((pass) => ({ name: pass, sends: script, decide: (r, k) => check(key(r, k)) })),
    });
    const allowed = (r: { allowed: boolean }): void => expect('a limiter refused a call', r.allowed);
    // The floor: a script that runs no command and answers a limiter's five numbers, called as the
    // limiters are (one key, two arguments). What EVALSHA costs before a script does anything.
    const floorSha = String(await observer.script('LOAD', 'return {1, 1, 1, 0, 1}'));
    const floorClient = client();
    const limiters = await group([
      limiter('floor', (id) => floorClient.evalsha(floorSha, 1, id, '1000', '60000')),
      limiter('fixed', async (id) => allowed(await fixed.check(id))),
      limiter('gcra', async (id) => allowed(await gcra.check(id))),
      limiter('sliding', async (id) => allowed(await sliding.check(id))),
      limiter('rate-limiter-flexible', (id) => flexible.consume(id)),
    ]);
    for (const [pass, when] of [
      ['fresh', 'key never used (the window opens)'],
      ['again', 'the same key again (in its window)'],
    ] as const) {
      const peer = limiters.get(`rate-limiter-flexible/${pass}`);
      row('fixedWindow', `a check, ${when}`, limiters.get(`fixed/${pass}`), peer);
      row('gcra', `a check, ${when}`, limiters.get(`gcra/${pass}`), peer);
      row('slidingWindow', `a check, ${when}`, limiters.get(`sliding/${pass}`));
    }
    row(
      FLOOR,
      'an EVALSHA of a script that runs no command (one key, two arguments, five numbers back)',
      limiters.get('floor/fresh'),
    );

    // Locks: acquire + release pairs, each on a resource of its own.
    const redlock = new Redlock([client()], { retryCount: 0 });
    const semaphoreClient = client();
    const resource = (round: number, k: number): string => `p${round + 1}r${k}`;
    const lease = { leaseMs: 10_000, maxLifetimeMs: 60_000 };
    const pair = (name: string, sends: Record<string, number>, decide: Phase['decide']): Contender => ({
      name,
      phases: [{ name: 'pair', sends, decide }],
    });
    const pairs = await group([
      pair('ours', { evalsha: 2 }, async (r, k) => {
        const got = await ours.leases.acquire(resource(r, k), lease);
        expect('a lease was not acquired', got.acquired);
        if (got.acquired) expect('a lease was not released', await ours.leases.release(got.lease));
      }),
      pair('redlock', { evalsha: 2 }, async (r, k) => {
        const lock = await redlock.acquire([`redlock:${resource(r, k)}`], lease.leaseMs);
        await lock.release();
      }),
      // Its acquire is a SET NX PX, its release a script (GET, DEL inside).
      pair("redis-semaphore's Mutex", { set: 1, evalsha: 1 }, async (r, k) => {
        const mutex = new Mutex(semaphoreClient, resource(r, k), {
          lockTimeout: lease.leaseMs,
          refreshInterval: 0,
          acquireAttemptsLimit: 1,
        });
        expect('a Mutex was not acquired', await mutex.tryAcquire());
        await mutex.release();
      }),
    ]);
    const pairDecision = 'an acquire + release pair on a free resource (ours: fencing token included)';
    row('acquireLease + releaseLease', pairDecision, pairs.get('ours/pair'), pairs.get('redlock/pair'));
    row('acquireLease + releaseLease', pairDecision, pairs.get('ours/pair'), pairs.get("redis-semaphore's Mutex/pair"));

    // The lease's steps one by one: acquire free resources, renew those leases, release them.
    const held: Lease[] = [];
    const steps = await group([
      {
        name: 'ours',
        phases: [
          {
            name: 'acquire',
            sends: script,
            decide: async (r, k) => {
              const got = await ours.leases.acquire(`s${r + 1}r${k}`, lease);
              expect('a lease was not acquired', got.acquired);
              if (got.acquired) held[k] = got.lease;
            },
          },
          {
            name: 'renew',
            sends: script,
            decide: async (_, k) => expect('a lease was not renewed', (await ours.leases.renew(held[k]!)).ok),
          },
          {
            name: 'release',
            sends: script,
            decide: async (_, k) => expect('a lease was not released', await ours.leases.release(held[k]!)),
          },
        ],
      },
    ]);
    row('acquireLease', 'an acquisition of a free resource, fencing token included', steps.get('ours/acquire'));

    // What each call costs in place, for the scripts whose targets are missed: the script as it is beside
    // copies of it with one call taken out at a time, for these measurements only (a copy without the
    // fence is not a lease), in alternating rounds as above, each call on a key never used.
    const scripts = loadScripts();
    const ablate = async (
      name: ScriptName,
      /** One call: `evalsha(numkeys, ...keys, ...args)` on keys named with `tag`, never used before. */
      call: (
        evalsha: (keysAndArgs: Array<string | number>) => Promise<unknown>,
        tag: string,
        r: number,
        k: number,
      ) => Promise<unknown>,
      removals: ReadonlyArray<readonly [call: string, from: string, to: string]>,
    ): Promise<void> => {
      const lua = scripts.get(name)!.lua;
      const variant = async (label: string, text: string, tag: string): Promise<Contender> => {
        const sha = String(await observer.script('LOAD', text));
        const caller = client();
        const evalsha = (keysAndArgs: Array<string | number>): Promise<unknown> =>
          caller.call('EVALSHA', sha, ...keysAndArgs);
        return { name: label, phases: [{ name: 'call', sends: script, decide: (r, k) => call(evalsha, tag, r, k) }] };
      };
      const copies = removals.map(([label, from, to]) => {
        if (!lua.includes(from)) throw new Error(`redis-cost: ${name} no longer has ${JSON.stringify(from)}`);
        return { label, lua: lua.replace(from, to) };
      });
      const measured = await group([
        await variant(name, lua, `${name}-whole-`),
        ...(await Promise.all(copies.map((c, i) => variant(c.label, c.lua, `${name}-${i}-`)))),
      ]);
      for (const c of copies)
        row(ABLATION, `${name} without ${c.label}`, measured.get(`${c.label}/call`), measured.get(`${name}/call`));
    };
    await ablate(
      'acquireLease',
      async (evalsha, tag, r, k) => {
        const keys = ours.keys.lease(`${tag}${r + 1}r${k}`);
        const reply = (await evalsha([
          2,
          keys.lease,
          keys.fence,
          'owner',
          lease.leaseMs,
          lease.maxLifetimeMs,
        ])) as unknown[];
        expect('an acquireLease copy did not acquire', Number(reply[0]) === 1);
      },
      [
        ['PTTL (the check that it is free)', "local heldMs = rcall('PTTL', leaseKey)", 'local heldMs = -2'],
        ['TIME (for the hard deadline)', 'local now = nowMs()', 'local now = 0'],
        ['INCR (the fencing token)', "local fence = rcall('INCR', fenceKey)", 'local fence = 1'],
        ["PEXPIRE (the lease's time to live)", "rcall('PEXPIRE', leaseKey, ttl)", ''],
      ],
    );
    await ablate(
      'gcra',
      async (evalsha, tag, r, k) => {
        const reply = (await evalsha([1, `${tag}${r + 1}k${k}`, 60_000, 1_000_000])) as unknown[];
        expect('a gcra copy refused a call', Number(reply[0]) === 1);
      },
      [
        ['PTTL (the read of its state)', "local tat = rcall('PTTL', key)", 'local tat = -2'],
        ['SET PX (the write of its state, on a key never used)', "rcall('SET', key, '1', 'PX', newTat)", ''],
      ],
    );
    row('renewLease', "a renewal by the lease's owner", steps.get('ours/renew'));
    row('releaseLease', "a release by the lease's owner (compare-and-delete)", steps.get('ours/release'));

    // A session's way, each round under a key prefix of its own with one worker host's capacity: token,
    // admission (and its refusals), capacity hold, claim, renewal, finish. Twice, in alternating rounds:
    // as the scripts are, and as copies with the loss guard taken out (for measuring its cost only).
    const WORKER = 'cost-host';
    const user = (k: number): string => `u${k}`;
    // One more user in the slot of each measured user: its session, run before the round is measured,
    // starts the slot's loss guard and tells it the lease in use, as any use of the slot since Redis
    // started has in a running system.
    const oneSession = async (c: Coordinator, userId: string): Promise<void> => {
      const issued = await c.tokens.issue(userId);
      expect(`a warm-up token was not issued: ${issued.outcome}`, issued.outcome === 'issued');
      const admission = issued.outcome === 'issued' ? await c.sessions.admit(issued.token) : undefined;
      expect('a warm-up session was not admitted', admission?.outcome === 'admitted');
      if (admission?.outcome !== 'admitted') return;
      const got = await c.claims.claim(admission, { workerId: WORKER, leaseMs: 30_000, graceMs: 1000 });
      expect('a warm-up session was not claimed', got.claimed);
      if (got.claimed) await c.claims.finish(got.claim, 'completed', 0);
    };
    const warmUsers = usersInSlotsOf(Array.from({ length: n + WARM_UP }, (_, k) => user(k)));
    const sessionContender = (name: string, prefix: string, redis: Redis, scriptsDir?: string): Contender => {
      const coordinators = new Map<number, Coordinator>();
      const at = (round: number): Coordinator => coordinators.get(round)!;
      const prepare = async (round: number): Promise<void> => {
        const c = new Coordinator({
          redis,
          keyPrefix: `${prefix}${round + 1}`,
          ...(scriptsDir === undefined ? {} : { scriptsDir }),
          // The throttle stays closed for the whole round: a second admission of a user is throttled.
          policy: { spawnIntervalMs: 3_600_000, spawnBurst: 1 },
        });
        await c.workers.heartbeat({ workerId: WORKER, slots: n + WARM_UP, busy: 0, startedAt: Date.now() }, 3_600_000);
        coordinators.set(round, c);
        let next = 0;
        await Promise.all(
          Array.from({ length: COST_CALLERS }, async () => {
            while (next < warmUsers.length) await oneSession(c, warmUsers[next++]!);
          }),
        );
      };
      const first: string[] = [];
      const second: string[] = [];
      const admitted: Array<AdmitOutcome & { outcome: 'admitted' }> = [];
      const claims: Claim[] = [];
      const issue = async (r: number, k: number): Promise<string> => {
        const issued = await at(r).tokens.issue(user(k));
        expect(`a token was not issued: ${issued.outcome}`, issued.outcome === 'issued');
        return issued.outcome === 'issued' ? issued.token : '';
      };
      const admit =
        (tokens: readonly string[], outcome: AdmitOutcome['outcome']) =>
        async (r: number, k: number): Promise<AdmitOutcome> => {
          const answer = await at(r).sessions.admit(tokens[k]!);
          expect(`an admission answered ${answer.outcome}, not ${outcome}`, answer.outcome === outcome);
          return answer;
        };
      return {
        name,
        prepare,
        phases: [
          { name: 'issueToken', sends: script, decide: async (r, k) => void (first[k] = await issue(r, k)) },
          {
            name: 'admitted',
            sends: script,
            decide: async (r, k) => {
              const answer = await admit(first, 'admitted')(r, k);
              if (answer.outcome === 'admitted') admitted[k] = answer;
            },
          },
          {
            name: 'reserveSlot',
            sends: script,
            decide: async (r, k) => {
              const held = await at(r).workers.reserve(admitted[k]!.sessionId, 60_000, true);
              expect('no slot was held', held.outcome === 'reserved');
            },
          },
          { name: 'second token', decide: async (r, k) => void (second[k] = await issue(r, k)) },
          { name: 'session_exists', sends: script, decide: admit(second, 'session_exists') },
          { name: 'token_invalid', sends: script, decide: admit(first, 'token_invalid') },
          {
            name: 'claimSession',
            sends: script,
            decide: async (r, k) => {
              const got = await at(r).claims.claim(admitted[k]!, { workerId: WORKER, leaseMs: 30_000, graceMs: 1000 });
              expect('a session was not claimed', got.claimed);
              if (got.claimed) claims[k] = got.claim;
            },
          },
          {
            name: 'renewSession',
            sends: script,
            decide: async (r, k) => expect('a session was not renewed', (await at(r).claims.renew(claims[k]!)).ok),
          },
          {
            name: 'finishSession',
            sends: script,
            decide: async (r, k) =>
              expect('a session was not finished', await at(r).claims.finish(claims[k]!, 'completed', 0)),
          },
          { name: 'throttled', sends: script, decide: admit(second, 'throttled') },
        ],
      };
    };
    const unguarded = withoutLossGuard();
    const sessions = await group([
      sessionContender('ours', 'cost', ours.redis as Redis),
      sessionContender(UNGUARDED, 'costu', client(), unguarded.dir),
    ]);
    unguarded.remove();
    row('issueToken', 'a token issued (under the per-user token rate)', sessions.get('ours/issueToken'));
    row('admit', 'admitted: token consumed, fence taken, session recorded pending', sessions.get('ours/admitted'));
    row('admit', 'refused, token_invalid (403): a used token again', sessions.get('ours/token_invalid'));
    row('admit', 'refused, session_exists (409): the user has a live session', sessions.get('ours/session_exists'));
    row('admit', 'refused, throttled (429): the spawn throttle is closed', sessions.get('ours/throttled'));
    row('reserveSlot', 'a slot held for an admitted session (capacity check on)', sessions.get('ours/reserveSlot'));
    row('claimSession', 'a pending session claimed by its worker host, lease taken', sessions.get('ours/claimSession'));
    row('renewSession', 'a session lease renewed by its owner', sessions.get('ours/renewSession'));
    row(
      'finishSession',
      'a session finished (completed), history and events written',
      sessions.get('ours/finishSession'),
    );
    // The loss guard's cost: each script that runs it, beside its copy without it.
    for (const [phase, decision] of [
      ['issueToken', 'issueToken: a token issued'],
      ['admitted', 'admit: admitted'],
      ['claimSession', 'claimSession: claimed'],
      ['token_invalid', 'admit: refused, token_invalid'],
      ['session_exists', 'admit: refused, session_exists'],
      ['throttled', 'admit: refused, throttled'],
    ] as const)
      row(LOSS_GUARD, decision, sessions.get(`ours/${phase}`), sessions.get(`${UNGUARDED}/${phase}`));
    return { pinned: pinned.pinned, rounds, decisions: n, callers: COST_CALLERS, rows };
  } finally {
    for (const c of clients) c.disconnect();
    await server.stop();
    await pinned.undo();
  }
}

/**
 * Redis on a core of its own, this process (every thread) on the others, while the section runs: Redis
 * counts wall-clock time inside a command, so a command during which the clients took Redis's core
 * would count their time too. Nothing is pinned with one core, or without `taskset` (util-linux).
 */
async function pinApart(redisPid: number): Promise<{ pinned: boolean; undo: () => Promise<void> }> {
  const cores = availableParallelism();
  const nothing = { pinned: false, undo: async () => {} };
  if (cores < 2) return nothing;
  const all = `0-${cores - 1}`;
  const others = cores === 2 ? '0' : `0-${cores - 2}`;
  try {
    await run('taskset', ['-a', '-p', '-c', String(cores - 1), String(redisPid)]);
    await run('taskset', ['-a', '-p', '-c', others, String(process.pid)]);
  } catch {
    return nothing;
  }
  return { pinned: true, undo: async () => void (await run('taskset', ['-a', '-p', '-c', all, String(process.pid)])) };
}

/**
 * A copy of the scripts folder as it would be without the loss guard: `includes/lossGuard.lua` replaced by
 * a guard that never waits and reads nothing, and the stamps' writes taken out of the scripts that make
 * them. For measuring what the guard costs only. Removed by `remove`.
 */
function withoutLossGuard(): { dir: string; remove: () => void } {
  const dir = mkdtempSync(join(tmpdir(), 'cq-unguarded-'));
  cpSync(defaultScriptsDir, dir, { recursive: true });
  writeFileSync(
    join(dir, 'includes', 'lossGuard.lua'),
    [
      'local function lossGuard() return { since = 0, untilMs = 0, floor = 0 } end',
      'local function lossStampFloor() return 0 end',
      'local function lossStampCovers() return true end',
      '',
    ].join('\n'),
  );
  // The stamps' writes go; their reads stay (a field more of a hash the script reads anyway: the labels
  // and pool after them keep their places).
  const edits: ReadonlyArray<readonly [file: string, from: string, to: string]> = [
    ['admit-13.lua', ", 'g', stamp)", ')'],
    ['issueToken-3.lua', ", 'g', guard.stamp)", ')'],
  ];
  for (const [file, from, to] of edits) {
    const text = readFileSync(join(dir, file), 'utf8');
    if (!text.includes(from)) throw new Error(`redis-cost: ${file} no longer has ${JSON.stringify(from)}`);
    writeFileSync(join(dir, file), text.replace(from, to));
  }
  return { dir, remove: () => rmSync(dir, { recursive: true, force: true }) };
}

/** For each distinct cluster slot of `users`, one other user id in that slot (`w0`, `w1`, ...). */
function usersInSlotsOf(users: readonly string[]): string[] {
  const wanted = new Set(users.map((u) => slotOf(`{u:${u}}`)));
  const found: string[] = [];
  for (let i = 0; wanted.size > 0; i++) {
    const candidate = `w${i}`;
    if (wanted.delete(slotOf(`{u:${candidate}}`))) found.push(candidate);
  }
  return found;
}

/** The median of `values`. */
export function medianOf(values: readonly number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = Math.floor(sorted.length / 2);
  return sorted.length % 2 === 1 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2;
}
