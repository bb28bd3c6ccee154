// The output section of npm run bench: Session output followed live.
import { type Bench, fmt, ratio } from '../bench.js';
import { benchOutput } from '../output.js';

export async function benchOutputSection(bench: Bench): Promise<void> {
  const { quick, server, out, target, results } = bench;
  out('## Session output: a line printed by a session → its SSE event at a reader (real HTTP)');
  out();
  const output = await benchOutput(server.url, quick);
  out(
    `One session printing a line every 100 ms (containment: ${output.containment}); the API and the worker host with their defaults.`,
  );
  out();
  out(
    '| path | readers | lines | deliveries | missing | p50 ms | p99 ms | max ms | p50 ours ÷ limit | p99 ours ÷ limit |',
  );
  out('| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |');
  for (const row of output.latency) {
    const limit = output.latency.find((r) => r.case.startsWith('limit') && r.readers === row.readers)!;
    out(
      `| ${row.case} | ${row.readers} | ${row.lines} | ${row.n} | ${row.missing} | ${fmt(row.p50, 2)} | ${fmt(row.p99, 2)} | ${fmt(row.max, 2)} | ${ratio(row.p50, limit.p50)} | ${ratio(row.p99, limit.p99)} |`,
    );
  }
  out();
  const oneReader = output.commands.find((r) => r.readers === 1)!;
  out(
    `Redis commands per second, whole system (API, host, session printing), counted over ${fmt(oneReader.seconds, 1)} s per row, API sweep slowed (SWEEP_INTERVAL_MS=${output.commandsApiEnv['SWEEP_INTERVAL_MS']}):`,
  );
  out();
  out('| readers | Redis commands/s | vs 1 reader | p50 ms | p99 ms |');
  out('| ---: | ---: | ---: | ---: | ---: |');
  for (const row of output.commands)
    out(
      `| ${row.readers} | ${fmt(row.commandsPerSecond)} | ${ratio(row.commandsPerSecond, oneReader.commandsPerSecond)} | ${row.p50 === undefined ? '–' : fmt(row.p50, 2)} | ${row.p99 === undefined ? '–' : fmt(row.p99, 2)} |`,
    );
  out();
  const followedByOne = output.latency.find((r) => r.case.startsWith('ours') && r.readers === 1)!;
  const manyReaders = output.commands.find((r) => r.readers === 100)!;
  target('session line → SSE reader, one reader, p50 ms', followedByOne.p50, 5, true);
  target(
    'Redis commands/s with 100 readers of one session ÷ with 1 (no more: ≤ 1.1)',
    manyReaders.commandsPerSecond / oneReader.commandsPerSecond,
    1.1,
    true,
  );
  results['output'] = output;
}
