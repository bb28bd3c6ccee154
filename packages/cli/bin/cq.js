#!/usr/bin/env node
// The `cq` command: a committed shim (so npm links it before the first build) around the built CLI.
import { main } from '../dist/main.js';

process.exitCode = await main(process.argv.slice(2));
