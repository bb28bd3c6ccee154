// The sessions section of npm run bench: Sessions on real processes.
import { type Bench, fmt, ratio } from '../bench.js';
import { benchSessions } from '../sessions.js';

export async function benchSessionsSection(bench: Bench): Promise<void> {
  const { quick, server, out, target, results } = bench;
  out('## Sessions: spawn → session process started, on the built API and worker hosts (real HTTP, real processes)');
  out();
  const sessions = await benchSessions(server.url, quick);
  out('| path | callers | samples | p50 ms | p99 ms |');
  out('| --- | ---: | ---: | ---: | ---: |');
  for (const row of sessions.latency)
    out(`| ${row.case} | ${row.callers} | ${row.n} | ${fmt(row.p50, 1)} | ${fmt(row.p99, 1)} |`);
  out();
  for (const { mode, reason } of sessions.unavailable) out(`Not measured here: ${mode} (${reason}).`);
  if (sessions.unavailable.length > 0) out();
  if (sessions.cost.length > 0) {
    out('| what it adds | callers | percentile | with ms | without ms | added ms | with / without |');
    out('| --- | ---: | :---: | ---: | ---: | ---: | ---: |');
    for (const c of sessions.cost)
      out(
        `| ${c.what} | ${c.callers} | ${c.percentile} | ${fmt(c.on, 1)} | ${fmt(c.off, 1)} | ${fmt(c.added, 1)} | ${ratio(c.on, c.off)} |`,
      );
    out();
  }
  out('| what | ours | limit | vs limit |');
  out('| --- | ---: | ---: | ---: |');
  out(
    `| session starts per second, one host (${sessions.startsPerSecond.containment}), ${sessions.startsPerSecond.sessions} queued sessions (limit: child_process.spawn in a loop) | ${fmt(sessions.startsPerSecond.ours)} | ${fmt(sessions.startsPerSecond.bare)} | ${ratio(sessions.startsPerSecond.ours, sessions.startsPerSecond.bare)} |`,
  );
  out(
    `| host RSS per running session (host + runtime, ${sessions.rssPerSession.containment}, ${sessions.rssPerSession.sessions} sessions of \`exec sleep 600\`, sessions' own RSS left out) | ${fmt(sessions.rssPerSession.bytes / 2 ** 20, 2)} MiB | – | – |`,
  );
  // The targets are the deployed default's: containment on.
  const one = sessions.latency.find((r) => r.mode === 'namespace' && r.callers === 1);
  const many = sessions.latency.find((r) => r.mode === 'namespace' && r.callers > 1);
  if (one !== undefined && many !== undefined) {
    target('spawn → session started, containment on, one caller, p50 ms', one.p50, 10, true);
    target('spawn → session started, containment on, one caller, p99 ms', one.p99, 50, true);
    target('spawn → session started, containment on, 20 at once, p99 ms', many.p99, 150, true);
  }
  target('host RSS per running session, MiB', sessions.rssPerSession.bytes / 2 ** 20, 2, true);
  target('session starts per second per host', sessions.startsPerSecond.ours, 200);
  results['sessions'] = sessions;
  out();
}
