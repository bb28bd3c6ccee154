#!/usr/bin/env node
// Starts the whole system for a newcomer: Redis (REDIS_URL when set, else a local redis-server on a
// free port with its data in .data/redis), the API and two worker hosts, whichever of them are built.
// Each process's log (request logs, session output) goes to .data/logs/<name>.log; the terminal shows
// only their warnings and errors, and the banner, whose URL and key are also written to .data/up.env.
// A worker host that drains and exits 0 is started again; any other exit stops everything. Ctrl-C
// stops everything cleanly.
// Safe by default: the local Redis asks for a password of its own (.data/redis-password), and, run as
// root, the hosts run sessions as `nobody` (SESSION_USER) with SESSION_NETWORK at its default (`auto`).
import { spawn, spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import {
  chmodSync,
  closeSync,
  createWriteStream,
  existsSync,
  mkdirSync,
  openSync,
  readFileSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import { createServer } from 'node:net';
import { userInfo } from 'node:os';
import { join } from 'node:path';
import { once } from 'node:events';
import { createInterface } from 'node:readline';
import { setTimeout as sleep } from 'node:timers/promises';

// Ctrl-C on `./scripts/up.sh | tee up.log` ends tee as well: what this writes after that fails with
// EPIPE, which must not end it before it has stopped everything (Node ignores SIGPIPE itself).
for (const stream of [process.stdout, process.stderr]) stream.on('error', () => {});

const root = new URL('..', import.meta.url).pathname;
/** Secrets, Redis's data and the logs: readable by this user only. */
const dataDir = join(root, '.data');
const logDir = join(dataDir, 'logs');
/** The banner's URL and key, as `NAME=value` lines a shell can export. */
const envFile = join(dataDir, 'up.env');
const children = [];
let stopping = false;
/** Awaited once stopping: shutdown() ends the process. */
const never = new Promise(() => {});

function log(line) {
  process.stdout.write(`[up] ${line}\n`);
}

/** pino's levels from warn up, by number. */
const loudLevels = { 40: 'warn', 50: 'error', 60: 'fatal' };

/**
 * Every line of `stream` goes to `file`; the terminal gets a pino line from warn up (as `[name] warn:
 * message`) and, from stderr, any line that is not a pino line (a crash's stack, the session runtime's
 * own messages).
 */
function route(name, stream, file, fromStderr) {
  const lines = createInterface({ input: stream, crlfDelay: Infinity });
  lines.on('line', (line) => {
    file.write(`${line}\n`);
    let entry;
    try {
      entry = JSON.parse(line);
    } catch {
      entry = undefined;
    }
    if (entry !== null && typeof entry === 'object' && typeof entry.level === 'number') {
      const level = loudLevels[entry.level];
      if (level !== undefined) {
        const why = entry.err?.message ? ` (${entry.err.message})` : '';
        process.stderr.write(`[${name}] ${level}: ${entry.msg ?? ''}${why}\n`);
      }
    } else if (fromStderr && line.trim() !== '') {
      process.stderr.write(`[${name}] ${line}\n`);
    }
  });
  return once(lines, 'close');
}

/** `preferred` when nothing listens on it at `host`, else a free port the system picks. */
async function freePort(preferred = 0, host = '127.0.0.1') {
  const server = createServer();
  // (Not events.once for 'listening': it rejects on the 'error' that a port in use gives.)
  const listening = new Promise((resolve) => {
    server.once('listening', () => resolve(true));
    server.once('error', () => resolve(false));
  });
  server.listen(preferred, host);
  if (!(await listening)) return freePort(0, host);
  const { port } = server.address();
  server.close();
  await once(server, 'close');
  return port;
}

/**
 * A secret kept in .data/<name> across restarts, readable by this user only (mode 0600, also for a
 * file kept from before): the kept one when `valid` accepts it, else a new one from `make`.
 */
function keptSecret(name, valid, make) {
  const file = join(dataDir, name);
  if (existsSync(file)) {
    const kept = readFileSync(file, 'utf8').trim();
    if (valid(kept)) {
      chmodSync(file, 0o600);
      return kept;
    }
  }
  const secret = make();
  writeFileSync(file, `${secret}\n`, { mode: 0o600 });
  chmodSync(file, 0o600);
  return secret;
}

/** The development service key, kept in .data/dev-api-key. */
function devApiKey() {
  return keptSecret(
    'dev-api-key',
    (kept) => kept.length >= 16,
    () => `dev-${randomBytes(18).toString('base64url')}`,
  );
}

/** The local redis-server's password (32 hex digits), kept in .data/redis-password. */
function redisPassword() {
  return keptSecret(
    'redis-password',
    // As it goes into a URL and a configuration line unquoted.
    (kept) => /^[A-Za-z0-9_-]{16,}$/.test(kept),
    () => randomBytes(16).toString('hex'),
  );
}

/**
 * The session proxy's shared secret (PROXY_SECRET when set, else 64 hex digits kept in
 * .data/proxy-secret): the API and the hosts forward to sessions' ports with it (`cq open <user>`).
 */
function proxySecret() {
  if (process.env.PROXY_SECRET) return process.env.PROXY_SECRET;
  return keptSecret(
    'proxy-secret',
    (kept) => kept.length >= 32,
    () => randomBytes(32).toString('hex'),
  );
}

/**
 * What the hosts get for running sessions as another user. SESSION_USER when set (empty: as the hosts'
 * own user) is passed on as it is; else, run as root, `nobody`, where the system has that user and
 * util-linux's setpriv (which the hosts change user with); else nothing (sessions run as the user who
 * started this).
 */
function sessionUserEnv() {
  if (process.getuid?.() !== 0 || process.env.SESSION_USER !== undefined) return {};
  const nobody = spawnSync('getent', ['passwd', 'nobody'], { stdio: 'ignore' }).status === 0;
  if (!nobody || spawnSync('setpriv', ['--version'], { stdio: 'ignore' }).status !== 0) {
    log("warning: sessions run as root (no user nobody or no util-linux's setpriv here; set SESSION_USER)");
    return {};
  }
  return { SESSION_USER: 'nobody' };
}

function haveRedisServer() {
  return spawnSync('redis-server', ['--version'], { stdio: 'ignore' }).status === 0;
}

function installRedisServer() {
  if (haveRedisServer()) return true;
  const isRoot = process.getuid?.() === 0;
  if (isRoot && spawnSync('apt-get', ['--version'], { stdio: 'ignore' }).status === 0) {
    // apt's own output goes to a log of its own: the terminal keeps the banner, warnings and errors.
    mkdirSync(logDir, { recursive: true, mode: 0o700 });
    const aptLog = join(logDir, 'install.log');
    log(`redis-server is missing: installing Debian package redis-server (apt's output: .data/logs/install.log)`);
    const fd = openSync(aptLog, 'a', 0o600);
    try {
      const env = { ...process.env, DEBIAN_FRONTEND: 'noninteractive' };
      spawnSync('apt-get', ['update', '-qq'], { stdio: ['ignore', fd, fd], env });
      spawnSync('apt-get', ['install', '-y', '-qq', 'redis-server'], { stdio: ['ignore', fd, fd], env });
    } finally {
      closeSync(fd);
    }
    if (!haveRedisServer()) log(`installing redis-server failed; see .data/logs/install.log`);
  }
  return haveRedisServer();
}

/**
 * Starts a process whose output goes to .data/logs/<name>.log. `restartOnExit0`: a clean exit (a
 * worker host that drained) is reported and the process started again; any other exit stops
 * everything.
 */
function start(name, command, args, env, options = {}, restartOnExit0 = false) {
  // Once stopping, nothing new starts (a Ctrl-C while this starts them).
  if (stopping) return undefined;
  mkdirSync(logDir, { recursive: true });
  const file = createWriteStream(join(logDir, `${name}.log`), { flags: 'a' });
  // `input`: written to the process's stdin, which is then closed.
  const { input, ...spawnOptions } = options;
  const child = spawn(command, args, {
    cwd: root,
    env: { ...process.env, ...env },
    stdio: [input === undefined ? 'ignore' : 'pipe', 'pipe', 'pipe'],
    ...spawnOptions,
  });
  if (input !== undefined) {
    // A process that exits before reading it fails the write: its exit says why.
    child.stdin.on('error', () => {});
    child.stdin.end(input);
  }
  // Closed once the process has exited and everything it wrote is in its log file.
  const closed = Promise.all([
    route(name, child.stdout, file, false),
    route(name, child.stderr, file, true),
    once(child, 'exit'),
  ]).then(() => new Promise((resolve) => file.end(resolve)));
  const entry = { name, child, closed };
  children.push(entry);
  child.on('exit', (code, signal) => {
    if (stopping) return;
    if (code === 0 && restartOnExit0) {
      log(`${name} exited (0) after draining; starting it again in 1 s (its log: .data/logs/${name}.log)`);
      children.splice(children.indexOf(entry), 1);
      setTimeout(() => stopping || start(name, command, args, env, options, restartOnExit0), 1000);
      return;
    }
    log(`${name} exited (${code ?? signal}); stopping everything`);
    void shutdown(1);
  });
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
  const dir = join(dataDir, 'redis');
  mkdirSync(dir, { recursive: true });
  const password = redisPassword();
  const port = await freePort();
  const child = start(
    'redis-server',
    'redis-server',
    [
      // The configuration on stdin, which holds the password: not in the command line that ps shows.
      '-',
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
    ],
    {},
    // A process group of its own: Ctrl-C reaches the API and the workers, and Redis is stopped last.
    { detached: true, input: `requirepass ${password}\n` },
  );
  if (child === undefined) await never;
  const url = `redis://127.0.0.1:${port}`;
  // redis-cli takes the password from REDISCLI_AUTH: not in its command line either.
  const cliEnv = { ...process.env, REDISCLI_AUTH: password };
  for (let i = 0; i < 100; i++) {
    const ping = spawnSync('redis-cli', ['-p', String(port), 'ping'], { encoding: 'utf8', env: cliEnv });
    if (ping.stdout?.trim() === 'PONG') {
      log(`redis-server ${url} (password in .data/redis-password, data in .data/redis, pid ${child.pid})`);
      return `redis://:${password}@127.0.0.1:${port}`;
    }
    if (stopping) await never;
    await sleep(100);
  }
  return fail('redis-server did not answer PING within 10 s; see .data/redis/redis.log');
}

/** Says what went wrong and stops everything started so far. */
async function fail(message) {
  process.stderr.write(`[up] ${message}\n`);
  await shutdown(1);
  return never;
}

/**
 * Stops the apps, then Redis. `signalled`: the apps had the signal already (Ctrl-C reaches every
 * process of the terminal's group but Redis), so they get a few seconds to stop on their own before
 * a SIGTERM would only make them say they are already stopping.
 */
async function shutdown(code, signalled = false) {
  if (stopping) return;
  stopping = true;
  log('stopping');
  // Apps first, Redis last, so the apps can record their sessions' end.
  for (const group of [
    children.filter((c) => c.name !== 'redis-server'),
    children.filter((c) => c.name === 'redis-server'),
  ]) {
    await Promise.all(
      group.map(async ({ name, child, closed }) => {
        const running = () => child.exitCode === null && child.signalCode === null;
        const exited = once(child, 'exit');
        if (running() && signalled && name !== 'redis-server') await Promise.race([exited, sleep(5_000)]);
        if (running()) {
          child.kill('SIGTERM');
          const timer = setTimeout(() => child.kill('SIGKILL'), 15_000);
          await exited;
          clearTimeout(timer);
        }
        await closed;
      }),
    );
  }
  rmSync(envFile, { force: true });
  log('everything stopped');
  process.exit(code);
}

process.on('SIGINT', () => void shutdown(0, true));
process.on('SIGTERM', () => void shutdown(0));
// The terminal closed: it sends SIGHUP to every process of its group, as Ctrl-C does SIGINT.
process.on('SIGHUP', () => void shutdown(0, true));
// Anything unforeseen stops what was started too (Redis, in a process group of its own, would stay).
const unforeseen = (err) => void fail(`stopping on an unexpected error: ${err?.stack ?? err}`);
process.on('uncaughtException', unforeseen);
process.on('unhandledRejection', unforeseen);

mkdirSync(dataDir, { recursive: true, mode: 0o700 });
chmodSync(dataDir, 0o700);
const redisUrl = await startRedis();
const apiKey = process.env.API_KEYS?.split(',')[0] || devApiKey();
const apiKeys = process.env.API_KEYS || apiKey;
const host = process.env.HOST ?? '127.0.0.1';
// 3000, the CLI's default URL, unless something listens there already.
const port = process.env.PORT ?? String(await freePort(3000, host));
const common = { REDIS_URL: redisUrl, KEY_PREFIX: process.env.KEY_PREFIX ?? 'cq', PROXY_SECRET: proxySecret() };
// The hosts log each line of session output at debug: into their log files, unless LOG_LEVEL says otherwise.
const workerLogLevel = process.env.LOG_LEVEL ?? 'debug';
const sessionEnv = sessionUserEnv();
const api = join(root, 'apps/api/dist/main.js');
const worker = join(root, 'apps/worker/dist/main.js');
if (existsSync(worker)) {
  for (const n of [1, 2])
    start(
      `worker-${n}`,
      process.execPath,
      [worker],
      { ...common, ...sessionEnv, WORKER_ID: `local-worker-${n}`, LOG_LEVEL: workerLogLevel },
      {},
      true,
    );
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
    if (stopping) await never;
    if (i > 150) await fail('the API did not become ready within 30 s; see .data/logs/api.log');
    await sleep(200);
  }
  const cqUrl = port === '3000' ? '' : `CQ_API_URL=${base} `;
  writeFileSync(envFile, `CQ_API_URL=${base}\nCQ_API_KEY=${apiKey}\n`, { mode: 0o600 });
  log(`API        ${base}`);
  log(`API key    ${apiKey}${process.env.API_KEYS ? '' : '  (kept in .data/dev-api-key)'}`);
  log(`dashboard  ${base}/dashboard  (any user name, the API key as password)`);
  log(`try        ${cqUrl}CQ_API_KEY=${apiKey} npx cq demo`);
  log(
    `a session's page: ${cqUrl}CQ_API_KEY=${apiKey} npx cq spawn --user alice, then npx cq open alice (the demo serves one on port 8080)`,
  );
  log(
    `or         curl -s -X POST ${base}/v1/tokens -H 'authorization: Bearer ${apiKey}' -H 'content-type: application/json' -d '{"userId":"alice"}'`,
  );
  log(`saved in   .data/up.env (URL and key; in another terminal: export $(cat .data/up.env))`);
} else {
  log('the API is not built yet: only Redis is running');
}
if (existsSync(worker)) {
  const sessionUser = (sessionEnv.SESSION_USER ?? process.env.SESSION_USER?.trim()) || userInfo().username;
  log(`sessions   run as ${sessionUser} (SESSION_USER), network as SESSION_NETWORK says (auto unless set)`);
}
log('logs in    .data/logs/ (requests, session output; here only warnings and errors)');
log('Ctrl-C stops everything');
