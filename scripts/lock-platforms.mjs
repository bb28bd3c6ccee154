#!/usr/bin/env node
// The npm registry mirror this project is built against serves only the Linux builds of packages that
// ship one binary package per platform (turbo's @turbo/<os>-<cpu>). npm then leaves the others out of
// package-lock.json, and `npm ci` refuses a lock file that misses an optional dependency. This adds the
// missing platform entries (optional, for their own os/cpu, so npm never fetches them elsewhere).
// Run it after `npm install` changes the lock file.
import { readFileSync, writeFileSync } from 'node:fs';

const path = new URL('../package-lock.json', import.meta.url);
const lock = JSON.parse(readFileSync(path, 'utf8'));
const platforms = {
  'darwin-64': ['darwin', 'x64'],
  'darwin-arm64': ['darwin', 'arm64'],
  'windows-64': ['win32', 'x64'],
  'windows-arm64': ['win32', 'arm64'],
};
const turbo = lock.packages['node_modules/turbo'];
let added = 0;
for (const [name, version] of Object.entries(turbo?.optionalDependencies ?? {})) {
  const key = `node_modules/${name}`;
  const platform = platforms[name.replace('@turbo/', '')];
  if (lock.packages[key] !== undefined || platform === undefined) continue;
  lock.packages[key] = { version, cpu: [platform[1]], dev: true, license: 'MIT', optional: true, os: [platform[0]] };
  added++;
}
lock.packages = Object.fromEntries(Object.entries(lock.packages).sort(([a], [b]) => a.localeCompare(b, 'en')));
writeFileSync(path, `${JSON.stringify(lock, null, 2)}\n`);
console.log(`lock-platforms: added ${added} platform entries`);
