#!/usr/bin/env node
// The `cq` command: a committed shim (so npm links it before the first build) around the built CLI.
import { main } from '../dist/main.js';

// A reader that stopped reading (`cq logs ann | head -1`) is not a failure: end at once, a follow stream
// with us, printing nothing and exiting 0, as `head` expects of the program before it.
process.stdout.on('error', (err) => {
  if (err.code !== 'EPIPE') throw err;
  process.exit(0);
});

process.exitCode = await main(process.argv.slice(2));
