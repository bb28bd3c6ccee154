// SESSION_NETWORK=egress (issue 44), judged from outside, on a network the test makes itself: the
// worker side runs in a network namespace H whose only way out is a veth to a namespace W, the test's
// "internet", which holds a documentation address (198.51.100.7, public by the rules) and private,
// shared and link-local ones, each serving its own address on port 8080. From H itself every one of them
// answers; from an egress session (test/support/egress-host.mjs runs the built probe and launcher in H)
// only the public one does, nor do H's own services (loopback, its address) or slirp's door to them.
import { spawn, spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { copyFileSync, existsSync, readFileSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { cleanUp } from '@cq/test-harness';
import { ROOT, TEST_RUN, until } from '../support/processes.js';
import { sessionVisibleDir, startObserver } from '../support/system.js';

const PUBLIC = '198.51.100.7';
const REFUSED = {
  private10: '10.77.0.2',
  private172: '172.20.0.7',
  private192: '192.168.77.7',
  linkLocal: '169.254.7.7',
};
const H_ADDRESS = '203.0.113.2';

function ip(...args: string[]): void {
  const done = spawnSync('ip', args, { encoding: 'utf8' });
  if (done.status !== 0) throw new Error(`ip ${args.join(' ')}: ${done.stderr}`);
}

/** Pids of every slirp4netns process, from /proc. */
function slirps(): number[] {
  return readdirSync('/proc')
    .filter((e) => {
      try {
        return /^\d+$/.test(e) && readFileSync(`/proc/${e}/comm`, 'utf8').trim() === 'slirp4netns';
      } catch {
        return false;
      }
    })
    .map(Number);
}

/** Connects from inside namespace `ns` (a process of the test's own there): the first line, or the error code. */
function connectFrom(ns: string, host: string, port: number): string {
  const script = `const s=require('net').connect(${port},'${host}');s.setTimeout(2000,()=>{console.log('timeout');process.exit()});s.on('data',d=>{console.log(String(d).trim());process.exit()});s.on('error',e=>{console.log(e.code);process.exit()})`;
  return spawnSync('ip', ['netns', 'exec', ns, process.execPath, '-e', script], { encoding: 'utf8' }).stdout.trim();
}

describe('SESSION_NETWORK egress', () => {
  it('reaches a public address and nothing private, link-local, of the host or behind slirp; as root and as nobody; leaves nothing behind', async () => {
    const suffix = randomBytes(3).toString('hex');
    const [H, W] = [`cq-eh-${suffix}`, `cq-ew-${suffix}`];
    ip('netns', 'add', H);
    cleanUp(() => spawnSync('ip', ['netns', 'del', H]));
    ip('netns', 'add', W);
    cleanUp(() => spawnSync('ip', ['netns', 'del', W]));
    ip('link', 'add', 'name', `h${suffix}`, 'netns', H, 'type', 'veth', 'peer', 'name', `w${suffix}`, 'netns', W);
    ip('-n', H, 'addr', 'add', `${H_ADDRESS}/24`, 'dev', `h${suffix}`);
    ip('-n', W, 'addr', 'add', '203.0.113.1/24', 'dev', `w${suffix}`);
    for (const [ns, dev] of [
      [H, `h${suffix}`],
      [W, `w${suffix}`],
    ] as const) {
      ip('-n', ns, 'link', 'set', 'lo', 'up');
      ip('-n', ns, 'link', 'set', dev, 'up');
    }
    ip('-n', H, 'route', 'add', 'default', 'via', '203.0.113.1');
    for (const address of [PUBLIC, ...Object.values(REFUSED)]) ip('-n', W, 'addr', 'add', `${address}/32`, 'dev', 'lo');
    const world = spawn(
      'ip',
      [
        'netns',
        'exec',
        W,
        process.execPath,
        '-e',
        "require('net').createServer(s=>s.end('served by '+s.localAddress+'\\n')).listen(8080,'0.0.0.0',()=>console.log('listening'))",
      ],
      { stdio: ['ignore', 'pipe', 'inherit'] },
    );
    cleanUp(() => world.kill('SIGKILL'));
    await new Promise((resolve) => world.stdout.once('data', resolve));
    // From H itself, every address of W answers: what the sessions do not reach is refused by their isolation.
    for (const address of [PUBLIC, ...Object.values(REFUSED)])
      expect(connectFrom(H, address, 8080)).toBe(`served by ${address}`);

    const { fifo, log } = startObserver();
    const program = join(sessionVisibleDir('egress'), 'isolation-session.mjs');
    copyFileSync(`${ROOT}test/support/isolation-session.mjs`, program);
    const sessionsDir = join(sessionVisibleDir('egress-sessions'), 'sessions');
    const metadata = {
      tcp: {
        public: `${PUBLIC}:8080`,
        ...Object.fromEntries(Object.entries(REFUSED).map(([name, address]) => [name, `${address}:8080`])),
        hostLoopback: '127.0.0.1:9090',
        hostAddress: `${H_ADDRESS}:9090`,
        slirpGateway: '10.0.2.2:9090',
      },
      reads: { resolv: '/etc/resolv.conf' },
    };
    const before = new Set(slirps());
    const host = spawn(
      'ip',
      [
        'netns',
        'exec',
        H,
        process.execPath,
        `${ROOT}test/support/egress-host.mjs`,
        JSON.stringify({
          command: `exec env ${TEST_RUN}=${process.pid} ${process.execPath} ${program} ${fifo}`,
          sessionsDir,
          sessions: [
            { userId: 'egress-root', metadata },
            { userId: 'egress-nobody', user: 'nobody', metadata },
          ],
        }),
      ],
      { stdio: ['ignore', 'pipe', 'inherit'] },
    );
    cleanUp(() => host.kill('SIGKILL'));
    let said = '';
    host.stdout.on('data', (chunk: Buffer) => (said += chunk.toString()));

    const results = (userId: string): Record<string, string> => {
      const byName: Record<string, string> = {};
      if (!existsSync(log)) return byName;
      for (const f of readFileSync(log, 'utf8')
        .split('\n')
        .map((l) => l.split(' ')))
        if (f[0] === userId && f[4] === 'result') byName[f[5]!] ??= decodeURIComponent(f[6] ?? '');
      return byName;
    };
    for (const userId of ['egress-root', 'egress-nobody']) {
      await until(() => results(userId)['done'] !== undefined, 30_000, `${userId} done`);
      const got = results(userId);
      expect(got['tcp-public'], userId).toBe(`connected served by ${PUBLIC}`);
      for (const name of Object.keys(REFUSED)) expect(got[`tcp-${name}`], `${userId} ${name}`).toBe('EHOSTUNREACH');
      expect(got['tcp-hostAddress'], userId).toBe('EHOSTUNREACH');
      // Its loopback is its own; slirp's gateway does not lead to the host's.
      expect(got['tcp-hostLoopback'], userId).toBe('ECONNREFUSED');
      expect(got['tcp-slirpGateway'], userId).not.toMatch(/^connected/);
      expect(got['self8080'], userId).toBe(`connected ${userId}`);
      expect(got['read-resolv'], userId).toMatch(/^read .*nameserver 10\.0\.2\.3/s);
    }
    expect(slirps().filter((pid) => !before.has(pid))).toHaveLength(2);

    host.kill('SIGTERM');
    await until(() => said.split('\n').filter((l) => l.startsWith('{')).length === 2, 10_000, 'both sessions ended');
    await new Promise((resolve) => (host.exitCode === null ? host.once('exit', resolve) : resolve(undefined)));
    // Nothing left: no slirp4netns of theirs, no session directory.
    await until(() => slirps().every((pid) => before.has(pid)), 5000, 'their slirp4netns gone');
    const hostDirs = existsSync(sessionsDir) ? readdirSync(sessionsDir) : [];
    expect(hostDirs.flatMap((d) => readdirSync(join(sessionsDir, d)).filter((f) => f !== 'resolv.conf'))).toEqual([]);
  });
});
