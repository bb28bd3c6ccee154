#!/usr/bin/env node
// Starts the whole system for a newcomer: Redis (REDIS_URL when set, else a local redis-server on a
// free port with its data in .data/redis), the API and two worker hosts, whichever of them are built.
// Ctrl-C stops everything cleanly.
import { spawn, spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { join } from 'node:path';
import { once } from 'node:events';
import { setTimeout as sleep } from 'node:timers/promises';

const root = new URL('..', import.meta.url).pathname;
const children = [];
let stopping = false;

function log(line) {
  process.stdout.write(`[up] ${line}\n`);
}

/** `preferred` when nothing listens on it at `host`, else a free port the system picks. */
async function freePort(preferred = 0, host = '127.0.0.1') {
  const server = createServer();
  const listening = once(server, 'listening').then(() => true);
  const failed = once(server, 'error').then(() => false);
  server.listen(preferred, host);
  if (!(await Promise.race([listening, failed]))) return freePort(0, host);
  const { port } = server.address();
  server.close();
  await once(server, 'close');
  return port;
}

/** The development service key: kept in .data/dev-api-key (readable by this user only) across restarts. */
function devApiKey() {
  const file = join(root, '.data', 'dev-api-key');
  if (existsSync(file)) {
    const kept = readFileSync(file, 'utf8').trim();
    if (kept.length >= 16) return kept;
  }
  const key = `dev-${randomBytes(18).toString('base64url')}`;
  mkdirSync(join(root, '.data'), { recursive: true });
  writeFileSync(file, `${key}\n`, { mode: 0o600 });
  return key;
}

function haveRedisServer() {
  return spawnSync('redis-server', ['--version'], { stdio: 'ignore' }).status === 0;
}

function installRedisServer() {
  if (haveRedisServer()) return true;
  const isRoot = process.getuid?.() === 0;
  if (isRoot && spawnSync('apt-get', ['--version'], { stdio: 'ignore' }).status === 0) {
    log('redis-server is missing: installing Debian package redis-server');
    spawnSync('apt-get', ['update', '-qq'], { stdio: 'inherit' });
    spawnSync('apt-get', ['install', '-y', '-qq', 'redis-server'], {
      stdio: 'inherit',
      env: { ...process.env, DEBIAN_FRONTEND: 'noninteractive' },
    });
  }
  return haveRedisServer();
}

function start(name, command, args, env, options = {}) {
  const child = spawn(command, args, {
    cwd: root,
    env: { ...process.env, ...env },
    stdio: ['ignore', 'inherit', 'inherit'],
    ...options,
  });
  child.on('exit', (code, signal) => {
    if (!stopping) {
      log(`${name} exited (${code ?? signal}); stopping everything`);
      void shutdown(1);
    }
  });
  children.push({ name, child });
  return child;
}

async function startRedis() {
  if (process.env.REDIS_URL) {
    log(`using REDIS_URL=${process.env.REDIS_URL.replace(/\/\/[^@]*@/, '//***@')}`);
    return process.env.REDIS_URL;
  }
  if (!installRedisServer()) {
    console.error(
      'redis-server not found: install it (Debian/Ubuntu: sudo apt-get install redis-server; macOS: brew install redis) or set REDIS_URL',
    );
    process.exit(1);
  }
  const dir = join(root, '.data', 'redis');
  mkdirSync(dir, { recursive: true });
  const port = await freePort();
  const child = start(
    'redis-server',
    'redis-server',
    [
      '--port',
      String(port),
      '--bind',
      '127.0.0.1',
      '--dir',
      dir,
      '--appendonly',
      'yes',
      '--appendfsync',
      'everysec',
      '--save',
      '',
      '--maxmemory-policy',
      'noeviction',
      '--logfile',
      join(dir, 'redis.log'),
      // A process group of its own: Ctrl-C reaches the API and the workers, and Redis is stopped last.
    ],
    {},
    { detached: true },
  );
  const url = `redis://127.0.0.1:${port}`;
  for (let i = 0; i < 100; i++) {
    if (spawnSync('redis-cli', ['-p', String(port), 'ping'], { encoding: 'utf8' }).stdout?.trim() === 'PONG') {
      log(`redis-server ${url} (data in .data/redis, pid ${child.pid})`);
      return url;
    }
    await sleep(100);
  }
  throw new Error('redis-server did not answer PING within 10 s; see .data/redis/redis.log');
}

async function shutdown(code) {
  if (stopping) return;
  stopping = true;
  log('stopping');
  // Apps first, Redis last, so the apps can record their sessions' end.
  for (const group of [
    children.filter((c) => c.name !== 'redis-server'),
    children.filter((c) => c.name === 'redis-server'),
  ]) {
    await Promise.all(
      group.map(async ({ child }) => {
        if (child.exitCode !== null || child.signalCode !== null) return;
        const exited = once(child, 'exit');
        child.kill('SIGTERM');
        const timer = setTimeout(() => child.kill('SIGKILL'), 15_000);
        await exited;
        clearTimeout(timer);
      }),
    );
  }
  process.exit(code);
}

process.on('SIGINT', () => void shutdown(0));
process.on('SIGTERM', () => void shutdown(0));

const redisUrl = await startRedis();
const apiKey = process.env.API_KEYS?.split(',')[0] || devApiKey();
const apiKeys = process.env.API_KEYS || apiKey;
const host = process.env.HOST ?? '127.0.0.1';
// 3000, the CLI's default URL, unless something listens there already.
const port = process.env.PORT ?? String(await freePort(3000, host));
const common = { REDIS_URL: redisUrl, KEY_PREFIX: process.env.KEY_PREFIX ?? 'cq' };
const api = join(root, 'apps/api/dist/main.js');
const worker = join(root, 'apps/worker/dist/main.js');
if (existsSync(worker)) {
  for (const n of [1, 2])
    start(`worker-${n}`, process.execPath, [worker], { ...common, WORKER_ID: `local-worker-${n}` });
}
if (existsSync(api)) {
  start('api', process.execPath, [api], { ...common, API_KEYS: apiKeys, HOST: host, PORT: port });
  const base = `http://${host}:${port}`;
  for (let i = 0; ; i++) {
    try {
      if ((await fetch(`${base}/readyz`)).ok) break;
    } catch {
      // not listening yet
    }
    if (i > 150) throw new Error('the API did not become ready within 30 s');
    await sleep(200);
  }
  log(`API        ${base}`);
  log(`API key    ${apiKey}${process.env.API_KEYS ? '' : '  (kept in .data/dev-api-key)'}`);
  log(`dashboard  ${base}/dashboard  (any user name, the API key as password)`);
  log(`try        ${port === '3000' ? '' : `CQ_API_URL=${base} `}CQ_API_KEY=${apiKey} npx cq demo`);
  log(
    `or         curl -s -X POST ${base}/v1/tokens -H 'authorization: Bearer ${apiKey}' -H 'content-type: application/json' -d '{"userId":"alice"}'`,
  );
} else {
  log('the API is not built yet: only Redis is running');
}
log('Ctrl-C stops everything');
