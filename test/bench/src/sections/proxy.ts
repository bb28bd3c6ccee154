// The proxy section of npm run bench: the session proxy (issue 46) beside a direct connection and
// beside configurable-http-proxy.
import { type Bench, fmt, ratio } from '../bench.js';
import { benchProxy } from '../proxy.js';

export async function benchProxySection(bench: Bench): Promise<void> {
  const { quick, server, out, target, results } = bench;
  const proxy = await benchProxy(server.url, quick);
  out(
    '## The session proxy: client → API → host → session, beside a direct connection and beside configurable-http-proxy',
  );
  out();
  out(
    `The built API and worker hosts with their defaults and PROXY_SECRET; the session server is test/support/proxy-session.mjs ` +
      `in each case. Requests/s: autocannon (its own process), ${fmt(50)} connections, GET of 1 KiB answers, ` +
      `${proxy.seconds} s per run, ${proxy.rounds} round(s) alternating the paths, medians. Download: one GET of 100 MB read to its ` +
      'end (median of 3). WebSocket: round trips of a small message, one at a time.',
  );
  out();
  out('| path | req/s | p50 ms | p99 ms | vs CHP req/s | download MB/s | WS round trip p50 / p99 ms |');
  out('| --- | ---: | ---: | ---: | ---: | ---: | ---: |');
  const chp = proxy.rows.find((r) => r.path.startsWith('configurable-http-proxy'))!;
  const direct = proxy.rows.find((r) => r.path.startsWith('limit'))!;
  for (const row of proxy.rows)
    out(
      `| ${row.path} | ${fmt(row.rps)} | ${fmt(row.p50, 1)} | ${fmt(row.p99, 1)} | ${ratio(row.rps, chp.rps)} | ${fmt(row.downloadMBps)} | ${fmt(row.wsRtt.p50, 2)} / ${fmt(row.wsRtt.p99, 2)} |`,
    );
  out();
  out(
    'Where the time goes: CPU µs per request answered, by serving process (/proc, around the last run of each path).',
  );
  out();
  out('| path | CPU µs per request, by process | in all |');
  out('| --- | --- | ---: |');
  for (const row of proxy.rows) {
    const parts = Object.entries(row.cpuPerRequestUs);
    out(
      `| ${row.path} | ${parts.map(([role, us]) => `${role} ${fmt(us, 1)}`).join(', ')} | ${fmt(
        parts.reduce((n, [, us]) => n + us, 0),
        1,
      )} |`,
    );
  }
  out();
  const ours = proxy.rows.find((r) => r.path.startsWith('ours: client'))!;
  target('session proxy req/s (1 KiB, 50 connections) ÷ configurable-http-proxy’s', ours.rps / chp.rps, 1.5);
  target('session proxy p99 ms ÷ configurable-http-proxy’s (no worse: ≤ 1)', ours.p99 / chp.p99, 1, true);
  target('session proxy 100 MB download, MB/s', ours.downloadMBps, 500);
  target('session proxy WebSocket round trip p50, ms over direct', ours.wsRtt.p50 - direct.wsRtt.p50, 1, true);
  results['proxy'] = proxy;
}
