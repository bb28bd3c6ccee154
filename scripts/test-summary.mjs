#!/usr/bin/env node
// Adds up the JSON reports every workspace's vitest run wrote to test-results/vitest.json and prints one
// plain closing line, "N passed, N failed, N skipped", so CI can read the whole run's count.
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';

const root = new URL('..', import.meta.url).pathname;
const { workspaces } = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8'));
const dirs = workspaces.flatMap((pattern) =>
  pattern.endsWith('/*')
    ? !existsSync(join(root, pattern.slice(0, -2)))
      ? []
      : readdirSync(join(root, pattern.slice(0, -2)), { withFileTypes: true })
          .filter((d) => d.isDirectory())
          .map((d) => join(pattern.slice(0, -2), d.name))
    : [pattern],
);
const firstLines = (text = '') => text.split('\n').slice(0, 6).join('\n    ').slice(0, 1200);
let passed = 0;
let failed = 0;
let skipped = 0;
for (const dir of dirs) {
  const results = join(root, dir, 'test-results');
  if (!existsSync(results)) continue;
  // One report per vitest run: vitest.json, or one per project where they run side by side.
  for (const report of readdirSync(results).filter((f) => f.endsWith('.json')))
    count(
      dir,
      report === 'vitest.json' ? dir : `${dir} (${report.slice(0, -5)})`,
      JSON.parse(readFileSync(join(results, report), 'utf8')),
    );
}

function count(dir, label, json) {
  passed += json.numPassedTests;
  failed += json.numFailedTests;
  // A file that could not even load fails as a suite without a failed test: count it as a failure.
  const unloaded = json.testResults.filter(
    (file) => file.status === 'failed' && file.assertionResults.length === 0,
  ).length;
  failed += unloaded;
  skipped += json.numPendingTests + json.numTodoTests;
  // Name what failed, with the first lines of its message, so a CI log that keeps only its tail still says why.
  for (const file of json.testResults.filter((f) => f.status === 'failed')) {
    const name = file.name.slice(file.name.indexOf(dir));
    const failures = file.assertionResults.filter((t) => t.status === 'failed');
    if (failures.length === 0) console.log(`  FAILED TO LOAD ${name}: ${firstLines(file.message)}`);
    for (const test of failures)
      console.log(`  FAILED ${name} > ${test.fullName}: ${firstLines(test.failureMessages.join('\n'))}`);
  }
  console.log(
    `${label}: ${json.numPassedTests} passed, ${json.numFailedTests + unloaded} failed${unloaded > 0 ? ` (${unloaded} files did not load)` : ''}`,
  );
}
console.log(`${passed} passed, ${failed} failed, ${skipped} skipped`);
process.exit(failed > 0 || passed === 0 ? 1 : 0);
