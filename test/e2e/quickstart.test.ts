import { execFileSync, spawn } from 'node:child_process';
import { createRequire } from 'node:module';
import {
  chmodSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  readdirSync,
  readlinkSync,
  rmSync,
  statSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { Redis } from 'ioredis';
import { describe, expect, it } from 'vitest';
import { ROOT, alive, ancestorsOf, sessionPids, until } from '../support/processes.js';
import { hostRequest } from '../support/proxy.js';
import { cleanUp } from '@cq/test-harness';

/** The lines of the README's `## Quick start` sh block. */
function quickStart(): string[] {
  const readme = readFileSync(`${ROOT}README.md`, 'utf8');
  const section = readme.slice(readme.indexOf('## Quick start'));
  const block = /```sh\n([\s\S]*?)```/.exec(section)![1]!;
  return block.trim().split('\n');
}

/** The arguments a process was started with (empty once it is gone). */
function argv(pid: number): string[] {
  try {
    return readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0').slice(0, -1);
  } catch {
    return [];
  }
}

/** The real, effective, saved and filesystem uids of a process, from /proc/<pid>/status. */
function uids(pid: number): number[] {
  const line = /^Uid:\s+(.*)$/m.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))![1]!;
  return line.split(/\s+/).map(Number);
}

/** The permission bits of a file or directory. */
const mode = (path: string): number => statSync(path).mode & 0o777;

/** The uid sessions of the quick start run as: `nobody`'s when it runs as root, else the test's own. */
function sessionUid(): number {
  if (process.getuid!() !== 0) return process.getuid!();
  return Number(execFileSync('getent', ['passwd', 'nobody'], { encoding: 'utf8' }).split(':')[2]);
}

/** Pids of processes whose working directory or command line lies in `dir`. */
function processesIn(dir: string): number[] {
  const found: number[] = [];
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const cwd = readlinkSync(`/proc/${entry}/cwd`);
      const cmdline = readFileSync(`/proc/${entry}/cmdline`, 'utf8');
      const stat = readFileSync(`/proc/${entry}/stat`, 'utf8');
      if (stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3) === 'Z') continue;
      if (cwd.startsWith(dir) || cmdline.includes(dir)) found.push(Number(entry));
    } catch {
      // gone meanwhile, or not ours to read
    }
  }
  return found;
}

describe('the README quick start', () => {
  const lines = quickStart();
  // In a directory of mode 0700, as a clone under /root is: the sessions' user (nobody) cannot read it.
  const clone = join(mkdtempSync(join(tmpdir(), 'cq-quickstart-')), 'repo');
  const env: Record<string, string> = {
    PATH: process.env['PATH'] ?? '',
    HOME: process.env['HOME'] ?? '/root',
    CI: 'true',
    TURBO_TELEMETRY_DISABLED: '1',
  };
  const groups: number[] = [];
  /** Sessions seen running: none may outlive the quick start. */
  const sessions: number[] = [];
  cleanUp(() => {
    // Whatever happened, nothing of the quick start outlives the test.
    for (const group of groups) {
      try {
        process.kill(-group, 'SIGKILL');
      } catch {
        // already gone
      }
    }
    for (const pid of [...processesIn(clone), ...sessions.filter(alive)]) process.kill(pid, 'SIGKILL');
    rmSync(dirname(clone), { recursive: true, force: true });
  });

  /**
   * Starts `command` (line 1, as is or piped) in the clone like a terminal does: in a process group of
   * its own, so that Ctrl-C (SIGINT to the group) reaches every process in it.
   */
  function startUp(command: string, extraEnv: Record<string, string> = {}) {
    const up = spawn('bash', ['-c', command], {
      cwd: clone,
      env: { ...env, ...extraEnv },
      detached: true,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    const seen = { output: '' };
    up.stdout.on('data', (c: Buffer) => (seen.output += c.toString()));
    up.stderr.on('data', (c: Buffer) => (seen.output += c.toString()));
    groups.push(up.pid!);
    const exited = new Promise<number | null>((resolve) => up.on('exit', (code) => resolve(code)));
    return { up, seen, exited };
  }

  it('has exactly two lines: start and test', () => {
    expect(lines).toHaveLength(2);
    expect(lines[1]).toBe('npm test');
  });

  it('is followed by how to use them: two terminals, where the key is, the demo, how long the tests take', () => {
    const readme = readFileSync(`${ROOT}README.md`, 'utf8');
    const section = readme.slice(readme.indexOf('## Quick start'));
    const after = section.slice(section.indexOf('```', section.indexOf('```sh') + 5) + 3);
    const howTo = after.trimStart().split('\n\n')[0]!;
    expect(howTo).toMatch(/two terminals/);
    expect(howTo).toContain('export CQ_API_KEY=');
    expect(howTo).toContain('.data/up.env');
    expect(howTo).toContain('npx cq demo');
    expect(howTo).toMatch(/takes about \d+ to \d+ minutes on 2 cores/);
  });

  it('links to nothing outside the repository (a clone has no ../shared)', () => {
    for (const file of ['README.md', ...readdirSync(`${ROOT}docs`).map((f) => `docs/${f}`)]) {
      const text = readFileSync(`${ROOT}${file}`, 'utf8');
      // Every relative link resolves to a file of the repository.
      for (const [, target] of text.matchAll(/\]\((?!https?:|mailto:|#)([^)#\s]+)/g)) {
        const resolved = resolve(dirname(`${ROOT}${file}`), target!);
        expect(resolved.startsWith(resolve(ROOT) + '/'), `${file} links to ${target}`).toBe(true);
        expect(existsSync(resolved), `${file} links to ${target}, which does not exist`).toBe(true);
      }
      expect(text, file).not.toContain('shared/CONTRACT.md');
    }
  });

  it("line 1's npm ci warns of no engine: every locked package accepts the Node that package.json declares, but the one the README names", () => {
    const semver = createRequire(import.meta.url)('semver') as {
      minVersion(range: string): { version: string } | null;
      satisfies(version: string, range: string): boolean;
    };
    const root = JSON.parse(readFileSync(`${ROOT}package.json`, 'utf8')) as { engines: { node: string } };
    const oldest = semver.minVersion(root.engines.node)!.version;
    const lock = JSON.parse(readFileSync(`${ROOT}package-lock.json`, 'utf8')) as {
      packages: Record<string, { version?: string; engines?: { node?: string } }>;
    };
    const refusing = Object.entries(lock.packages)
      .filter(([, p]) => p.engines?.node !== undefined && !semver.satisfies(oldest, p.engines.node))
      .map(([path, p]) => `${path.replace(/^.*node_modules\//, '')}@${p.version} (node ${p.engines!.node})`);
    // @fastify/sse: no release for Node 20.19 with the plugin API the event streams use; the README says so.
    expect(refusing.filter((p) => !p.startsWith('@fastify/sse@'))).toEqual([]);
    expect(readFileSync(`${ROOT}README.md`, 'utf8')).toMatch(/EBADENGINE[\s\S]{0,40}`@fastify\/sse`/);
  });

  it('line 1 starts everything from a fresh clone, with logs and the banner in .data/; Redis asks for its password; the CLI demo runs against it; a drained host is started again; sessions run as nobody; Ctrl-C leaves no process behind', async () => {
    execFileSync('git', ['clone', '--quiet', ROOT, clone]);
    const { up, seen, exited } = startUp(lines[0]!);

    await until(
      () => seen.output.includes('Ctrl-C stops everything'),
      300_000,
      `quick start came up; output so far:\n${seen.output.slice(-2000)}`,
    );
    const url = /API\s+(http:\/\/127\.0\.0\.1:\d+)/.exec(seen.output)![1]!;
    const key = /API key\s+(\S+)/.exec(seen.output)![1]!;
    expect((await fetch(`${url}/readyz`)).status).toBe(200);

    // Redis has a password of its own, readable by this user only, and refuses a client without it.
    const redisPort = Number(
      /redis-server redis:\/\/127\.0\.0\.1:(\d+) \(password in \.data\/redis-password/.exec(seen.output)![1],
    );
    const password = readFileSync(`${clone}/.data/redis-password`, 'utf8').trim();
    expect(password).toMatch(/^[0-9a-f]{32}$/);
    expect(mode(`${clone}/.data/redis-password`)).toBe(0o600);
    expect(mode(`${clone}/.data/dev-api-key`)).toBe(0o600);
    expect(mode(`${clone}/.data`)).toBe(0o700);
    const options = { host: '127.0.0.1', port: redisPort, lazyConnect: true, maxRetriesPerRequest: 0 };
    const anonymous = new Redis({ ...options, retryStrategy: () => null });
    const authenticated = new Redis({ ...options, password });
    // Its ready check fails too (NOAUTH), as an error event besides the command's rejection.
    anonymous.on('error', () => {});
    try {
      await expect(anonymous.ping()).rejects.toThrow(/^NOAUTH/);
      expect(await authenticated.ping()).toBe('PONG');
    } finally {
      anonymous.disconnect();
      authenticated.disconnect();
    }
    // Neither printed nor in any command line that ps shows (the processes get it in REDIS_URL).
    expect(seen.output).not.toContain(password);
    for (const pid of processesIn(clone)) expect(argv(pid).join(' ')).not.toContain(password);

    const demo = execFileSync(
      process.execPath,
      [`${clone}/packages/cli/bin/cq.js`, 'demo', '--url', url, '--key', key],
      { encoding: 'utf8', timeout: 120_000 },
    );
    expect(demo).toContain('admitted');
    expect(demo).toContain('session_exists');
    expect(demo).toMatch(/throttled: retry in \d+ s/);
    expect(demo).toContain('expired');
    expect(demo).toContain('done');
    expect(processesIn(clone).length).toBeGreaterThan(3);

    // The banner's URL and key are also in the file it names, as lines a shell can export.
    expect(seen.output).toContain('.data/up.env');
    expect(readFileSync(`${clone}/.data/up.env`, 'utf8')).toBe(`CQ_API_URL=${url}\nCQ_API_KEY=${key}\n`);
    // Request logs and session output go to files; the terminal shows neither.
    await until(
      () => readFileSync(`${clone}/.data/logs/api.log`, 'utf8').includes('"msg":"request completed"'),
      10_000,
      'request logs in .data/logs/api.log',
    );
    const hostLogs = ['worker-1', 'worker-2'].map((n) => readFileSync(`${clone}/.data/logs/${n}.log`, 'utf8'));
    expect(hostLogs.join('')).toContain('"msg":"session output"');
    expect(seen.output).not.toContain('"msg":"request completed"');
    expect(seen.output).not.toContain('"msg":"session output"');
    expect(seen.output).not.toMatch(/^\{"level"/m);

    // A drained host exits 0 as designed: it is reported and started again, and nothing else stops.
    const cq = (...args: string[]) =>
      execFileSync(process.execPath, [`${clone}/packages/cli/bin/cq.js`, ...args, '--url', url, '--key', key], {
        encoding: 'utf8',
        timeout: 30_000,
      });
    const before = JSON.parse(cq('hosts', '--json')) as {
      hosts: Array<{ workerId: string; state: string; startedAt: string }>;
    };
    const drained = before.hosts.find((h) => h.workerId === 'local-worker-2')!;
    cq('drain', 'local-worker-2');
    await until(
      () => seen.output.includes('worker-2 exited (0) after draining; starting it again'),
      20_000,
      `worker-2 reported as drained; output so far:\n${seen.output.slice(-2000)}`,
    );
    await until(
      () => {
        const { hosts } = JSON.parse(cq('hosts', '--json')) as typeof before;
        const again = hosts.find((h) => h.workerId === 'local-worker-2');
        return again !== undefined && again.startedAt !== drained.startedAt && again.state === 'active';
      },
      20_000,
      'local-worker-2 active again, started anew',
    );
    expect(seen.output).not.toContain('stopping everything');
    expect((await fetch(`${url}/readyz`)).status).toBe(200);
    expect(up.exitCode).toBeNull();

    // Run as root, the hosts run sessions as nobody (the banner says so); a session's own processes
    // (the demo's shell and its sleep, not the root wrappers that contain it) have nobody's uids, and
    // no Redis password in their environment.
    const user = `quickstart-${process.pid}`;
    cq('spawn', '--user', user);
    if (process.getuid!() === 0) expect(seen.output).toContain('[up] sessions   run as nobody (SESSION_USER)');
    // The host runs the demo from its text: `/bin/sh -c <demo-session.sh's text> demo-session`.
    const isDemo = (args: string[]) =>
      args.length === 4 && args[0] === '/bin/sh' && args[1] === '-c' && args[3] === 'demo-session';
    // The session's own processes (the demo's shell and what runs below it), as read at one moment.
    let own: Array<{ pid: number; args: string[]; uids: number[]; environ: string }> = [];
    await until(
      () => {
        const pids = sessionPids(user);
        sessions.push(...pids.filter((pid) => !sessions.includes(pid)));
        const shell = pids.find((pid) => isDemo(argv(pid)));
        own = [];
        for (const pid of pids) {
          if (pid !== shell && (shell === undefined || !ancestorsOf(pid).includes(shell))) continue;
          try {
            own.push({
              pid,
              args: argv(pid),
              uids: uids(pid),
              environ: readFileSync(`/proc/${pid}/environ`, 'latin1'),
            });
          } catch {
            // gone meanwhile (a sleep of the demo's)
          }
        }
        return own.some((p) => isDemo(p.args)) && own.some((p) => p.args[0] === 'sleep');
      },
      20_000,
      `${user}'s demo session running, in its sleep`,
    );
    for (const { args, uids: ids, environ } of own) {
      expect(ids, args.join(' ').slice(0, 60)).toEqual(Array(4).fill(sessionUid()));
      expect(environ).not.toContain(password);
    }

    // The session proxy is on (its secret kept in .data/proxy-secret): cq open gives a URL that opens the
    // page the demo serves, once the demo announced it.
    expect(statSync(`${clone}/.data/proxy-secret`).mode & 0o777).toBe(0o600);
    await until(
      () => (JSON.parse(cq('status', user, '--json')) as { port?: number }).port === 8080,
      20_000,
      'the demo announcing its page',
    );
    const opened = new URL(cq('open', user).trim());
    const exchanged = await hostRequest(url, opened.host, `${opened.pathname}${opened.search}`);
    expect(exchanged.status).toBe(302);
    const demoPage = await hostRequest(url, opened.host, '/', {
      headers: { cookie: String(exchanged.headers['set-cookie']).split(';')[0]! },
    });
    expect(demoPage.status).toBe(200);
    expect(demoPage.body.toString()).toContain(`User <b>${user}</b>`);

    process.kill(-up.pid!, 'SIGINT');
    expect(await exited).toBe(0);
    // The last thing printed says so.
    expect(seen.output.trimEnd().split('\n').at(-1)).toBe('[up] everything stopped');
    await until(() => processesIn(clone).length === 0, 10_000, 'every process of the quick start gone');
    expect(sessions.filter(alive)).toEqual([]);
  }, 400_000);

  it('piped (`./scripts/up.sh 2>&1 | tee up.log`), Ctrl-C ends tee first and still leaves no redis-server, API, host or session runtime running; the Redis password is kept across restarts; a missing redis-server is installed with apt, whose output goes to .data/logs/install.log', async () => {
    // Run after the test above, in its clone (dependencies installed; built again from the cache), and
    // without what it may have left running had it failed.
    if (!existsSync(clone)) execFileSync('git', ['clone', '--quiet', ROOT, clone]);
    for (const pid of processesIn(clone)) process.kill(pid, 'SIGKILL');
    await until(() => processesIn(clone).length === 0, 10_000, 'nothing of an earlier run left');
    const passwordFile = `${clone}/.data/redis-password`;
    const kept = existsSync(passwordFile) ? readFileSync(passwordFile, 'utf8') : undefined;
    const teeFile = join(dirname(clone), 'up.log');
    // A machine without redis-server: first on PATH, a redis-server that is not there until an apt-get
    // of our own, as chatty as Debian's, "installs" it (then it is the real one).
    const bin = join(dirname(clone), 'bin');
    const installed = join(bin, 'installed');
    mkdirSync(bin, { recursive: true });
    rmSync(installed, { force: true });
    const real = execFileSync('sh', ['-c', 'command -v redis-server'], { encoding: 'utf8' }).trim();
    const script = (name: string, body: string) => {
      writeFileSync(join(bin, name), `#!/bin/sh\n${body}\n`);
      chmodSync(join(bin, name), 0o755);
    };
    script('redis-server', `[ -e ${installed} ] || exit 127\nexec ${real} "$@"`);
    script(
      'apt-get',
      [
        'case "$1" in --version) echo "apt 2.6.1 (amd64)"; exit 0;; esac',
        'echo "Reading package lists... APT-CHATTER"',
        'echo "debconf: APT-CHATTER on stderr" >&2',
        `case "$1" in install) touch ${installed};; esac`,
      ].join('\n'),
    );
    const { seen, exited } = startUp(`${lines[0]} 2>&1 | tee ${teeFile}`, { PATH: `${bin}:${env['PATH']}` });
    await until(
      () => seen.output.includes('Ctrl-C stops everything'),
      300_000,
      `quick start came up through tee; output so far:\n${seen.output.slice(-2000)}`,
    );
    if (kept !== undefined) expect(readFileSync(passwordFile, 'utf8')).toBe(kept);
    expect(readFileSync(teeFile, 'utf8')).toContain('[up] Ctrl-C stops everything');
    // apt was asked (redis-server runs now), said so in one line, and its own output is in the log only.
    expect(existsSync(installed)).toBe(true);
    expect(seen.output.split('\n').filter((l) => l.includes('installing Debian package redis-server'))).toHaveLength(1);
    expect(seen.output).not.toContain('APT-CHATTER');
    const installLog = readFileSync(`${clone}/.data/logs/install.log`, 'utf8');
    expect(installLog).toContain('Reading package lists... APT-CHATTER');
    expect(installLog).toContain('debconf: APT-CHATTER on stderr');

    // Redis (in a process group of its own, which Ctrl-C does not reach: up stops it last), the API, the
    // two hosts and their session runtimes (each in a process session of its own).
    const redisPid = Number(/redis-server redis:\S+ \(.*pid (\d+)\)/.exec(seen.output)![1]);
    const running = processesIn(clone);
    expect(running).toContain(redisPid);
    const count = (file: string) => running.filter((pid) => argv(pid).some((a) => a.endsWith(file))).length;
    expect(count('apps/api/dist/main.js')).toBe(1);
    expect(count('apps/worker/dist/main.js')).toBe(2);
    await until(
      () => processesIn(clone).filter((pid) => argv(pid).some((a) => a.endsWith('runtime-main.js'))).length === 2,
      20_000,
      'both hosts with their session runtime',
    );

    const [group] = groups.slice(-1);
    process.kill(-group!, 'SIGINT');
    await exited;
    // Nothing of it is left: the pipeline ends once up has stopped everything.
    await until(() => processesIn(clone).length === 0, 10_000, 'every process of the piped quick start gone');
    expect(alive(redisPid)).toBe(false);
  }, 400_000);
});
