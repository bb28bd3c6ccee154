// The http section of npm run bench: HTTP edge.
import { type Bench, CONNECTIONS_HTTP, fmt, ratio } from '../bench.js';
import { benchHttpEdge } from '../http-edge.js';

export async function benchHttpSection(bench: Bench): Promise<void> {
  const { quick, runs: RUNS, out, target, results } = bench;
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
