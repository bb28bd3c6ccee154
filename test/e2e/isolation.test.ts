// A session sees only its own (issue 44), judged from outside: hostile sessions
// (test/support/isolation-session.mjs) try to reach Redis, the API, a server on the host's loopback,
// the host's addresses, each other's port 8080, files and directories, and fill their /tmp; each writes
// what it got to the observer, a FIFO whose log the test reads. The test finds the sessions' processes
// and directories itself, in /proc and on disk.
import { copyFileSync, existsSync, symlinkSync } from 'node:fs';
import { createServer, type AddressInfo } from 'node:net';
import { networkInterfaces } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { cleanUp } from '@cq/test-harness';
import {
  ROOT,
  TEST_RUN,
  nothingLeftBehind,
  sessionCgroupsOf,
  sessionDirOf,
  sessionNamespaces,
  sessionPids,
  startNode,
  until,
} from '../support/processes.js';
import { sessionVisibleDir, startSystem, type System } from '../support/system.js';

const TMP_MB = 8;

/** The results a session wrote (name → outcome), newest last. */
function results(system: System, userId: string, fence: number): Array<{ name: string; outcome: string; at: number }> {
  return system
    .observedOf(userId, fence)
    .filter((f) => f[4] === 'result')
    .map((f) => ({ name: f[5]!, outcome: decodeURIComponent(f[6] ?? ''), at: Number(f[2]) }));
}

/** Waits for the session's `done` and answers its results by name (the first of each). */
async function finished(system: System, userId: string, fence: number): Promise<Record<string, string>> {
  await until(() => results(system, userId, fence).some((r) => r.name === 'done'), 30_000, `${userId} done`);
  const byName: Record<string, string> = {};
  for (const r of results(system, userId, fence)) byName[r.name] ??= r.outcome;
  return byName;
}

const hostAddresses = Object.values(networkInterfaces())
  .flatMap((list) => list ?? [])
  .filter((a) => a.family === 'IPv4' && !a.internal)
  .map((a) => a.address);

describe.each([
  ['root', {}],
  ['SESSION_USER=nobody', { SESSION_USER: 'nobody' }],
] as const)('SESSION_NETWORK none (auto), as %s: a session reaches nothing and nobody else’s files', (_as, env) => {
  it('not Redis, not the API, not the host’s loopback or addresses, not a neighbour’s port or files; its /tmp fills alone', async () => {
    const system = await startSystem({ workers: 0 });
    // A server of the test's on the host's loopback, as a host service would be.
    const server = createServer((socket) => socket.end('host secret\n'));
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    cleanUp(() => server.close());
    const hostPort = (server.address() as AddressInfo).port;
    // The program where every user may read it (a clone may sit in a directory only root can enter).
    const program = join(sessionVisibleDir('isolation'), 'isolation-session.mjs');
    copyFileSync(`${ROOT}test/support/isolation-session.mjs`, program);
    const host = await system.addWorker('host-isolated', {
      ...env,
      SESSION_COMMAND: `exec env ${TEST_RUN}=${process.pid} ${process.execPath} ${program} ${system.observerFile}`,
      SESSION_TMP_MB: String(TMP_MB),
      // A cap, so that each session has a cgroup too, and its removal can be checked.
      SESSION_PIDS_MAX: '256',
      SLOTS: '2',
    });
    const sessionCgroups = sessionCgroupsOf(host.child.pid!);
    const line = await host.waitForLog((l) => String(l['msg']).includes('each has a network of its own'));
    expect(line).toMatchObject({ network: 'none', filesystem: 'private' });
    expect((await system.client.hosts()).hosts[0]).toMatchObject({
      containment: 'namespace',
      isolation: { network: 'none', filesystem: 'private' },
    });

    // Redis, standalone or a Cluster node (each listens on the host's loopback).
    const redis =
      system.target.kind === 'standalone'
        ? `127.0.0.1:${new URL(system.target.url).port}`
        : `127.0.0.1:${system.target.seeds.split(',')[0]!.split(':').at(-1)!}`;
    const apiPort = new URL(system.api.baseUrl).port;
    const targets = {
      tcp: {
        api: `127.0.0.1:${apiPort}`,
        hostService: `127.0.0.1:${hostPort}`,
        ...Object.fromEntries(hostAddresses.map((a, i) => [`hostAddress${i}`, `${a}:${hostPort}`])),
      },
      redis,
    };

    const neighbour = await system.client.spawn(
      (await system.client.issueToken({ userId: 'iso-b', metadata: targets })).token,
    );
    const b = await finished(system, 'iso-b', neighbour.fence);
    const neighbourDir = sessionDirOf('iso-b', neighbour.fence);
    expect(existsSync(join(neighbourDir, 'secret'))).toBe(true);

    const attacker = await system.client.spawn(
      (
        await system.client.issueToken({
          userId: 'iso-a',
          metadata: {
            ...targets,
            neighbourDir,
            fill: true,
            writes: { etc: `/etc/cq-isolation-${process.pid}`, checkout: `${ROOT}cq-isolation-${process.pid}` },
          },
        })
      ).token,
    );
    const a = await finished(system, 'iso-a', attacker.fence);
    expect(sessionCgroups()).toHaveLength(2);

    for (const [who, got] of [
      ['iso-a', a],
      ['iso-b', b],
    ] as const) {
      // Both listen on 8080 of their own loopback, and each reaches only itself there.
      expect(got['listen8080'], who).toBe('listening');
      expect(got['self8080'], who).toBe(`connected ${who}`);
      // Nothing of the host's loopback is there: Redis, the API and the host's service are refused.
      expect(got['tcp-api'], who).toBe('ECONNREFUSED');
      expect(got['tcp-hostService'], who).toBe('ECONNREFUSED');
      expect(got['redis'], who).toBe('ECONNREFUSED');
      // No route to any address of the host.
      for (let i = 0; i < hostAddresses.length; i++) expect(got[`tcp-hostAddress${i}`], who).toBe('ENETUNREACH');
      expect(got['cwd'], who).toBe('SESSION_DIR');
      expect(got['home'], who).toBe('SESSION_DIR');
      expect(got['tmpAtStart'], who).toBe('empty');
      expect(got['shmAtStart'], who).toBe('empty');
      expect(got['ownTmp'], who).toBe('written');
      expect(got['ownDir'], who).toBe('written');
      // The /tmp it reads is its own: what it wrote, not its neighbour's.
      expect(got['tmpSecretAfter'], who).toBe(`read ${who} ${who === 'iso-a' ? attacker.fence : neighbour.fence}`);
    }
    // The host is read-only to it, root or not; the neighbour's directory is not even there.
    expect(a['write-etc']).toBe('EROFS');
    // A checkout under /tmp is not even there: the session's /tmp is its own.
    expect(a['write-checkout']).toBe(ROOT.startsWith('/tmp/') ? 'ENOENT' : 'EROFS');
    expect(existsSync(`/etc/cq-isolation-${process.pid}`)).toBe(false);
    expect(existsSync(`${ROOT}cq-isolation-${process.pid}`)).toBe(false);
    expect(a['neighbourDirRead']).toBe('ENOENT');
    expect(a['neighbourDirWrite']).toBe('ENOENT');
    expect(existsSync(join(neighbourDir, 'intruder'))).toBe(false);
    // Its /tmp and /dev/shm hold SESSION_TMP_MB each, then ENOSPC.
    for (const fill of [a['fillTmp'], a['fillShm']]) {
      const [mib, code] = (fill ?? '').split(' ');
      expect(code).toBe('ENOSPC');
      expect(Number(mib)).toBeGreaterThanOrEqual(TMP_MB - 1);
      expect(Number(mib)).toBeLessThanOrEqual(TMP_MB);
    }
    // The neighbour noticed nothing: after the attacker's /tmp was full, it still writes its own.
    const filledAt = results(system, 'iso-a', attacker.fence).find((r) => r.name === 'fillShm')!.at;
    await until(
      () => results(system, 'iso-b', neighbour.fence).some((r) => r.name === 'tmpWrite' && r.at > filledAt),
      10_000,
      "the neighbour's /tmp written after the attacker's was full",
    );
    expect(
      results(system, 'iso-b', neighbour.fence)
        .filter((r) => r.name === 'tmpWrite')
        .every((r) => r.outcome === 'written'),
    ).toBe(true);

    // When they end, their directories go with them, and nothing of them runs.
    const attackerDir = sessionDirOf('iso-a', attacker.fence);
    const namespaces = sessionNamespaces([
      ...sessionPids('iso-a', attacker.fence),
      ...sessionPids('iso-b', neighbour.fence),
    ]);
    expect(namespaces.filter((ns) => ns.startsWith('net:'))).toHaveLength(2);
    await system.client.stopSession('iso-a');
    await system.client.stopSession('iso-b');
    await system.ended('iso-a', attacker.sessionId);
    await system.ended('iso-b', neighbour.sessionId);
    await until(() => !existsSync(attackerDir) && !existsSync(neighbourDir), 5000, 'the session directories removed');
    await until(() => sessionCgroups().length === 0, 5000, 'the session cgroups removed');
    expect(sessionPids('iso-a')).toEqual([]);
    expect(sessionPids('iso-b')).toEqual([]);
    // No process or mount holds their namespaces; no mount of their /tmp, /dev/shm or directory remains.
    await nothingLeftBehind(namespaces, [attackerDir, neighbourDir]);
  });
});

describe('honest configuration', () => {
  /** A PATH with util-linux and coreutils, without bubblewrap. */
  const withoutBubblewrap = (): string => {
    const dir = sessionVisibleDir('path');
    for (const tool of ['unshare', 'setpriv', 'env', 'getent', 'true']) {
      const found = (process.env['PATH'] ?? '').split(':').find((d) => existsSync(join(d, tool)));
      symlinkSync(join(found!, tool), join(dir, tool));
    }
    return dir;
  };

  it.each(['none', 'egress'])(
    'SESSION_NETWORK=%s where bubblewrap is missing: exits 1 with one line naming why and the fix',
    async (network) => {
      const host = startNode(`${ROOT}apps/worker/dist/main.js`, {
        SESSION_NETWORK: network,
        PATH: withoutBubblewrap(),
        REDIS_URL: 'redis://127.0.0.1:1',
      });
      expect((await host.exited()).code).toBe(1);
      expect(host.stderr.join('')).toBe(
        `SESSION_NETWORK is ${network} but this host cannot give a session a network of its own: ` +
          'bubblewrap (bwrap) is not on the PATH (install Debian package bubblewrap); ' +
          "set SESSION_NETWORK=host to run sessions on the host's network\n",
      );
    },
  );

  it('SESSION_NETWORK=host: the host warns at start that its sessions share its network, and says so in GET /v1/hosts', async () => {
    const system = await startSystem({ workers: 0 });
    const host = await system.addWorker('host-network', { SESSION_NETWORK: 'host' });
    const line = await host.waitForLog((l) => String(l['msg']).startsWith('sessions are not fully isolated'));
    expect(line).toMatchObject({ level: 40, network: 'host', filesystem: 'private' });
    expect(String(line['msg'])).toContain(
      "the host's network (it reaches whatever the host reaches: Redis, the API, other sessions' ports)",
    );
    expect(String(line['msg'])).toMatch(/\(SESSION_NETWORK=host\)$/);
    expect((await system.client.hosts()).hosts[0]!.isolation).toEqual({
      network: 'host',
      filesystem: 'private',
      cpus: null,
    });
  });
});
