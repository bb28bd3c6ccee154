// The costs section of npm run bench: What each part costs Redis.
import { type Bench, fmt } from '../bench.js';
import { benchCosts } from '../costs.js';

export async function benchCostsSection(bench: Bench): Promise<void> {
  const { quick, out, results } = bench;
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
