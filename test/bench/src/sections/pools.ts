// The pools section of npm run bench: Pools: one pool or twenty, and one pool's load beside another's.
import { type Bench, fmt } from '../bench.js';
import { benchPools } from '../pools.js';
import { medianOf as medianOfValues } from '../redis-cost.js';

export async function benchPoolsSection(bench: Bench): Promise<void> {
  const { quick, server, out, target, results } = bench;
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
  out(`| pool a saturated | ${fmt(besideSaturated.p50, 1)} | ${fmt(besideSaturated.p99, 1)} | ${besideSaturated.n} |`);
  out();
  const admit = pools.cost.find((r) => r.decision.startsWith('admit'))!;
  const claim = pools.cost.find((r) => r.decision.startsWith('claimSession'))!;
  target('admit, Redis µs with 20 pools ÷ with 1 (within 10%)', med(admit.twentyPools) / med(admit.onePool), 1.1, true);
  target(
    'claimSession, Redis µs with 20 pools ÷ with 1 (within 10%)',
    med(claim.twentyPools) / med(claim.onePool),
    1.1,
    true,
  );
  target("pool b's spawn → start p50 beside a saturated pool a ÷ alone", besideSaturated.p50 / alone.p50, 1.25, true);
  results['pools'] = pools;
}
