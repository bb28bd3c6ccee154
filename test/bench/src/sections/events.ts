// The events section of npm run bench: Session events.
import { type Bench, fmt, ratio } from '../bench.js';
import { benchEventLatency, benchEventScripts } from '../events.js';

export async function benchEventsSection(bench: Bench): Promise<void> {
  const { quick, server, out, results } = bench;
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
