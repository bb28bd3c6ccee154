// The webhooks section of npm run bench: Webhooks.
import { type Bench, fmt, ratio } from '../bench.js';
import { benchWebhooks } from '../webhooks.js';

export async function benchWebhooksSection(bench: Bench): Promise<void> {
  const { quick, server, out, results } = bench;
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
