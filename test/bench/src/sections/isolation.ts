// The isolation section of npm run bench: What isolating a session costs (issue 44).
import { type Bench } from '../bench.js';
import { benchIsolation, isolationMarkdown, isolationTargets } from '../session-isolation.js';

export async function benchIsolationSection(bench: Bench): Promise<void> {
  const { quick, server, out, target, results } = bench;
  out('## Session isolation: spawn → session started with each way of keeping sessions apart, beside the limit');
  out();
  const isolation = await benchIsolation(server.url, quick);
  for (const line of isolationMarkdown(isolation)) out(line);
  for (const [name, value, most] of isolationTargets(isolation)) target(name, value, most, true);
  results['isolation'] = isolation;
}
