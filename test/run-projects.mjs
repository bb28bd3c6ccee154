#!/usr/bin/env node
// `npm test` of the system tests: the standalone and the cluster project in two vitest processes at once.
// Each runs its files one at a time against Redis of its own (a redis-server, a 3+3 cluster), so the two
// never share a Redis, a port or a user's sessions (see sessionPids); side by side they use the two cores
// that one process, mostly waiting on real time (leases, retries, restarts), leaves idle. Each writes
// test-results/<project>.json, which scripts/test-summary.mjs adds up. Arguments go to both processes.
import { spawn } from 'node:child_process';
import { mkdirSync, readdirSync, rmSync } from 'node:fs';
import { createInterface } from 'node:readline';

const projects = ['standalone', 'cluster'];
const results = new URL('test-results/', import.meta.url).pathname;
mkdirSync(results, { recursive: true });
// Reports of an earlier run would be counted again.
for (const file of readdirSync(results)) if (file.endsWith('.json')) rmSync(`${results}${file}`);

const running = [];
const children = projects.map((project) => {
  const child = spawn('npx', ['vitest', 'run', '--project', project, ...process.argv.slice(2)], {
    cwd: new URL('.', import.meta.url).pathname,
    env: { ...process.env, CQ_TEST_REPORT: `test-results/${project}.json` },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
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
