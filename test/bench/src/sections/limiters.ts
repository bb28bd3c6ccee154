// The limiters section of npm run bench: Rate limiting.
import { Coordinator, loadScripts } from '@cq/coordinator';
import { RateLimiterRedis } from 'rate-limiter-flexible';
import { type Bench, KEYS, fmt, ratio } from '../bench.js';
import { measure, medianOf, type Sample } from '../measure.js';
import { redisBenchmark } from '../redis.js';

export async function benchLimitersSection(bench: Bench): Promise<void> {
  const { quick, runs: RUNS, seconds: SECONDS, server, client, out, target, results } = bench;
  // The coordinator this section measures.
  const ours = new Coordinator({ redis: client(), keyPrefix: 'bench' });
  await ours.preload();
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
