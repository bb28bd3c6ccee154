import { execFileSync, spawn } from 'node:child_process';
import { createRequire } from 'node:module';
import { existsSync, mkdtempSync, readFileSync, readdirSync, readlinkSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { describe, expect, it } from 'vitest';
import { ROOT, until } from '../support/processes.js';
import { cleanUp } from '@cq/test-harness';

/** The lines of the README's `## Quick start` sh block. */
function quickStart(): string[] {
  const readme = readFileSync(`${ROOT}README.md`, 'utf8');
  const section = readme.slice(readme.indexOf('## Quick start'));
  const block = /```sh\n([\s\S]*?)```/.exec(section)![1]!;
  return block.trim().split('\n');
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
  const clone = join(mkdtempSync(join(tmpdir(), 'cq-quickstart-')), 'repo');
  let group: number | undefined;
  cleanUp(() => {
    // Whatever happened, nothing of the quick start outlives the test.
    if (group !== undefined) {
      try {
        process.kill(-group, 'SIGKILL');
      } catch {
        // already gone
      }
    }
    for (const pid of processesIn(clone)) process.kill(pid, 'SIGKILL');
    rmSync(clone, { recursive: true, force: true });
  });

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

  it('line 1 starts everything from a fresh clone, with logs and the banner in .data/; the CLI demo runs against it; a drained host is started again; Ctrl-C leaves no process behind', async () => {
    execFileSync('git', ['clone', '--quiet', ROOT, clone]);
    const env: Record<string, string> = {
      PATH: process.env['PATH'] ?? '',
      HOME: process.env['HOME'] ?? '/root',
      CI: 'true',
      TURBO_TELEMETRY_DISABLED: '1',
    };
    // Like a terminal: a process group of its own, so Ctrl-C (SIGINT) reaches every process in it.
    const up = spawn('bash', ['-c', lines[0]!], { cwd: clone, env, detached: true, stdio: ['ignore', 'pipe', 'pipe'] });
    let output = '';
    up.stdout.on('data', (c: Buffer) => (output += c.toString()));
    up.stderr.on('data', (c: Buffer) => (output += c.toString()));
    group = up.pid;
    const exited = new Promise<number | null>((resolve) => up.on('exit', (code) => resolve(code)));

    await until(
      () => output.includes('Ctrl-C stops everything'),
      300_000,
      `quick start came up; output so far:\n${output.slice(-2000)}`,
    );
    const url = /API\s+(http:\/\/127\.0\.0\.1:\d+)/.exec(output)![1]!;
    const key = /API key\s+(\S+)/.exec(output)![1]!;
    expect((await fetch(`${url}/readyz`)).status).toBe(200);

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
    expect(output).toContain('.data/up.env');
    expect(readFileSync(`${clone}/.data/up.env`, 'utf8')).toBe(`CQ_API_URL=${url}\nCQ_API_KEY=${key}\n`);
    // Request logs and session output go to files; the terminal shows neither.
    await until(
      () => readFileSync(`${clone}/.data/logs/api.log`, 'utf8').includes('"msg":"request completed"'),
      10_000,
      'request logs in .data/logs/api.log',
    );
    const hostLogs = ['worker-1', 'worker-2'].map((n) => readFileSync(`${clone}/.data/logs/${n}.log`, 'utf8'));
    expect(hostLogs.join('')).toContain('"msg":"session output"');
    expect(output).not.toContain('"msg":"request completed"');
    expect(output).not.toContain('"msg":"session output"');
    expect(output).not.toMatch(/^\{"level"/m);

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
      () => output.includes('worker-2 exited (0) after draining; starting it again'),
      20_000,
      `worker-2 reported as drained; output so far:\n${output.slice(-2000)}`,
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
    expect(output).not.toContain('stopping everything');
    expect((await fetch(`${url}/readyz`)).status).toBe(200);
    expect(up.exitCode).toBeNull();

    process.kill(-up.pid!, 'SIGINT');
    expect(await exited).toBe(0);
    // The last thing printed says so.
    expect(output.trimEnd().split('\n').at(-1)).toBe('[up] everything stopped');
    await until(() => processesIn(clone).length === 0, 10_000, 'every process of the quick start gone');
  }, 400_000);
});
