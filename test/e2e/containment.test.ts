// Session containment, judged from outside: hostile sessions (test/support/hostile-session.sh) write
// heartbeats to the observer file from every process they leave behind, and the test reads /proc itself
// to find what of a session still runs (by the session's USER_ID and FENCE in each process's environ).
import { chmodSync, copyFileSync, existsSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { Keys } from '@cq/coordinator';
import { describe, expect, it, onTestFinished } from 'vitest';
import { watchLease } from '../support/lease-watch.js';
import {
  ROOT,
  alive,
  nothingLeftBehind,
  sessionCgroupsOf,
  sessionDirOf,
  sessionNamespaces,
  sessionPids,
  startNode,
  until,
  type Started,
  rss,
} from '../support/processes.js';
import { allLines } from '../support/output.js';
import { sessionProgram, sessionVisibleDir, startSystem, type System } from '../support/system.js';
import { cleanUp } from '@cq/test-harness';

const LEASE_MS = 3000;
const HOSTILE = `exec /bin/sh ${sessionProgram('hostile-session.sh')}`;

/** Heartbeats of one session in the observer file (role: main or daemon). */
function beats(system: System, userId: string, fence: number, role?: string): number[] {
  return system
    .observedOf(userId, fence)
    .filter((f) => role === undefined || f[4] === role)
    .map((f) => Number(f[2]));
}

/** A file of /proc/<pid>/, or undefined when the process has exited meanwhile (a loop's `sleep` or `date`). */
function procFile(pid: number, name: string): string | undefined {
  try {
    return readFileSync(`/proc/${pid}/${name}`, 'utf8');
  } catch {
    return undefined;
  }
}

/** Field `n` (1-based, after the command name) of /proc/<pid>/stat; undefined once the process is gone. */
function statField(pid: number, n: number): number | undefined {
  const stat = procFile(pid, 'stat');
  return stat === undefined ? undefined : Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[n - 3]);
}

/** Resident memory of a process, bytes (0 once it is gone). */
/** The session's output lines (through the API) once one of them matches `done`. */
async function outputUntil(
  system: System,
  userId: string,
  sessionId: string,
  done: (line: string) => boolean,
): Promise<string[]> {
  let lines: string[] = [];
  await until(
    async () => (lines = (await allLines(system.client, userId, sessionId)).map((l) => l.line)).some(done),
    15_000,
    `${userId}'s output`,
  );
  return lines;
}

const runtimePidOf = async (host: Started): Promise<number> =>
  (await host.waitForLog((l) => l['msg'] === 'session runtime started'))['runtimePid'] as number;

/** Spawns a session for `userId`; resolves once its main process beats. */
async function spawnBeating(
  system: System,
  userId: string,
  options: { metadata?: Record<string, unknown>; lifetimeMs?: number; role?: string; timeoutMs?: number } = {},
): Promise<{ sessionId: string; fence: number }> {
  const { token } = await system.client.issueToken({
    userId,
    ...(options.metadata === undefined ? {} : { metadata: options.metadata }),
    ...(options.lifetimeMs === undefined ? {} : { lifetimeMs: options.lifetimeMs }),
  });
  const admission = await system.client.spawn(token);
  await until(
    () => beats(system, userId, admission.fence, options.role ?? 'main').length > 0,
    options.timeoutMs ?? 15_000,
    `${userId} beating`,
  );
  return admission;
}

describe('namespace containment: every process of a session ends with it', async () => {
  const system = await startSystem({ workers: 0 });
  const host = await system.addWorker('host-1', {
    SESSION_COMMAND: `${HOSTILE} ${system.observerFile}`,
    SLOTS: '6',
    LEASE_MS: String(LEASE_MS),
  });

  it('the host logs its containment at start', async () => {
    const line = await host.waitForLog((l) => String(l['msg']).startsWith('session containment'));
    expect(line).toMatchObject({ containment: 'namespace', level: 30 });
    expect((await system.client.hosts()).hosts.find((h) => h.workerId === 'host-1')).toMatchObject({
      containment: 'namespace',
    });
  });

  const endings = ['stop', 'completion', 'expiry'] as const;
  it.each(['daemon', 'fork2'])(
    'a %s that left the session’s process group is gone after its stop, completion and expiry',
    async (mode) => {
      const sessions = await Promise.all(
        endings.map(async (ending) => {
          const userId = `${mode}-${ending}`;
          const admission = await spawnBeating(system, userId, {
            role: 'daemon',
            ...(ending === 'completion' ? { metadata: { durationMs: 1500 } } : {}),
            ...(ending === 'expiry' ? { lifetimeMs: 1500 } : {}),
          });
          // The daemon really left: it leads a process session other than the session's first process's.
          const pids = sessionPids(userId, admission.fence);
          const sids = new Set(pids.map((pid) => statField(pid, 6)).filter((sid) => sid !== undefined));
          expect(sids.size).toBeGreaterThan(1);
          // What must not outlive it, seen from outside: its namespaces (mount, network, PID, ...) and its directory.
          const namespaces = sessionNamespaces(pids);
          expect(namespaces.some((ns) => ns.startsWith('net:'))).toBe(true);
          expect(namespaces.some((ns) => ns.startsWith('mnt:'))).toBe(true);
          return { ending, userId, admission, namespaces, dir: sessionDirOf(userId, admission.fence) };
        }),
      );
      await system.client.stopSession(`${mode}-stop`);
      for (const { ending, userId, admission, namespaces, dir } of sessions) {
        const entry = await system.ended(userId, admission.sessionId);
        expect(entry.state).toBe({ stop: 'stopped', completion: 'completed', expiry: 'expired' }[ending]);
        await until(() => sessionPids(userId, admission.fence).length === 0, 2000, `${userId}: no process left`);
        const lastDaemonBeat = Math.max(...beats(system, userId, admission.fence, 'daemon'));
        // Nothing of it beat after its end was recorded (a beat is written every 50 ms).
        expect(lastDaemonBeat).toBeLessThanOrEqual(Date.parse(entry.endedAt) + 100);
        // Nothing is left behind: no process or mount holds its namespaces, no mount or directory of its remains.
        await until(() => !existsSync(dir), 5000, `${userId}'s directory removed`);
        await nothingLeftBehind(namespaces, [dir]);
      }
    },
  );

  it('a SIGKILL of the host’s whole process group: the daemons die before their leases could expire in Redis', async () => {
    const crashing = await system.addWorker(
      'host-crash',
      // A cap, so that each session has a cgroup too, and its removal can be checked.
      { SESSION_COMMAND: `${HOSTILE} ${system.observerFile}`, LEASE_MS: String(LEASE_MS), SESSION_PIDS_MAX: '256' },
      { ownGroup: true },
    );
    const sessionCgroups = sessionCgroupsOf(crashing.child.pid!);
    // host-1 takes no more sessions: drained, the new ones go to the host that is about to die.
    const redis = system.connect();
    cleanUp(() => redis.disconnect());
    await system.client.drainHost('host-1');
    await until(
      async () => (await system.client.hosts()).hosts.every((h) => h.workerId !== 'host-1'),
      10_000,
      'drained',
    );
    const keys = new Keys(system.keyPrefix);
    const users = ['daemon-gk', 'fork2-gk'];
    const sessions = await Promise.all(users.map((userId) => spawnBeating(system, userId, { role: 'daemon' })));
    const watches = users.map((u) => watchLease(redis, keys.user(u).lease));
    await until(() => watches.every((w) => w.expiresAt > 0), 2000, 'leases seen');
    const dirs = users.map((u, i) => sessionDirOf(u, sessions[i]!.fence));
    expect(dirs.every((dir) => existsSync(dir))).toBe(true);
    const namespaces = sessionNamespaces(users.flatMap((u, i) => sessionPids(u, sessions[i]!.fence)));
    expect(namespaces.filter((ns) => ns.startsWith('net:'))).toHaveLength(users.length);
    expect(sessionCgroups()).toHaveLength(users.length);

    process.kill(-crashing.child.pid!, 'SIGKILL');
    await crashing.exited();
    for (const [i, userId] of users.entries()) {
      await until(() => sessionPids(userId, sessions[i]!.fence).length === 0, LEASE_MS + 1000, `${userId} gone`);
      await until(() => watches[i]!.gone, LEASE_MS + 2000, `${userId}'s lease gone`);
      const last = Math.max(...beats(system, userId, sessions[i]!.fence, 'daemon'));
      expect(last).toBeLessThan(watches[i]!.expiresAt);
      console.info(
        `group kill: ${userId}'s daemon last beat ${watches[i]!.expiresAt - last} ms before its lease could expire`,
      );
      watches[i]!.stop();
    }
    // The runtime outlived its host: it removed the sessions' directories as they ended.
    await until(() => dirs.every((dir) => !existsSync(dir)), 5000, "the sessions' directories removed");
    await nothingLeftBehind(namespaces, dirs);
    await until(() => sessionCgroups().length === 0, 5000, "the sessions' cgroups removed");
  });

  it('the host frozen and its runtime SIGKILLed: the parent-death signals alone end every process of the session, daemons included', async () => {
    // A system of its own: the session must go to the host that is about to freeze.
    const own = await startSystem({ workers: 0 });
    const frozen = await own.addWorker('host-frozen', {
      SESSION_COMMAND: `${HOSTILE} ${own.observerFile}`,
      LEASE_MS: '60000',
    });
    const runtimePid = await runtimePidOf(frozen);
    const session = await spawnBeating(own, 'daemon-pd', { role: 'daemon' });
    expect(sessionPids('daemon-pd', session.fence).length).toBeGreaterThan(2);
    const dir = sessionDirOf('daemon-pd', session.fence);
    const namespaces = sessionNamespaces(sessionPids('daemon-pd', session.fence));
    // Nothing of the host can act: frozen, with a lease of a minute; only the kernel's parent-death
    // signals (setpriv on the session's first process, unshare --kill-child on its init) are left.
    process.kill(frozen.child.pid!, 'SIGSTOP');
    try {
      const killedAt = Date.now();
      process.kill(runtimePid, 'SIGKILL');
      await until(() => sessionPids('daemon-pd', session.fence).length === 0, 1000, 'no process of the session left');
      expect(Math.max(...beats(own, 'daemon-pd', session.fence, 'daemon'))).toBeLessThan(killedAt + 200);
    } finally {
      process.kill(frozen.child.pid!, 'SIGCONT');
    }
    // With the host and its runtime both dead, nothing removes the session's directory: the next host
    // started on this machine does.
    process.kill(frozen.child.pid!, 'SIGKILL');
    await frozen.exited();
    expect(existsSync(dir)).toBe(true);
    await own.addWorker('host-after');
    expect(existsSync(dir)).toBe(false);
    // Its namespaces went with its processes, though nothing of the host could act. (CI once found its
    // mount, IPC and UTS namespaces "still held" here after 2 s: they were new sessions' of the other
    // lane, numbered as the freed ones. sessionNamespaces now holds them open, so that no new namespace
    // takes their numbers.)
    await nothingLeftBehind(namespaces, [dir]);
  });
});

describe('no session can harm another', () => {
  /** A system of its own for each case: the hostile sessions go to its one host, no other. */
  const hostOf = async (id: string, env: Record<string, string>): Promise<{ system: System; host: Started }> => {
    const system = await startSystem({ workers: 0 });
    const host = await system.addWorker(id, { SESSION_COMMAND: `${HOSTILE} ${system.observerFile}`, ...env });
    return { system, host };
  };

  it('floods (1.5 GB without a newline, 10 MB/s of short lines, junk on fd 3): the neighbour runs on, nothing is lost, the host stays under 256 MiB', async () => {
    const { system, host } = await hostOf('host-flood', { SLOTS: '4' });
    const runtimePid = await runtimePidOf(host);
    const bystander = await spawnBeating(system, 'bystander-flood');
    let peak = 0;
    const sampler = setInterval(() => (peak = Math.max(peak, rss(host.child.pid!) + rss(runtimePid))), 50);
    try {
      // Each beats once its flood runs; the nonewline session only once its 1.5 GB has gone through.
      const floods = await Promise.all(
        ['nonewline-1', 'lines-1', 'notify-1'].map(async (userId) => ({
          userId,
          admission: await spawnBeating(system, userId, { timeoutMs: 45_000 }),
        })),
      );
      // An observation window of 3 s with every flood running.
      const window = Date.now();
      await until(() => Date.now() - window > 3000, 5000, '3 s of floods');
      // The neighbour beat all along (every 50 ms). Three floods that take all the CPU they can get on
      // a 2-core machine may delay a beat, never stop it.
      const own = beats(system, 'bystander-flood', bystander.fence).sort((a, b) => a - b);
      const gaps = own.slice(1).map((at, i) => at - own[i]!);
      console.info(`floods: the neighbour's longest gap between beats ${Math.max(...gaps)} ms`);
      expect(Math.max(...gaps)).toBeLessThan(3000);
      expect(own.at(-1)!).toBeGreaterThan(Date.now() - 3000);
      // The cut line came through, marked, and the line flood was cut down to the rate.
      // Every kept line, page after page: a page holds the oldest 1,000 kept, and a few seconds into the
      // line flood those are all from its first 1 MiB burst (about 24,000 lines), before any marker.
      const outputOf = async (userId: string): Promise<string[]> => {
        const { sessionId } = floods.find((f) => f.userId === userId)!.admission;
        const lines: string[] = [];
        for (let after: string | undefined; ;) {
          const page = await system.client.logs(userId, sessionId, after === undefined ? {} : { after });
          lines.push(...page.lines.map((l) => l.line));
          if (!page.more || page.lines.length === 0) return lines;
          after = page.lines.at(-1)!.id;
        }
      };
      expect((await outputOf('nonewline-1')).find((l) => l.startsWith('x'))).toMatch(/^x{16384} \[line cut\]$/);
      expect((await outputOf('lines-1')).some((l) => /^\[output dropped: \d+ bytes\]$/.test(l))).toBe(true);
      for (const { userId, admission } of floods) {
        await system.client.stopSession(userId);
        expect((await system.ended(userId, admission.sessionId)).state).toBe('stopped');
      }
      await system.client.stopSession('bystander-flood');
      expect((await system.ended('bystander-flood', bystander.sessionId)).state).toBe('stopped');
    } finally {
      clearInterval(sampler);
    }
    console.info(`floods: host + runtime peak RSS ${(peak / 2 ** 20).toFixed(1)} MiB`);
    expect(peak).toBeGreaterThan(0);
    expect(peak).toBeLessThan(256 * 2 ** 20);
    expect(alive(runtimePid)).toBe(true);
  }, 60_000);

  it('a session that SIGKILLs the host, the runtime and its neighbour (their pids handed to it in a file) kills none of them', async () => {
    const { system, host } = await hostOf('host-kill', { SLOTS: '2' });
    const runtimePid = await runtimePidOf(host);
    const neighbour = await spawnBeating(system, 'bystander-kill');
    // The neighbour's lasting processes (its loop's `sleep` and `date` come and go).
    const seen = sessionPids('bystander-kill', neighbour.fence);
    const settled = Date.now();
    await until(() => Date.now() - settled > 300, 1000, '300 ms');
    const lasting = sessionPids('bystander-kill', neighbour.fence).filter((pid) => seen.includes(pid));
    expect(lasting.length).toBeGreaterThan(0);
    const targets = [host.child.pid!, runtimePid, ...lasting];
    const pidFile = join(sessionVisibleDir('pids'), 'targets');
    writeFileSync(pidFile, targets.join('\n'));
    onTestFinished(() => rmSync(pidFile, { force: true }));
    const killer = await spawnBeating(system, 'killer-1', { metadata: { pidFile } });
    const said = await outputUntil(system, 'killer-1', killer.sessionId, (line) => line.startsWith('environments'));
    // It could see no environment of the host's (REDIS_URL is the host's, never a session's).
    expect(said.find((line) => line.startsWith('environments'))).toBe('environments with REDIS_URL seen: 0');
    for (const pid of targets) expect(said).toContain(`could not kill ${pid}`);
    expect(targets.every(alive)).toBe(true);
    const before = beats(system, 'bystander-kill', neighbour.fence).length;
    await until(() => beats(system, 'bystander-kill', neighbour.fence).length > before + 5, 2000, 'neighbour beats on');
    await system.client.stopSession('killer-1');
    await system.client.stopSession('bystander-kill');
    expect((await system.ended('bystander-kill', neighbour.sessionId)).state).toBe('stopped');
  });

  it('SESSION_MEMORY_MB=64: a session taking 400 MB ends failed, out_of_memory; SESSION_PIDS_MAX=32: a fork bomb never has more than 32 processes, and a stop leaves none', async () => {
    const { system, host } = await hostOf('host-caps', {
      SLOTS: '3',
      SESSION_MEMORY_MB: '64',
      SESSION_PIDS_MAX: '32',
    });
    await host.waitForLog((l) => String(l['msg']).startsWith('session containment') && l['memoryMb'] === 64);
    const neighbour = await spawnBeating(system, 'bystander-caps');
    const { token } = await system.client.issueToken({ userId: 'memory-1' });
    const hungry = await system.client.spawn(token);
    const ended = await system.ended('memory-1', hungry.sessionId);
    expect(ended).toMatchObject({ state: 'failed', exitCode: 137, reason: 'out_of_memory' });

    const bomb = await spawnBeating(system, 'forkbomb-1');
    let most = 0;
    const startedAt = Date.now();
    await until(
      () => {
        most = Math.max(most, sessionPids('forkbomb-1', bomb.fence).length);
        return Date.now() - startedAt > 3000;
      },
      6000,
      '3 s of fork bomb',
    );
    console.info(`fork bomb: at most ${most} processes seen`);
    // It ran into its cap (its forks were refused, as its shell said) and never went over it.
    expect(most).toBeGreaterThanOrEqual(10);
    expect(most).toBeLessThanOrEqual(32);
    expect(
      (await allLines(system.client, 'forkbomb-1', bomb.sessionId)).some((l) =>
        /fork|Resource temporarily/i.test(l.line),
      ),
    ).toBe(true);
    await system.client.stopSession('forkbomb-1');
    expect((await system.ended('forkbomb-1', bomb.sessionId)).state).toBe('stopped');
    await until(() => sessionPids('forkbomb-1', bomb.fence).length === 0, 2000, 'no process of the bomb left');
    // The neighbour ran on throughout.
    const own = beats(system, 'bystander-caps', neighbour.fence).sort((a, b) => a - b);
    expect(Math.max(...own.slice(1).map((at, i) => at - own[i]!))).toBeLessThan(3000);
    expect(own.at(-1)!).toBeGreaterThan(Date.now() - 1000);
  }, 60_000);
});

describe('a host that cannot contain as asked', () => {
  it('SESSION_CONTAINMENT=namespace without unshare on the PATH: exits 1 with a line naming what is missing', async () => {
    const host = startNode(`${ROOT}apps/worker/dist/main.js`, {
      SESSION_CONTAINMENT: 'namespace',
      PATH: '/nonexistent',
      REDIS_URL: 'redis://127.0.0.1:1',
    });
    const { code } = await host.exited();
    expect(code).toBe(1);
    expect(host.stderr.join('')).toBe(
      "SESSION_CONTAINMENT is namespace but this host cannot make one: util-linux's unshare is not on the PATH\n",
    );
  });

  it('auto without unshare: starts with process groups, warns what it cannot catch, and says so in GET /v1/hosts', async () => {
    const system = await startSystem({ workers: 0 });
    const host = await system.addWorker('host-nounshare', { PATH: '/nonexistent' });
    const line = await host.waitForLog((l) => String(l['msg']).startsWith('session containment'));
    expect(line).toMatchObject({
      level: 40,
      containment: 'group',
      namespaceUnavailable: "util-linux's unshare is not on the PATH",
    });
    expect(String(line['msg'])).toContain('a process that leaves its group (setsid, a daemon) is not caught');
    expect((await system.client.hosts()).hosts.find((h) => h.workerId === 'host-nounshare')).toMatchObject({
      containment: 'group',
    });
  });
});

describe('SESSION_USER', () => {
  it.each(['namespace', 'group'] as const)(
    'with %s containment, sessions run as that user and cannot kill the host or its runtime',
    async (containment) => {
      const system = await startSystem({ workers: 0 });
      // The observer file is the test's; the sessions, now nobody, must be able to write it.
      chmodSync(dirname(system.observerFile), 0o777);
      // So must it read its program: a clone may sit in a directory only root can enter (mktemp -d).
      const script = join(dirname(system.observerFile), 'hostile-session.sh');
      copyFileSync(`${ROOT}test/support/hostile-session.sh`, script);
      chmodSync(script, 0o755);
      const host = await system.addWorker(`host-user-${containment}`, {
        SESSION_COMMAND: `exec /bin/sh ${script} ${system.observerFile}`,
        SESSION_USER: 'nobody',
        SESSION_CONTAINMENT: containment,
      });
      const started = await host.waitForLog((l) => String(l['msg']).startsWith('session containment'));
      expect(started).toMatchObject({ containment, sessionUser: 'nobody' });
      const runtimePid = await runtimePidOf(host);
      const pidFile = join(sessionVisibleDir('pids'), containment);
      writeFileSync(pidFile, [host.child.pid!, runtimePid].join('\n'));
      onTestFinished(() => rmSync(pidFile, { force: true }));
      const killer = await spawnBeating(system, 'killer-user', { metadata: { pidFile } });
      const uids = sessionPids('killer-user', killer.fence).flatMap((pid) => {
        const comm = procFile(pid, 'comm')?.trim();
        const uid = /^Uid:\s+(\d+)/m.exec(procFile(pid, 'status') ?? '')?.[1];
        return comm === undefined || uid === undefined || ['unshare', 'setpriv', 'bwrap'].includes(comm) ? [] : [uid];
      });
      // The session's init (namespace) stays root, out of the session's reach; everything the session runs is nobody.
      expect(uids).toContain('65534');
      const said = await outputUntil(system, 'killer-user', killer.sessionId, (line) =>
        line.startsWith('environments'),
      );
      expect(alive(host.child.pid!)).toBe(true);
      expect(alive(runtimePid)).toBe(true);
      expect(said).toEqual(
        expect.arrayContaining([`could not kill ${host.child.pid}`, `could not kill ${runtimePid}`]),
      );
      await system.client.stopSession('killer-user');
      expect((await system.ended('killer-user', killer.sessionId)).state).toBe('stopped');
    },
  );
});
