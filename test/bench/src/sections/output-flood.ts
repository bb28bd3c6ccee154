// The output-flood section of npm run bench: A session flooding its output, beside its neighbours.
import { type Bench, fmt } from '../bench.js';
import { benchOutputFlood } from '../output-flood.js';

export async function benchOutputFloodSection(bench: Bench): Promise<void> {
  const { quick, server, out, results } = bench;
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
