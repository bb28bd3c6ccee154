// npm run bench [-- --quick] [--only <section>,...]: our coordinator side by side with the libraries a
// user would pick instead, on one redis-server of our own, in one run. Prints Markdown; writes
// bench-results.json (with --only, of those sections alone). Each section lives in sections/<name>.ts.
import { writeFileSync } from 'node:fs';
import { cpus, totalmem } from 'node:os';
import { createBench, type Bench } from './bench.js';
import { benchRedis } from './redis.js';
import { benchAdmissionSection } from './sections/admission.js';
import { benchCostsSection } from './sections/costs.js';
import { benchEventsSection } from './sections/events.js';
import { benchHttpSection } from './sections/http.js';
import { benchIsolationSection } from './sections/isolation.js';
import { benchKeepaliveSection } from './sections/keepalive.js';
import { benchLimitersSection } from './sections/limiters.js';
import { benchLocksSection } from './sections/locks.js';
import { benchMemorySection } from './sections/memory.js';
import { benchOutputFloodSection } from './sections/output-flood.js';
import { benchOutputSection } from './sections/output.js';
import { benchPipelineSection } from './sections/pipeline.js';
import { benchPoolsSection } from './sections/pools.js';
import { benchProxySection } from './sections/proxy.js';
import { benchExecSection } from './sections/exec.js';
import { benchRedisCostSection } from './sections/redis-cost.js';
import { benchReplicationSection } from './sections/replication.js';
import { benchSessionListSection } from './sections/session-list.js';
import { benchSessionsSection } from './sections/sessions.js';
import { benchWebhooksSection } from './sections/webhooks.js';

/** The sections, in the order they run; `--only <name>[,<name>...]` (or `--only=...`) runs those alone. */
const SECTIONS: ReadonlyArray<readonly [string, (bench: Bench) => Promise<void>]> = [
  ['redis-cost', benchRedisCostSection],
  ['limiters', benchLimitersSection],
  ['locks', benchLocksSection],
  ['http', benchHttpSection],
  ['pipeline', benchPipelineSection],
  ['admission', benchAdmissionSection],
  ['sessions', benchSessionsSection],
  ['isolation', benchIsolationSection],
  ['events', benchEventsSection],
  ['output', benchOutputSection],
  ['output-flood', benchOutputFloodSection],
  ['webhooks', benchWebhooksSection],
  ['costs', benchCostsSection],
  ['keepalive', benchKeepaliveSection],
  ['session-list', benchSessionListSection],
  ['pools', benchPoolsSection],
  ['proxy', benchProxySection],
  ['exec', benchExecSection],
  ['memory', benchMemorySection],
  ['replication', benchReplicationSection],
];
const names = SECTIONS.map(([name]) => name);

const quick = process.argv.includes('--quick');
const onlyArg = process.argv.find((a, i) => a.startsWith('--only=') || process.argv[i - 1] === '--only');
const only = onlyArg === undefined ? undefined : onlyArg.replace(/^--only=/, '').split(',');
const unknownSections = (only ?? []).filter((name) => !names.includes(name));
if (unknownSections.length > 0 || (only !== undefined && only.length === 0)) {
  process.stderr.write(`unknown section ${unknownSections.join(', ')}: --only takes some of ${names.join(', ')}\n`);
  process.exit(2);
}

const server = await benchRedis();
const bench = createBench({ quick, server });
const { out, results } = bench;
const machine: Record<string, unknown> = {
  cpu: cpus()[0]?.model,
  cores: cpus().length,
  memoryGiB: Math.round(totalmem() / 2 ** 30),
  node: process.version,
};
Object.assign(results, { machine, quick, runs: bench.runs, ...(only === undefined ? {} : { only }) });

try {
  const probe = bench.client();
  machine['redis'] = /redis_version:(\S+)/.exec(await probe.info('server'))?.[1];
  probe.disconnect();

  for (const [name, section] of SECTIONS) {
    if (only !== undefined && !only.includes(name)) continue;
    const startedAt = performance.now();
    await section(bench);
    // What each section takes (on stderr, beside the Markdown): where a run's time goes, CI's smoke run included.
    process.stderr.write(`bench: ${name} took ${((performance.now() - startedAt) / 1000).toFixed(1)} s\n`);
  }

  out('## Targets');
  out();
  out('| target | measured | met |');
  out('| --- | ---: | :---: |');
  for (const t of bench.targets)
    out(`| ${t.name} | ${t.value.toFixed(2)} (target ${t.atMost ? '≤' : '≥'} ${t.target}) | ${t.met ? 'yes' : 'no'} |`);
  results['targets'] = bench.targets;
  out();
  out(
    `machine: ${String(machine['cpu'])}, ${cpus().length} cores, Node ${process.version}, Redis ${String(machine['redis'])}${quick ? ' (quick run: 1 run each, shorter; not for comparison)' : ''}`,
  );
  writeFileSync('bench-results.json', `${JSON.stringify(results, null, 2)}\n`);
  out('wrote bench-results.json');
} catch (err) {
  process.stderr.write(`bench failed: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
  process.exitCode = 1;
} finally {
  await server.stop();
  // Clients of the finished suites may still hold sockets; the run is over.
  process.exit(process.exitCode ?? 0);
}
