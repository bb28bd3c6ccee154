// npm run bench [-- --quick] [--only <section>,...]: our coordinator side by side with the libraries a
// user would pick instead, on one redis-server of our own, in one run. Prints Markdown; writes
// bench-results.json (with --only, of those sections alone).
import { spawn } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { cpus, totalmem } from 'node:os';
import { Coordinator, loadScripts } from '@cq/coordinator';
import { createLogger } from '@cq/service-kit';
import { SPAWN_JOB, spawnJobId, spawnJobOptions, spawnQueueShards } from '@cq/spawn-handoff';
import { WorkerHost, loadWorkerConfig, type SessionLauncher } from '@cq/worker';
import { Queue, QueueEvents, Worker } from 'bullmq';
import { Redis } from 'ioredis';
import { RateLimiterRedis } from 'rate-limiter-flexible';
import { Mutex } from 'redis-semaphore';
import Redlock from 'redlock';
import { measure, medianOf, type Sample } from './measure.js';
import { benchRedis, redisBenchmark } from './redis.js';
import { benchEventLatency, benchEventScripts } from './events.js';
import { benchAdmission, benchSessions } from './sessions.js';
import { benchIsolation, isolationMarkdown, isolationTargets } from './session-isolation.js';
import { benchOutput } from './output.js';
import { benchOutputFlood } from './output-flood.js';
import { benchWebhooks } from './webhooks.js';
import { benchHttpEdge } from './http-edge.js';
import { benchCosts } from './costs.js';
import { benchKeepaliveCost } from './keepalive-cost.js';
import { benchSessionList } from './session-list.js';
import { benchPools } from './pools.js';
import { ABLATION, LOSS_GUARD, benchRedisCost, medianOf as medianOfValues, type CostSide } from './redis-cost.js';
import { startRedisServer } from '@cq/test-harness';

const quick = process.argv.includes('--quick');
/** The sections, in the order they run; `--only <name>[,<name>...]` (or `--only=...`) runs those alone. */
const SECTIONS = [
  'redis-cost',
  'limiters',
  'locks',
  'http',
  'pipeline',
  'admission',
  'sessions',
  'isolation',
  'events',
  'output',
  'output-flood',
  'webhooks',
  'costs',
  'keepalive',
  'session-list',
  'pools',
  'memory',
  'replication',
] as const;
const onlyArg = process.argv.find((a, i) => a.startsWith('--only=') || process.argv[i - 1] === '--only');
const only = onlyArg === undefined ? undefined : onlyArg.replace(/^--only=/, '').split(',');
const unknownSections = (only ?? []).filter((name) => !(SECTIONS as readonly string[]).includes(name));
if (unknownSections.length > 0 || (only !== undefined && only.length === 0)) {
  process.stderr.write(`unknown section ${unknownSections.join(', ')}: --only takes some of ${SECTIONS.join(', ')}\n`);
  process.exit(2);
}
const wanted = (section: (typeof SECTIONS)[number]): boolean => only === undefined || only.includes(section);
const RUNS = quick ? 1 : 3;
const SECONDS = quick ? 1 : 4;
const KEYS = 100_000;
const CONNECTIONS_HTTP = 50;
const out = (line = ''): void => void process.stdout.write(`${line}\n`);
const fmt = (n: number, digits = 0): string =>
  Number.isFinite(n)
    ? n.toLocaleString('en-US', { maximumFractionDigits: digits, minimumFractionDigits: digits })
    : '–';
const ratio = (a: number, b: number): string => `${(a / b).toFixed(2)}×`;

const server = await benchRedis();
const results: Record<string, unknown> = {
  machine: {
    cpu: cpus()[0]?.model,
    cores: cpus().length,
    memoryGiB: Math.round(totalmem() / 2 ** 30),
    node: process.version,
  },
  quick,
  runs: RUNS,
  ...(only === undefined ? {} : { only }),
};
const client = (): Redis => new Redis(server.url, { maxRetriesPerRequest: 1 });
const targets: Array<{ name: string; value: number; target: number; atMost: boolean; met: boolean }> = [];
/** A target: `value` at least `wanted` (a ratio, a rate), or at most it with `atMost` (a latency, a size). */
const target = (name: string, value: number, wanted: number, atMost = false): void =>
  void targets.push({ name, value, target: wanted, atMost, met: atMost ? value <= wanted : value >= wanted });

try {
  const info = await client().info('server');
  (results['machine'] as Record<string, unknown>)['redis'] = /redis_version:(\S+)/.exec(info)?.[1];

  // The coordinator of the rate limiting and lock sections.
  const ours = new Coordinator({ redis: client(), keyPrefix: 'bench' });
  await ours.preload();

  // 0. What one decision costs Redis ---------------------------------------------------------------
  if (wanted('redis-cost')) {
    const cost = await benchRedisCost(quick);
    out(
      `## What one decision costs Redis: µs of Redis per decision (INFO commandstats), ${cost.rounds} rounds × ${fmt(cost.decisions)} decisions, ${cost.callers} callers`,
    );
    out();
    out(
      "On a Redis of the section's own: after `CONFIG RESETSTAT`, the decisions of one kind, then `INFO commandstats`; " +
        "a decision's cost is the `usec` Redis counted for the top-level commands it sends (for a script, EVALSHA's, which " +
        'includes the commands run inside it; those are not added again) divided by the decisions. Ours and the peer ' +
        'alternate in each round (the order turning from round to round), each round on keys never used before; µs are ' +
        "medians over the rounds, the ratio is the median of the rounds' ratios (min–max beside it); decisions/s per " +
        'Redis core is 1e6 ÷ µs. Commands: every command Redis ran per decision, the top-level ones and those run inside scripts.',
    );
    out();
    out(
      '| script | decision | ours µs | ours decisions/s per Redis core | ours commands | peer (what it sends) | peer µs | peer decisions/s per Redis core | peer commands | ours ÷ peer (min–max) |',
    );
    out('| --- | --- | ---: | ---: | ---: | --- | ---: | ---: | ---: | ---: |');
    const costRows: Array<Record<string, unknown>> = [];
    const ablations = cost.rows.filter((r) => r.script === ABLATION);
    const guardRows = cost.rows.filter((r) => r.script === LOSS_GUARD);
    const measuredRows = cost.rows.filter((r) => r.script !== ABLATION && r.script !== LOSS_GUARD);
    for (const r of measuredRows) {
      const us = medianOfValues(r.ours.usPerRound);
      const commands = medianOfValues(r.ours.commandsPerRound);
      const peerUs = r.peer === undefined ? Number.NaN : medianOfValues(r.peer.usPerRound);
      const peerCommands = r.peer === undefined ? Number.NaN : medianOfValues(r.peer.commandsPerRound);
      const ratioMedian = r.peer === undefined ? Number.NaN : medianOfValues(r.ratios);
      const spread = r.peer === undefined ? '' : ` (${fmt(Math.min(...r.ratios), 2)}–${fmt(Math.max(...r.ratios), 2)})`;
      out(
        `| ${r.script} | ${r.decision} | ${fmt(us, 2)} | ${fmt(1e6 / us)} | ${fmt(commands, 1)} | ${r.peer === undefined ? '–' : `${r.peer.name} (${r.peer.commands.join(' + ')})`} | ${fmt(peerUs, 2)} | ${fmt(1e6 / peerUs)} | ${fmt(peerCommands, 1)} | ${r.peer === undefined ? '–' : `${fmt(ratioMedian, 2)}×${spread}`} |`,
      );
      costRows.push({
        script: r.script,
        decision: r.decision,
        us,
        perSecondPerCore: 1e6 / us,
        commands,
        ...(r.peer === undefined
          ? {}
          : { peer: r.peer.name, peerUs, peerPerSecondPerCore: 1e6 / peerUs, peerCommands, ratio: ratioMedian }),
        ours: r.ours,
        ...(r.peer === undefined ? {} : { peerRounds: r.peer, ratios: r.ratios }),
      });
    }
    out();
    out(
      `Redis ${cost.pinned ? 'ran on a core of its own, the benchmark on the other(s) (taskset)' : 'shared the cores with the benchmark (taskset was not available)'}.`,
    );
    out();
    // What costs what: the commands inside each script, and the rest (what EVALSHA itself costs, an empty
    // script's row shows; the Lua code; each call's way from Lua to the command and back).
    out('### What costs what inside each decision (µs of Redis, medians over the rounds)');
    out();
    out(
      '| who | decision | µs in all | the commands inside, µs each | the rest: the script (EVALSHA, Lua, the calls’ passage) |',
    );
    out('| --- | --- | ---: | --- | ---: |');
    const seenSides = new Set<CostSide>();
    const partRows: Array<Record<string, unknown>> = [];
    for (const r of measuredRows)
      for (const side of [r.ours, ...(r.peer === undefined ? [] : [r.peer])]) {
        if (seenSides.has(side)) continue;
        seenSides.add(side);
        const commands = [...new Set(side.partsPerRound.flatMap((parts) => Object.keys(parts)))];
        const parts = commands
          .map((command) => ({ command, us: medianOfValues(side.partsPerRound.map((p) => p[command] ?? 0)) }))
          .sort((a, b) => b.us - a.us);
        const total = medianOfValues(side.usPerRound);
        const rest = medianOfValues(
          side.usPerRound.map((us, i) => us - Object.values(side.partsPerRound[i]!).reduce((a, b) => a + b, 0)),
        );
        const who = side === r.ours ? r.script : side.name;
        out(
          `| ${who} | ${r.decision} | ${fmt(total, 2)} | ${parts.map((p) => `${p.command.toUpperCase()} ${fmt(p.us, 2)}`).join(', ') || '–'} | ${fmt(rest, 2)} |`,
        );
        partRows.push({ who, decision: r.decision, us: total, parts, rest });
      }
    out();
    out(
      '### A script with one call taken out (copies of the script measured beside it, in alternating rounds; for measuring only)',
    );
    out();
    out(
      '| script | taken out | µs without it | µs of the script as it is | saved, µs (median of the rounds) | without ÷ as it is |',
    );
    out('| --- | --- | ---: | ---: | ---: | ---: |');
    for (const r of ablations) {
      const saved = medianOfValues(r.ours.usPerRound.map((us, i) => r.peer!.usPerRound[i]! - us));
      out(
        `| ${r.decision.replace(/ without .*/, '')} | ${r.decision.replace(/^\S+ without /, '')} | ${fmt(medianOfValues(r.ours.usPerRound), 2)} | ${fmt(medianOfValues(r.peer!.usPerRound), 2)} | ${fmt(saved, 2)} | ${fmt(medianOfValues(r.ratios), 2)}× |`,
      );
      costRows.push({
        script: r.script,
        decision: r.decision,
        us: medianOfValues(r.ours.usPerRound),
        saved,
        ours: r.ours,
        whole: r.peer,
      });
    }
    out();
    out(
      "### The loss guard (issue 32): each script that runs it, beside a copy of it with the guard taken out (alternating rounds, each slot's guard started before the round, as in a running system; the copies for measuring only)",
    );
    out();
    out('| decision | µs with the guard | µs without it | with ÷ without (min–max) |');
    out('| --- | ---: | ---: | ---: |');
    for (const r of guardRows) {
      out(
        `| ${r.decision} | ${fmt(medianOfValues(r.ours.usPerRound), 2)} | ${fmt(medianOfValues(r.peer!.usPerRound), 2)} | ${fmt(medianOfValues(r.ratios), 2)}× (${fmt(Math.min(...r.ratios), 2)}–${fmt(Math.max(...r.ratios), 2)}) |`,
      );
      costRows.push({
        script: r.script,
        decision: r.decision,
        us: medianOfValues(r.ours.usPerRound),
        withoutUs: medianOfValues(r.peer!.usPerRound),
        ratio: medianOfValues(r.ratios),
        ours: r.ours,
        without: r.peer,
        ratios: r.ratios,
      });
    }
    out();
    const guardRatio = (decision: string): number => {
      const r = guardRows.find((g) => g.decision === decision);
      if (r === undefined) throw new Error(`redis-cost: no loss guard row ${decision}`);
      return medianOfValues(r.ratios);
    };
    target('admit (admitted) with the loss guard ÷ without it', guardRatio('admit: admitted'), 1.05, true);
    target('claimSession with the loss guard ÷ without it', guardRatio('claimSession: claimed'), 1.05, true);
    const ratioOf = (script: string, peer: string, decision: RegExp): number => {
      const r = cost.rows.find((c) => c.script === script && c.peer?.name === peer && decision.test(c.decision));
      if (r === undefined) throw new Error(`redis-cost: no row of ${script} beside ${peer}`);
      return medianOfValues(r.ratios);
    };
    target(
      'fixed window, Redis µs per decision (key never used) ÷ rate-limiter-flexible',
      ratioOf('fixedWindow', 'rate-limiter-flexible', /never used/),
      1.0,
      true,
    );
    target(
      'GCRA, Redis µs per decision (key never used) ÷ rate-limiter-flexible',
      ratioOf('gcra', 'rate-limiter-flexible', /never used/),
      1.0,
      true,
    );
    target(
      "lease acquire + release, Redis µs per pair ÷ redlock's pair",
      ratioOf('acquireLease + releaseLease', 'redlock', /pair/),
      1.0,
      true,
    );
    results['redisCost'] = {
      pinned: cost.pinned,
      rounds: cost.rounds,
      decisions: cost.decisions,
      callers: cost.callers,
      rows: costRows,
      parts: partRows,
    };
  }

  // 1. Rate limiting ----------------------------------------------------------------------------
  if (wanted('limiters')) {
    out(`## Rate limiting (${fmt(KEYS)} distinct keys, median of ${RUNS} × ${SECONDS} s)`);
    out();
    out('| callers | limiter | ops/s | p50 ms | p99 ms | vs rate-limiter-flexible |');
    out('| ---: | --- | ---: | ---: | ---: | ---: |');
    const theirsRedis = client();
    const limiters: Record<string, (id: string) => Promise<unknown>> = {
      'ours: GCRA': (
        (l) => (id: string) =>
          l.check(id)
      )(ours.gcraLimiter({ name: 'gcra', intervalMs: 1, burst: 1000 })),
      'ours: fixed window': (
        (l) => (id: string) =>
          l.check(id)
      )(ours.fixedWindowLimiter({ name: 'fixed', limit: 1_000_000, windowMs: 60_000 })),
      'ours: sliding window': (
        (l) => (id: string) =>
          l.check(id)
      )(ours.slidingWindowLimiter({ name: 'sliding', limit: 1000, windowMs: 60_000 })),
      'rate-limiter-flexible': (
        (l) => (id: string) =>
          l.consume(id)
      )(new RateLimiterRedis({ storeClient: theirsRedis, keyPrefix: 'rlf', points: 1_000_000, duration: 60 })),
    };
    const limiterRows: Array<Record<string, unknown>> = [];
    const gcraScript = loadScripts().get('gcra')!;
    const gcraSha = (await ours.redis.script('LOAD', gcraScript.lua)) as string;
    // --quick (CI's smoke run): 50 callers only.
    for (const callers of quick ? [50] : [1, 50, 200]) {
      const samples: Record<string, Sample> = {};
      for (const [name, check] of Object.entries(limiters)) {
        samples[name] = await medianOf(RUNS, () =>
          measure(callers, SECONDS * 1000, (caller, i) => check(`u${(caller * 7919 + i * 104_729) % KEYS}`)),
        );
      }
      const limit = await redisBenchmark(server.port, callers, quick ? 50_000 : 200_000, [
        'EVALSHA',
        gcraSha,
        '1',
        'bench:rl:gcra:{__rand_int__}',
        '1',
        '1000',
      ]);
      const flexible = samples['rate-limiter-flexible']!;
      for (const [name, s] of Object.entries(samples)) {
        out(
          `| ${callers} | ${name} | ${fmt(s.opsPerSec)} | ${fmt(s.p50, 2)} | ${fmt(s.p99, 2)} | ${name === 'rate-limiter-flexible' ? '1.00×' : ratio(s.opsPerSec, flexible.opsPerSec)} |`,
        );
        limiterRows.push({ callers, limiter: name, ...s });
        if (callers >= 50 && name.startsWith('ours'))
          target(`${name} at ${callers} callers ≥ 1.5× rate-limiter-flexible`, s.opsPerSec / flexible.opsPerSec, 1.5);
      }
      out(
        `| ${callers} | limit: redis-benchmark, our GCRA by EVALSHA | ${fmt(limit.rps)} | ${fmt(limit.p50, 2)} | ${fmt(limit.p99, 2)} | ${ratio(limit.rps, flexible.opsPerSec)} |`,
      );
      limiterRows.push({
        callers,
        limiter: 'redis-benchmark GCRA EVALSHA',
        opsPerSec: limit.rps,
        p50: limit.p50,
        p99: limit.p99,
      });
    }
    results['limiters'] = limiterRows;
    theirsRedis.disconnect();
    out();
  }

  // 2. Locks ------------------------------------------------------------------------------------
  if (wanted('locks')) {
    const LOCK_CALLERS = 50;
    out(
      `## Locks: acquire + release pairs (${LOCK_CALLERS} callers, one resource each, median of ${RUNS} × ${SECONDS} s)`,
    );
    out();
    out('| lock | pairs/s | p50 ms | p99 ms | ours vs it |');
    out('| --- | ---: | ---: | ---: | ---: |');
    const redlockClient = client();
    const semaphoreClient = client();
    const redlock = new Redlock([redlockClient], { retryCount: 0 });
    const locks: Record<string, (caller: number) => Promise<unknown>> = {
      'ours: lease (fenced)': async (caller) => {
        const got = await ours.leases.acquire(`lock-${caller}`, { leaseMs: 10_000, maxLifetimeMs: 60_000 });
        if (got.acquired) await ours.leases.release(got.lease);
      },
      'redlock (1 instance)': async (caller) => {
        const lock = await redlock.acquire([`redlock-${caller}`], 10_000);
        await lock.release();
      },
      "redis-semaphore's Mutex": async (caller) => {
        const mutex = new Mutex(semaphoreClient, `mutex-${caller}`, {
          lockTimeout: 10_000,
          refreshInterval: 0,
          acquireAttemptsLimit: 1,
        });
        if (await mutex.tryAcquire()) await mutex.release();
      },
    };
    const lockSamples: Record<string, Sample> = {};
    for (const [name, pair] of Object.entries(locks))
      lockSamples[name] = await medianOf(RUNS, () => measure(LOCK_CALLERS, SECONDS * 1000, (caller) => pair(caller)));
    const oursLock = lockSamples['ours: lease (fenced)']!;
    for (const [name, s] of Object.entries(lockSamples)) {
      out(
        `| ${name} | ${fmt(s.opsPerSec)} | ${fmt(s.p50, 2)} | ${fmt(s.p99, 2)} | ${name.startsWith('ours') ? '–' : ratio(oursLock.opsPerSec, s.opsPerSec)} |`,
      );
      if (!name.startsWith('ours')) target(`lock pairs/s ≥ 1.5× ${name}`, oursLock.opsPerSec / s.opsPerSec, 1.5);
    }
    results['locks'] = lockSamples;
    redlockClient.disconnect();
    semaphoreClient.disconnect();
    out();
  }

  // 3. HTTP edge -------------------------------------------------------------------------------
  if (wanted('http')) {
    // --quick (CI's smoke run) keeps this section short: the headline variant only, a second a run and a
    // second a profile.
    const seconds = quick ? 1 : 6;
    const profileSeconds = quick ? 1 : 5;
    out(
      `## HTTP edge: the built API as deployed beside the same work done minimally (autocannon, ${CONNECTIONS_HTTP} connections, ${seconds} s per run, median of ${RUNS} pairs)`,
    );
    out();
    const edge = await benchHttpEdge({ runs: RUNS, seconds, profileSeconds, quick });
    out(
      `Each process on its own: \`node apps/api/dist/main.js\` with its defaults (LOG_LEVEL=${edge.logLevel}, logs to a pipe; ` +
        'the sweep, the metrics, load shedding and the capacity check on) on a real port of 127.0.0.1; the limit, a minimal ' +
        'Fastify + ioredis process doing the same work (one EVALSHA of the same script per request); the load generator ' +
        "a third process; one Redis of the section's own, emptied before each API variant. Ours and the limit alternate " +
        "(limit, ours, ...) after a warm-up; the ratio is the median of the pairs' ratios.",
    );
    out();
    out('| path | server | req/s | p99 ms | vs the limit (same pairs) | vs bare route | answers |');
    out('| --- | --- | ---: | ---: | ---: | ---: | --- |');
    // Every answer of a path should be of its status class, ours and the limit's alike: a route that
    // answers otherwise measures something else, and says so.
    const answers = (statuses: Record<string, number>, expect?: string): string =>
      Object.entries(statuses)
        .filter(([, n]) => n > 0)
        .map(([k, n]) => `${k}: ${fmt(n)}`)
        .join(', ') +
      (expect !== undefined && Object.entries(statuses).some(([k, n]) => k !== expect && n > 0)
        ? ` **(not all ${expect}: not comparable)**`
        : '');
    const bareRps = edge.bare.rps;
    out(
      `| – | bare Fastify route answering {} (limit process) | ${fmt(bareRps)} | ${fmt(edge.bare.p99, 1)} | – | 1.00× | ${answers(edge.bare.statuses)} |`,
    );
    for (const path of edge.paths) {
      for (const row of path.rows) {
        const label = row.headline ? `**${row.variant}**` : `secondary: ${row.variant}`;
        out(
          `| ${path.name} | ${label} | ${fmt(row.ours.rps)} | ${fmt(row.ours.p99, 1)} | ${ratio(row.ours.rps, row.limit.rps)} | ${ratio(row.ours.rps, bareRps)} | ${answers(row.ours.statuses, path.expect)} |`,
        );
        if (row.headline) {
          out(
            `| ${path.name} | limit: minimal Fastify + ioredis, one EVALSHA (its own process) | ${fmt(row.limit.rps)} | ${fmt(row.limit.p99, 1)} | 1.00× | ${ratio(row.limit.rps, bareRps)} | ${answers(row.limit.statuses, path.expect)} |`,
          );
          target(
            `${path.name}, main.js as deployed ≥ ${path.target}× the same work done minimally`,
            row.ratio,
            path.target,
          );
        }
      }
    }
    out();
    const { profile } = edge;
    out(
      `Where the difference goes: \`node --cpu-prof\` of main.js (defaults) and of the limit, each loaded ${profile.seconds} s on ${profile.paths.join(' then ')}; ` +
        `busy CPU per request answered (idle left out), each sample charged to the innermost library or application frame of its stack. ` +
        `main.js ${fmt(profile.ours.rps)} req/s under the profiler, ${fmt((profile.ours.breakdown.busyMs * 1000) / profile.ours.requests, 1)} µs of CPU per request; ` +
        `the limit ${fmt(profile.limit.rps)} req/s, ${fmt((profile.limit.breakdown.busyMs * 1000) / profile.limit.requests, 1)} µs.` +
        (profile.ours.breakdown.windowed && profile.limit.breakdown.windowed
          ? ''
          : ' (Whole profiles: the load window could not be applied.)'),
    );
    out();
    out('| where | main.js µs/request | limit µs/request | difference µs | share of main.js CPU |');
    out('| --- | ---: | ---: | ---: | ---: |');
    for (const row of profile.perRequest) {
      const share = profile.ours.breakdown.categories.find((c) => c.category === row.category)?.share ?? 0;
      if (row.oursUs < 0.05 && row.limitUs < 0.05) continue;
      out(
        `| ${row.category} | ${fmt(row.oursUs, 1)} | ${fmt(row.limitUs, 1)} | ${fmt(row.differenceUs, 1)} | ${fmt(share * 100, 1)}% |`,
      );
    }
    out();
    out('Top self time in main.js (not lifted to the calling library):');
    out();
    out('| function | where | share |');
    out('| --- | --- | ---: |');
    for (const f of profile.ours.breakdown.topFunctions.slice(0, 12))
      out(`| ${f.fn} | ${f.where || '–'} | ${fmt(f.share * 100, 1)}% |`);
    out();
    results['http'] = edge;
  }

  // 4. Pipeline ---------------------------------------------------------------------------------
  if (wanted('pipeline')) {
    const SESSIONS = quick ? 2000 : 10_000;
    const SLOTS = 50;
    out(`## Pipeline: sessions admitted → completed on one in-process worker host, ${SLOTS} slots (median of ${RUNS})`);
    out();
    const noop: SessionLauncher = {
      launch: () => ({
        exited: Promise.resolve({ exitCode: 0 }),
        leaseHolds: () => {},
        deadlineMoved: () => {},
        terminate: () => {},
        kill: () => {},
      }),
    };
    // One shard, as SPAWN_QUEUE_SHARDS defaults to; the bare run uses the same queue layout.
    const shardOf = (prefix: string) => spawnQueueShards(prefix, 1)[0]!;
    const completedAll = async (prefix: string, total: number, start: () => Promise<void>): Promise<number> => {
      const events = new QueueEvents(shardOf(prefix).name, {
        connection: new Redis(server.url, { maxRetriesPerRequest: null }),
        prefix: shardOf(prefix).prefix,
      });
      await events.waitUntilReady();
      let done = 0;
      const finished = new Promise<void>((resolve) =>
        events.on('completed', () => void (++done === total && resolve())),
      );
      const t0 = performance.now();
      await start();
      await finished;
      const seconds = (performance.now() - t0) / 1000;
      await events.close();
      return total / seconds;
    };
    /** Tokens for `count` users of `coordinator`, issued in batches. */
    const issueTokens = async (coordinator: Coordinator, count: number): Promise<string[]> => {
      const tokens: string[] = [];
      for (let i = 0; i < count; i += 500) {
        const batch = await Promise.all(
          Array.from({ length: Math.min(500, count - i) }, (_, j) => coordinator.tokens.issue(`p${i + j}`)),
        );
        for (const issued of batch) if (issued.outcome === 'issued') tokens.push(issued.token);
      }
      return tokens;
    };
    /** Sessions/s through our whole pipeline on one in-process worker host with `launcher` (default: the session runtime). */
    const oursPipeline = async (
      prefix: string,
      total: number,
      launcher: SessionLauncher | undefined,
      sessionCommand?: string,
    ): Promise<number> => {
      const coordinator = new Coordinator({
        redis: client(),
        keyPrefix: prefix,
        policy: { tokenLimit: 1_000_000, spawnIntervalMs: 1, spawnBurst: 1_000_000 },
      });
      const tokens = await issueTokens(coordinator, total);
      const queue = new Queue(shardOf(prefix).name, { connection: client(), prefix: shardOf(prefix).prefix });
      const env: Record<string, string> = {
        REDIS_URL: server.url,
        KEY_PREFIX: prefix,
        SLOTS: String(SLOTS),
        LOG_LEVEL: 'silent',
        WORKER_ID: `bench-${prefix}`,
        // The bench's Redis keeps nothing on disk (a throwaway).
        REDIS_ACCEPT_RISKS: 'no-persistence',
      };
      if (sessionCommand !== undefined) env['SESSION_COMMAND'] = sessionCommand;
      const host = new WorkerHost({
        config: loadWorkerConfig(env),
        logger: createLogger({ level: 'silent', name: 'bench' }),
        ...(launcher === undefined ? {} : { launcher }),
      });
      const rate = await completedAll(prefix, total, async () => {
        await host.start();
        let next = 0;
        await Promise.all(
          Array.from({ length: SLOTS }, async () => {
            while (next < tokens.length) {
              const token = tokens[next++]!;
              const admitted = await coordinator.sessions.admit(token);
              if (admitted.outcome !== 'admitted') throw new Error(`not admitted: ${admitted.outcome}`);
              await queue.add(
                SPAWN_JOB,
                { userId: admitted.userId, sessionId: admitted.sessionId, fence: admitted.fence },
                { ...spawnJobOptions, jobId: spawnJobId(admitted.userId, admitted.fence) },
              );
            }
          }),
        );
      });
      await host.stop();
      await queue.close();
      return rate;
    };
    /** Jobs/s through bare BullMQ: add → a job that runs `job` (the limit). */
    const barePipeline = async (prefix: string, total: number, job: () => Promise<unknown>): Promise<number> => {
      const bareQueue = new Queue(shardOf(prefix).name, { connection: client(), prefix: shardOf(prefix).prefix });
      let worker: Worker | undefined;
      const rate = await completedAll(prefix, total, async () => {
        worker = new Worker(shardOf(prefix).name, job, {
          connection: new Redis(server.url, { maxRetriesPerRequest: null }),
          prefix: shardOf(prefix).prefix,
          concurrency: SLOTS,
        });
        let next = 0;
        await Promise.all(
          Array.from({ length: SLOTS }, async () => {
            while (next < total) {
              const i = next++;
              await bareQueue.add(
                SPAWN_JOB,
                { userId: `p${i}`, sessionId: crypto.randomUUID(), fence: 1 },
                { ...spawnJobOptions, jobId: spawnJobId(`p${i}`, 1) },
              );
            }
          }),
        );
      });
      await worker?.close();
      await bareQueue.close();
      return rate;
    };
    const REAL_SESSIONS = quick ? 300 : 2000;
    const shExit = (): Promise<unknown> =>
      new Promise((resolve) =>
        spawn('/bin/sh', ['-c', 'exit 0'], { stdio: 'ignore', detached: true }).once('exit', resolve),
      );
    const pipelineRuns: Array<{ ours: number; bare: number; oursReal: number; bareReal: number }> = [];
    for (let run = 0; run < RUNS; run++) {
      pipelineRuns.push({
        ours: await oursPipeline(`pipe${run}`, SESSIONS, noop),
        bare: await barePipeline(`bare${run}`, SESSIONS, async () => ({})),
        oursReal: await oursPipeline(`real${run}`, REAL_SESSIONS, undefined, 'exit 0'),
        bareReal: await barePipeline(`barereal${run}`, REAL_SESSIONS, shExit),
      });
    }
    const median = (pick: (r: (typeof pipelineRuns)[number]) => number): (typeof pipelineRuns)[number] =>
      [...pipelineRuns].sort((a, b) => pick(a) - pick(b))[Math.floor(pipelineRuns.length / 2)]!;
    const pipe = median((r) => r.ours / r.bare);
    const real = median((r) => r.oursReal / r.bareReal);
    out('| pipeline | sessions/s | vs its limit |');
    out('| --- | ---: | ---: |');
    out(
      `| ours: token → admit → queue → claim → session process \`sh -c 'exit 0'\` (runtime) → finish, ${fmt(REAL_SESSIONS)} sessions | ${fmt(real.oursReal)} | ${ratio(real.oursReal, real.bareReal)} |`,
    );
    out(
      `| limit: bare BullMQ, add → a job that spawns \`sh -c 'exit 0'\` and waits for it | ${fmt(real.bareReal)} | 1.00× |`,
    );
    out(
      `| in-process launcher (no process started): token → admit → queue → claim → finish, ${fmt(SESSIONS)} sessions | ${fmt(pipe.ours)} | ${ratio(pipe.ours, pipe.bare)} |`,
    );
    out(`| limit: bare BullMQ, add → no-op job | ${fmt(pipe.bare)} | 1.00× |`);
    target(
      'pipeline with real session processes ≥ 80% of bare BullMQ spawning the same',
      real.oursReal / real.bareReal,
      0.8,
    );
    target('pipeline, in-process launcher ≥ 80% of bare BullMQ', pipe.ours / pipe.bare, 0.8);
    results['pipeline'] = {
      sessions: SESSIONS,
      realSessions: REAL_SESSIONS,
      slots: SLOTS,
      ...pipe,
      oursReal: real.oursReal,
      bareReal: real.bareReal,
      runs: pipelineRuns,
    };
    out();
  }

  // 4a. The admission's own cost, with and without the capacity check -------------------------------
  if (wanted('admission')) {
    out('## Admission: POST /v1/spawn → 202 on the built API (real HTTP), with the capacity check and without it');
    out();
    const admission = await benchAdmission(server.url, quick);
    const [checked, unchecked] = admission as [(typeof admission)[number], (typeof admission)[number]];
    out('| mode | scripts per spawn | 1 caller p50 ms | p99 ms | 50 callers spawns/s | vs without the check |');
    out('| --- | ---: | ---: | ---: | ---: | ---: |');
    for (const row of admission)
      out(
        `| ${row.mode} | ${fmt(row.scriptsPerSpawn, 2)} | ${fmt(row.p50, 2)} | ${fmt(row.p99, 2)} | ${fmt(row.perSecond)} | ${ratio(row.perSecond, unchecked.perSecond)} |`,
      );
    out();
    results['admission'] = admission;
    target(
      'admission with the capacity check, spawns/s ≥ 70% of without it',
      checked.perSecond / unchecked.perSecond,
      0.7,
    );
  }

  // 4b. Sessions on real processes ------------------------------------------------------------------
  if (wanted('sessions')) {
    out('## Sessions: spawn → session process started, on the built API and worker hosts (real HTTP, real processes)');
    out();
    const sessions = await benchSessions(server.url, quick);
    out('| path | callers | samples | p50 ms | p99 ms |');
    out('| --- | ---: | ---: | ---: | ---: |');
    for (const row of sessions.latency)
      out(`| ${row.case} | ${row.callers} | ${row.n} | ${fmt(row.p50, 1)} | ${fmt(row.p99, 1)} |`);
    out();
    for (const { mode, reason } of sessions.unavailable) out(`Not measured here: ${mode} (${reason}).`);
    if (sessions.unavailable.length > 0) out();
    if (sessions.cost.length > 0) {
      out('| what it adds | callers | percentile | with ms | without ms | added ms | with / without |');
      out('| --- | ---: | :---: | ---: | ---: | ---: | ---: |');
      for (const c of sessions.cost)
        out(
          `| ${c.what} | ${c.callers} | ${c.percentile} | ${fmt(c.on, 1)} | ${fmt(c.off, 1)} | ${fmt(c.added, 1)} | ${ratio(c.on, c.off)} |`,
        );
      out();
    }
    out('| what | ours | limit | vs limit |');
    out('| --- | ---: | ---: | ---: |');
    out(
      `| session starts per second, one host (${sessions.startsPerSecond.containment}), ${sessions.startsPerSecond.sessions} queued sessions (limit: child_process.spawn in a loop) | ${fmt(sessions.startsPerSecond.ours)} | ${fmt(sessions.startsPerSecond.bare)} | ${ratio(sessions.startsPerSecond.ours, sessions.startsPerSecond.bare)} |`,
    );
    out(
      `| host RSS per running session (host + runtime, ${sessions.rssPerSession.containment}, ${sessions.rssPerSession.sessions} sessions of \`exec sleep 600\`, sessions' own RSS left out) | ${fmt(sessions.rssPerSession.bytes / 2 ** 20, 2)} MiB | – | – |`,
    );
    // The targets are the deployed default's: containment on.
    const one = sessions.latency.find((r) => r.mode === 'namespace' && r.callers === 1);
    const many = sessions.latency.find((r) => r.mode === 'namespace' && r.callers > 1);
    if (one !== undefined && many !== undefined) {
      target('spawn → session started, containment on, one caller, p50 ms', one.p50, 10, true);
      target('spawn → session started, containment on, one caller, p99 ms', one.p99, 50, true);
      target('spawn → session started, containment on, 20 at once, p99 ms', many.p99, 150, true);
    }
    target('host RSS per running session, MiB', sessions.rssPerSession.bytes / 2 ** 20, 2, true);
    target('session starts per second per host', sessions.startsPerSecond.ours, 200);
    results['sessions'] = sessions;
    out();
  }

  // 4b'. What isolating a session costs (issue 44) --------------------------------------------------
  if (wanted('isolation')) {
    out('## Session isolation: spawn → session started with each way of keeping sessions apart, beside the limit');
    out();
    const isolation = await benchIsolation(server.url, quick);
    for (const line of isolationMarkdown(isolation)) out(line);
    for (const [name, value, most] of isolationTargets(isolation)) target(name, value, most, true);
    results['isolation'] = isolation;
  }

  // 4c. Session events ----------------------------------------------------------------------------
  if (wanted('events')) {
    out('## Session events: a state change in Redis → its SSE line at a client (real HTTP)');
    out();
    const latency = await benchEventLatency(server.url, quick);
    out('| path | readers | deliveries | p50 ms | p99 ms | Redis commands per event | p50 vs limit |');
    out('| --- | ---: | ---: | ---: | ---: | ---: | ---: |');
    for (const row of latency) {
      const limit = latency.find((r) => r.case.startsWith('limit') && r.readers === row.readers)!;
      out(
        `| ${row.case} | ${row.readers} | ${row.n} | ${fmt(row.p50, 2)} | ${fmt(row.p99, 2)} | ${fmt(row.commandsPerEvent, 1)} | ${ratio(limit.p50, row.p50)} |`,
      );
    }
    out();
    const scriptCost = await benchEventScripts(server.url, quick);
    out(
      '| script (in process, 50 callers, EVALSHA) | ops/s with events | ops/s without (emitEvent a no-op) | with / without |',
    );
    out('| --- | ---: | ---: | ---: |');
    for (const row of scriptCost)
      out(
        `| ${row.script} | ${fmt(row.withEvents)} | ${fmt(row.withoutEvents)} | ${ratio(row.withEvents, row.withoutEvents)} |`,
      );
    out();
    results['events'] = { latency, scriptCost };
  }

  // 4d. Session output followed live ---------------------------------------------------------------
  if (wanted('output')) {
    out('## Session output: a line printed by a session → its SSE event at a reader (real HTTP)');
    out();
    const output = await benchOutput(server.url, quick);
    out(
      `One session printing a line every 100 ms (containment: ${output.containment}); the API and the worker host with their defaults.`,
    );
    out();
    out(
      '| path | readers | lines | deliveries | missing | p50 ms | p99 ms | max ms | p50 ours ÷ limit | p99 ours ÷ limit |',
    );
    out('| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |');
    for (const row of output.latency) {
      const limit = output.latency.find((r) => r.case.startsWith('limit') && r.readers === row.readers)!;
      out(
        `| ${row.case} | ${row.readers} | ${row.lines} | ${row.n} | ${row.missing} | ${fmt(row.p50, 2)} | ${fmt(row.p99, 2)} | ${fmt(row.max, 2)} | ${ratio(row.p50, limit.p50)} | ${ratio(row.p99, limit.p99)} |`,
      );
    }
    out();
    const oneReader = output.commands.find((r) => r.readers === 1)!;
    out(
      `Redis commands per second, whole system (API, host, session printing), counted over ${fmt(oneReader.seconds, 1)} s per row, API sweep slowed (SWEEP_INTERVAL_MS=${output.commandsApiEnv['SWEEP_INTERVAL_MS']}):`,
    );
    out();
    out('| readers | Redis commands/s | vs 1 reader | p50 ms | p99 ms |');
    out('| ---: | ---: | ---: | ---: | ---: |');
    for (const row of output.commands)
      out(
        `| ${row.readers} | ${fmt(row.commandsPerSecond)} | ${ratio(row.commandsPerSecond, oneReader.commandsPerSecond)} | ${row.p50 === undefined ? '–' : fmt(row.p50, 2)} | ${row.p99 === undefined ? '–' : fmt(row.p99, 2)} |`,
      );
    out();
    const followedByOne = output.latency.find((r) => r.case.startsWith('ours') && r.readers === 1)!;
    const manyReaders = output.commands.find((r) => r.readers === 100)!;
    target('session line → SSE reader, one reader, p50 ms', followedByOne.p50, 5, true);
    target(
      'Redis commands/s with 100 readers of one session ÷ with 1 (no more: ≤ 1.1)',
      manyReaders.commandsPerSecond / oneReader.commandsPerSecond,
      1.1,
      true,
    );
    results['output'] = output;
  }

  // 4d'. A session flooding its output, beside its neighbours -------------------------------------------
  if (wanted('output-flood')) {
    out('## Session output: what a flooding session costs its neighbours on the same host');
    out();
    const flood = await benchOutputFlood(server.url, quick);
    out(
      `One session writes ${fmt(flood.floodBytes / 1e6)} MB of short lines as fast as its pipe takes them (containment: ${flood.containment}); a neighbour prints a line every 100 ms.`,
    );
    out();
    out('| measure | quiet | during the flood |');
    out('| --- | ---: | ---: |');
    out(`| spawn → session running, ms | ${fmt(flood.spawnQuietMs, 1)} | ${fmt(flood.spawnDuringFloodMs, 1)} |`);
    out(
      `| neighbour line print → Redis, p50 / p99 / max ms (${flood.neighbour.lines} lines) | – | ${fmt(flood.neighbour.p50)} / ${fmt(flood.neighbour.p99)} / ${fmt(flood.neighbour.max)} |`,
    );
    out();
    results['outputFlood'] = flood;
  }

  // 4e. Webhooks ------------------------------------------------------------------------------------
  if (wanted('webhooks')) {
    out('## Webhooks: a session event → its webhook POST at a receiver on 127.0.0.1 (real HTTP)');
    out();
    const hooks = await benchWebhooks(server.url, quick);
    out(
      `${hooks.sessions} sessions per row, one spawned every ${hooks.everyMs} ms, four events each (containment: ${hooks.containment}); ` +
        'the API with its defaults and WEBHOOK_ALLOW_PRIVATE=true, one worker host. Latency from the moment the benchmark saw ' +
        'the event on GET /v1/events to its receipt; ours and the limit run side by side over the same events.',
    );
    out();
    out(
      "| path | webhooks | events | deliveries | missing | duplicates | p50 ms | p99 ms | max ms | p50 ours ÷ limit | p99 ours ÷ limit | p50 / p99 ms from the event's `at` |",
    );
    out('| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |');
    for (const row of hooks.rows) {
      const limit = hooks.rows.find((r) => r.case.startsWith('limit') && r.webhooks === row.webhooks)!;
      out(
        `| ${row.case} | ${row.webhooks} | ${row.events} | ${row.n} | ${row.missing} | ${row.duplicates} | ${fmt(row.p50, 2)} | ${fmt(row.p99, 2)} | ${fmt(row.max, 2)} | ${ratio(row.p50, limit.p50)} | ${ratio(row.p99, limit.p99)} | ${fmt(row.p50FromAt, 1)} / ${fmt(row.p99FromAt, 1)} |`,
      );
    }
    out();
    results['webhooks'] = hooks;
  }

  // 4f. What each part costs Redis ----------------------------------------------------------------
  if (wanted('costs')) {
    const costs = await benchCosts(quick);
    out('## What each part of a deployment costs Redis (INFO commandstats)');
    out();
    out(
      `The built API and worker host with their defaults but SWEEP_INTERVAL_MS=${costs.sweepIntervalMs}, on a Redis of the section's own; ` +
        `each figure is the difference between two windows of ${costs.windowMs / 1000} s (${costs.windowMs / costs.sweepIntervalMs} whole sweep interval(s) each), one part ` +
        'added between them. Commands are all Redis ran, those inside scripts included; script calls are the EVALSHAs among them.',
    );
    out();
    out('| part | commands | of which script calls | per | bytes held | what |');
    out('| --- | ---: | ---: | --- | ---: | --- |');
    for (const row of costs.rows)
      out(
        `| ${row.part} | ${fmt(row.commands, 1)} | ${fmt(row.scripts, 1)} | ${row.per} | ${row.bytes === undefined ? '–' : fmt(row.bytes)} | ${row.note} |`,
      );
    out();
    results['costs'] = costs;
  }

  // 4f'. Keeping sessions running: Redis per session, and a stop's way to the session -------------
  if (wanted('keepalive')) {
    const keep = await benchKeepaliveCost(quick);
    out(
      '## Keeping sessions running: Redis commands per second per session, beside BullMQ keeping as many jobs locked',
    );
    out();
    out(
      `The built API and one worker host with the contract's defaults (LEASE_MS ${keep.leaseMs}), sessions that sleep; ` +
        `INFO commandstats over ${keep.windowMs / 1000} s windows (script calls and every command inside them). ` +
        'Per session: the difference from the window with none, divided by the sessions. BullMQ: one Worker with that ' +
        'concurrency holding as many active jobs, its defaults (lockDuration 30 s, locks extended every 15 s), on a Redis of its own, ' +
        `over ${keep.bullWindowMs / 1000} s windows.`,
    );
    out();
    out(
      '| running sessions | ours: commands/s | ours: per session | BullMQ: commands/s | BullMQ: per active job | ours / BullMQ per item |',
    );
    out('| ---: | ---: | ---: | ---: | ---: | ---: |');
    for (const row of keep.rows)
      out(
        `| ${fmt(row.sessions)} | ${fmt(row.commandsPerSecond, 1)} | ${row.perSession === undefined ? '–' : fmt(row.perSession, 3)} | ${fmt(row.bullmqPerSecond, 1)} | ${row.bullmqPerJob === undefined ? '–' : fmt(row.bullmqPerJob, 3)} | ${row.perSession === undefined || !(row.bullmqPerJob! > 0) ? '–' : ratio(row.perSession, row.bullmqPerJob!)} |`,
      );
    out();
    for (const row of keep.rows)
      if (row.perSessionByCommand !== undefined)
        out(
          `Per session with ${fmt(row.sessions)} running, command by command: ` +
            row.perSessionByCommand.map(([command, n]) => `${command} ${fmt(n, 3)}`).join(', ') +
            '.',
        );
    out();
    const stopAt = (q: number): number =>
      keep.stopMs[Math.min(keep.stopMs.length - 1, Math.floor(q * keep.stopMs.length))]!;
    out(
      `DELETE → SIGTERM in the session (its own clock), ${keep.stopMs.length} stops spread over a renewal period: ` +
        `p50 ${fmt(stopAt(0.5), 1)} ms, p99 ${fmt(stopAt(0.99), 1)} ms, max ${fmt(keep.stopMs.at(-1)!, 1)} ms.`,
    );
    out();
    for (const row of keep.rows)
      if (row.perSession !== undefined)
        target(`keeping ${row.sessions} sessions running: commands/s per session ≤ 0.5`, row.perSession, 0.5, true);
    target('DELETE → SIGTERM p99 ≤ 20 ms', stopAt(0.99), 20, true);
    results['keepalive'] = keep;
  }

  // 4g. The session list: a page's cost, whatever the number of sessions ------------------------
  if (wanted('session-list')) {
    const list = await benchSessionList(quick);
    out('## The session list: Redis per page of 100 (GET /v1/sessions), and per dashboard refresh');
    out();
    out(
      "Live sessions admitted for real (tokens and admissions, one in ten labelled), on a Redis of the section's own; " +
        'each figure after CONFIG RESETSTAT: every command Redis ran (inside scripts included) and the µs of the ' +
        "top-level ones. In-process (the coordinator's list, the Redis work GET /v1/sessions does). The dashboard " +
        "before: every slot's live index and recent endings (2 × 16,384 commands), then 50 sessions; after: a page of 50 " +
        "of the list (its recent endings come from the process's event ring); both with the hosts and the capacity.",
    );
    out();
    out(
      '| live sessions | first page: commands / µs | middle page: commands / µs | label filter (1 in 10): commands / µs (found) | dashboard before: commands / µs | dashboard after: commands / µs |',
    );
    out('| ---: | ---: | ---: | ---: | ---: | ---: |');
    for (const r of list.rows)
      out(
        `| ${fmt(r.sessions)} | ${fmt(r.firstPage.commands)} / ${fmt(r.firstPage.us)} | ${fmt(r.middlePage.commands)} / ${fmt(r.middlePage.us)} | ${fmt(r.filteredPage.commands)} / ${fmt(r.filteredPage.us)} (${r.filteredPage.found}) | ${fmt(r.dashboardBefore.commands)} / ${fmt(r.dashboardBefore.us)} | ${fmt(r.dashboardAfter.commands)} / ${fmt(r.dashboardAfter.us)} |`,
      );
    out();
    const first = list.rows[0]!;
    const last = list.rows[list.rows.length - 1]!;
    target(
      `list page of 100: Redis µs with ${fmt(last.sessions)} live sessions ÷ with ${fmt(first.sessions)} (in proportion to the page, not the sessions)`,
      last.firstPage.us / first.firstPage.us,
      2,
      true,
    );
    results['sessionList'] = list;
  }

  // 4h. Pools: one pool or twenty, and one pool's load beside another's -----------------------------
  if (wanted('pools')) {
    const pools = await benchPools(server.url, quick);
    const med = (values: number[]): number => medianOfValues(values);
    out('## Pools: Redis per decision with 1 pool and with 20, and one pool beside another that is saturated');
    out();
    out(
      `Redis µs per decision (EVALSHA's usec ÷ decisions, INFO commandstats), ${pools.rounds} rounds × ${fmt(pools.decisions)} decisions alternating ` +
        'one pool (every token and host of `default`) and twenty (tokens round-robin over 20 pools, a host in each); medians.',
    );
    out();
    out('| decision | 1 pool, µs | 20 pools, µs | 20 ÷ 1 |');
    out('| --- | ---: | ---: | ---: |');
    for (const row of pools.cost)
      out(
        `| ${row.decision} | ${fmt(med(row.onePool), 2)} | ${fmt(med(row.twentyPools), 2)} | ${fmt(med(row.twentyPools) / med(row.onePool), 2)}× |`,
      );
    out();
    const { alone, besideSaturated, queuedInA } = pools.independence;
    out(
      `Pool b's POST /v1/spawn → session started (the built API and two hosts, real processes, one spawn at a time), ` +
        `first alone, then with pool a's one host busy and ${fmt(queuedInA)} of its sessions queued (CAPACITY_CHECK=false):`,
    );
    out();
    out('| pool b | p50 ms | p99 ms | n |');
    out('| --- | ---: | ---: | ---: |');
    out(`| pool a idle | ${fmt(alone.p50, 1)} | ${fmt(alone.p99, 1)} | ${alone.n} |`);
    out(
      `| pool a saturated | ${fmt(besideSaturated.p50, 1)} | ${fmt(besideSaturated.p99, 1)} | ${besideSaturated.n} |`,
    );
    out();
    const admit = pools.cost.find((r) => r.decision.startsWith('admit'))!;
    const claim = pools.cost.find((r) => r.decision.startsWith('claimSession'))!;
    target(
      'admit, Redis µs with 20 pools ÷ with 1 (within 10%)',
      med(admit.twentyPools) / med(admit.onePool),
      1.1,
      true,
    );
    target(
      'claimSession, Redis µs with 20 pools ÷ with 1 (within 10%)',
      med(claim.twentyPools) / med(claim.onePool),
      1.1,
      true,
    );
    target("pool b's spawn → start p50 beside a saturated pool a ÷ alone", besideSaturated.p50 / alone.p50, 1.25, true);
    results['pools'] = pools;
  }

  // 5. Memory and growth ------------------------------------------------------------------------
  if (wanted('memory')) {
    out('## Memory and growth');
    out();
    const mem = new Coordinator({ redis: client(), keyPrefix: 'mem', policy: { spawnIntervalMs: 10_000 } });
    const issued = await mem.tokens.issue('memory-user', { metadata: { durationMs: 5000 } });
    if (issued.outcome !== 'issued') throw new Error('not issued');
    const tokenKey = mem.tokens.keyOf({
      userId: 'memory-user',
      digest: (await import('@cq/coordinator')).parseToken(issued.token)!.digest,
    });
    const usage = async (key: string): Promise<number> =>
      Number((await mem.redis.call('MEMORY', 'USAGE', key, 'SAMPLES', '0')) ?? 0);
    const tokenBytes = await usage(tokenKey);
    await mem.gcraLimiter({ name: 'm', intervalMs: 10_000 }).check('memory-user');
    const limiterBytes = await usage(mem.keys.limiter('m', 'memory-user'));
    const admitted = await mem.sessions.admit(issued.token);
    if (admitted.outcome !== 'admitted') throw new Error('not admitted');
    await mem.claims.claim(admitted, { workerId: 'm', leaseMs: 60_000, graceMs: 1000 });
    const userKeys = mem.keys.user('memory-user');
    const sessionBytes =
      (await usage(userKeys.session)) + (await usage(userKeys.lease)) + (await usage(userKeys.fence));
    const throttleBytes = await usage(userKeys.spawnThrottle);
    out('| what | bytes (MEMORY USAGE) |');
    out('| --- | ---: |');
    out(`| one spawn token (digest key with metadata) | ${tokenBytes} |`);
    out(`| one GCRA limiter key | ${limiterBytes} |`);
    out(`| one live session (session hash + lease + fence counter) | ${sessionBytes} |`);
    out(`| the user's spawn throttle | ${throttleBytes} |`);
    out();
    const GROW = quick ? 100_000 : 1_000_000;
    const growth: Record<string, Sample> = {};
    for (const users of [1000, GROW]) {
      await mem.redis.flushall();
      const limiter = mem.gcraLimiter({ name: 'grow', intervalMs: 1, burst: 1000 });
      for (let i = 0; i < users; i += 10_000) {
        const pipeline = mem.redis.pipeline();
        for (let j = i; j < Math.min(users, i + 10_000); j++)
          pipeline.set(mem.keys.limiter('grow', `g${j}`), '0', 'PX', 3_600_000);
        await pipeline.exec();
      }
      growth[users] = await medianOf(RUNS, () =>
        measure(50, SECONDS * 1000, (caller, i) => limiter.check(`g${(caller * 7919 + i * 104_729) % users}`)),
      );
    }
    out(`| GCRA checks, 50 callers | ops/s | p99 ms |`);
    out('| --- | ---: | ---: |');
    for (const [users, s] of Object.entries(growth))
      out(`| with ${fmt(Number(users))} users' keys present | ${fmt(s.opsPerSec)} | ${fmt(s.p99, 2)} |`);
    target(
      `limiter ops/s with ${fmt(GROW)} users ≥ 90% of that with 1,000`,
      growth[GROW]!.opsPerSec / growth[1000]!.opsPerSec,
      0.9,
    );
    results['memory'] = { tokenBytes, limiterBytes, sessionBytes, throttleBytes, growth };
    out();
  }

  // 6. Replication: the cost of REDIS_WAIT_REPLICAS ---------------------------------------------
  if (wanted('replication')) {
    out(
      `## Replication: REDIS_WAIT_REPLICAS=0 vs 1, token issue (a coordinator write), one local replica (median of ${RUNS} × ${SECONDS} s)`,
    );
    out();
    await client().flushall();
    await client().config('SET', 'repl-diskless-sync-delay', '0');
    const replica = await startRedisServer({ args: ['--replicaof', '127.0.0.1', String(server.port)] });
    try {
      const master = client();
      // A real write acknowledged proves the replica is in sync (WAIT without one answers at once).
      for (let tries = 0; ; tries++) {
        await master.set('bench:probe', '1');
        if ((await master.wait(1, 100)) === 1) break;
        if (tries > 100) throw new Error('the replica did not sync');
      }
      const policy = { tokenLimit: 1_000_000, tokenWindowMs: 1000 };
      const writers = {
        'REDIS_WAIT_REPLICAS=0': new Coordinator({ redis: client(), keyPrefix: 'wait0', policy }),
        'REDIS_WAIT_REPLICAS=1': new Coordinator({
          redis: client(),
          keyPrefix: 'wait1',
          policy,
          replicaWait: { replicas: 1, timeoutMs: 100 },
        }),
      };
      out('| callers | setting | ops/s | p50 ms | p99 ms | vs no WAIT |');
      out('| ---: | --- | ---: | ---: | ---: | ---: |');
      const waitRows: Array<Record<string, unknown>> = [];
      for (const callers of [1, 50]) {
        const samples: Record<string, Sample> = {};
        for (const [name, c] of Object.entries(writers)) {
          await c.preload();
          samples[name] = await medianOf(RUNS, () =>
            measure(callers, SECONDS * 1000, (caller, i) => c.tokens.issue(`w${(caller * 7919 + i * 104_729) % KEYS}`)),
          );
        }
        const base = samples['REDIS_WAIT_REPLICAS=0']!;
        for (const [name, sample] of Object.entries(samples)) {
          out(
            `| ${callers} | ${name} | ${fmt(sample.opsPerSec)} | ${fmt(sample.p50, 2)} | ${fmt(sample.p99, 2)} | ${ratio(sample.opsPerSec, base.opsPerSec)} |`,
          );
          waitRows.push({ callers, setting: name, ...sample });
        }
      }
      results['replicaWait'] = waitRows;
    } finally {
      await replica.stop();
    }
    out();
  }

  out('## Targets');
  out();
  out('| target | measured | met |');
  out('| --- | ---: | :---: |');
  for (const t of targets)
    out(`| ${t.name} | ${t.value.toFixed(2)} (target ${t.atMost ? '≤' : '≥'} ${t.target}) | ${t.met ? 'yes' : 'no'} |`);
  results['targets'] = targets;
  out();
  out(
    `machine: ${String((results['machine'] as Record<string, unknown>)['cpu'])}, ${cpus().length} cores, Node ${process.version}, Redis ${String((results['machine'] as Record<string, unknown>)['redis'])}${quick ? ' (quick run: 1 run each, shorter; not for comparison)' : ''}`,
  );
  writeFileSync('bench-results.json', `${JSON.stringify(results, null, 2)}\n`);
  out('wrote bench-results.json');
} catch (err) {
  process.stderr.write(`bench failed: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
  process.exitCode = 1;
} finally {
  await server.stop();
  // Clients of the finished suites may still hold sockets; the run is over.
  process.exit(process.exitCode ?? 0);
}
