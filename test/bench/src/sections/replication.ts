// The replication section of npm run bench: Replication: the cost of REDIS_WAIT_REPLICAS.
import { Coordinator } from '@cq/coordinator';
import { startRedisServer } from '@cq/test-harness';
import { type Bench, KEYS, fmt, ratio } from '../bench.js';
import { measure, medianOf, type Sample } from '../measure.js';

export async function benchReplicationSection(bench: Bench): Promise<void> {
  const { runs: RUNS, seconds: SECONDS, server, client, out, results } = bench;
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
