#!/usr/bin/env node
// A session for output tests (SESSION_COMMAND="node test/support/output-session.mjs"): it prints
// `lines` lines, one every `intervalMs`, alternately on stdout ("out <n>") and stderr ("err <n>"),
// then "done" on stdout, and exits 0. SESSION_METADATA: lines (default 10), intervalMs (default 100).
const metadata = JSON.parse(process.env.SESSION_METADATA ?? '{}');
const lines = metadata.lines ?? 10;
const intervalMs = metadata.intervalMs ?? 100;
let n = 0;
const print = () => {
  if (n === lines) {
    process.stdout.write('done\n', () => process.exit(0));
    return;
  }
  if (n % 2 === 0) process.stdout.write(`out ${n}\n`);
  else process.stderr.write(`err ${n}\n`);
  n++;
  setTimeout(print, intervalMs);
};
print();
