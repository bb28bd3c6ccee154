// The admission section of npm run bench: The admission's own cost, with and without the capacity check.
import { type Bench, fmt, ratio } from '../bench.js';
import { benchAdmission } from '../sessions.js';

export async function benchAdmissionSection(bench: Bench): Promise<void> {
  const { quick, server, out, target, results } = bench;
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
