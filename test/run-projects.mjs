#!/usr/bin/env node
// `npm test` of the system tests: two vitest processes at once, one running the standalone project, the
// other the cluster project and then standalone-2 (a few standalone files, so that both take about as
// long). Each runs its files one at a time against Redis of its own (redis-servers, a 3+3 cluster), so
// the two never share a Redis, a port or a user's sessions (see sessionPids); side by side they use the
// two cores that one process, mostly waiting on real time (leases, retries, restarts), leaves idle. Each
// writes test-results/<name>.json, which scripts/test-summary.mjs adds up. Arguments go to both.
import { spawn } from 'node:child_process';
import { mkdirSync, readdirSync, rmSync } from 'node:fs';
import { createInterface } from 'node:readline';

// Each process: its projects, one after the other (vitest.config.ts's groupOrder), and its report's name.
const processes = [
  { name: 'standalone', projects: ['standalone'] },
  { name: 'cluster', projects: ['cluster', 'standalone-2'] },
];
const results = new URL('test-results/', import.meta.url).pathname;
mkdirSync(results, { recursive: true });
// Reports of an earlier run would be counted again.
for (const file of readdirSync(results)) if (file.endsWith('.json')) rmSync(`${results}${file}`);

const running = [];
const children = processes.map(({ name: project, projects }) => {
  const child = spawn(
    'npx',
    ['vitest', 'run', ...projects.flatMap((p) => ['--project', p]), ...process.argv.slice(2)],
    {
      cwd: new URL('.', import.meta.url).pathname,
      env: { ...process.env, CQ_TEST_REPORT: `test-results/${project}.json` },
      stdio: ['ignore', 'pipe', 'pipe'],
    },
  );
  running.push(child);
  // Lines of the two runs interleave: each is marked with its project.
  for (const [stream, out] of [
    [child.stdout, process.stdout],
    [child.stderr, process.stderr],
  ])
    createInterface({ input: stream }).on('line', (line) => out.write(`[${project}] ${line}\n`));
  return new Promise((resolve) =>
    child.on('close', (code, signal) => {
      if (code !== 0) console.error(`[${project}] vitest ended with ${signal ?? `exit code ${code}`}`);
      resolve(code ?? 1);
    }),
  );
});
// Stopped: both runs are stopped too (their global teardown stops their Redis).
for (const signal of ['SIGINT', 'SIGTERM']) process.on(signal, () => running.forEach((c) => c.kill(signal)));
const codes = await Promise.all(children);
process.exit(codes.find((code) => code !== 0) ?? 0);
