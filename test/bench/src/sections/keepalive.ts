// The keepalive section of npm run bench: Keeping sessions running: Redis per session, and a stop's way to the session.
import { type Bench, fmt, ratio } from '../bench.js';
import { benchKeepaliveCost } from '../keepalive-cost.js';

export async function benchKeepaliveSection(bench: Bench): Promise<void> {
  const { quick, out, target, results } = bench;
  const keep = await benchKeepaliveCost(quick);
  out('## Keeping sessions running: Redis commands per second per session, beside BullMQ keeping as many jobs locked');
  out();
  out(
    `The built API and one worker host with the contract's defaults (LEASE_MS ${keep.leaseMs}), sessions that sleep; ` +
      `INFO commandstats over ${keep.windowMs / 1000} s windows (script calls and every command inside them). ` +
      'Per session: the difference from the window with none, divided by the sessions. BullMQ: one Worker with that ' +
      'concurrency holding as many active jobs, its defaults (lockDuration 30 s, locks extended every 15 s), on a Redis of its own, ' +
      `over ${keep.bullWindowMs / 1000} s windows.`,
  );
  out();
  out(
    '| running sessions | ours: commands/s | ours: per session | BullMQ: commands/s | BullMQ: per active job | ours / BullMQ per item |',
  );
  out('| ---: | ---: | ---: | ---: | ---: | ---: |');
  for (const row of keep.rows)
    out(
      `| ${fmt(row.sessions)} | ${fmt(row.commandsPerSecond, 1)} | ${row.perSession === undefined ? '–' : fmt(row.perSession, 3)} | ${fmt(row.bullmqPerSecond, 1)} | ${row.bullmqPerJob === undefined ? '–' : fmt(row.bullmqPerJob, 3)} | ${row.perSession === undefined || !(row.bullmqPerJob! > 0) ? '–' : ratio(row.perSession, row.bullmqPerJob!)} |`,
    );
  out();
  for (const row of keep.rows)
    if (row.perSessionByCommand !== undefined)
      out(
        `Per session with ${fmt(row.sessions)} running, command by command: ` +
          row.perSessionByCommand.map(([command, n]) => `${command} ${fmt(n, 3)}`).join(', ') +
          '.',
      );
  out();
  const stopAt = (q: number): number =>
    keep.stopMs[Math.min(keep.stopMs.length - 1, Math.floor(q * keep.stopMs.length))]!;
  out(
    `DELETE → SIGTERM in the session (its own clock), ${keep.stopMs.length} stops spread over a renewal period: ` +
      `p50 ${fmt(stopAt(0.5), 1)} ms, p99 ${fmt(stopAt(0.99), 1)} ms, max ${fmt(keep.stopMs.at(-1)!, 1)} ms.`,
  );
  out();
  for (const row of keep.rows)
    if (row.perSession !== undefined)
      target(`keeping ${row.sessions} sessions running: commands/s per session ≤ 0.5`, row.perSession, 0.5, true);
  target('DELETE → SIGTERM p99 ≤ 20 ms', stopAt(0.99), 20, true);
  results['keepalive'] = keep;
}
