// The cgroup layouts on a directory of the test's own standing in for /sys/fs/cgroup (what the kernel
// enforces is tested on the real v1 hierarchy by test/e2e/containment.test.ts and test/e2e/cpu-cap.test.ts).
import { existsSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { prepareCgroups, createCgroup, oomKills, procsFiles } from './cgroups.js';
import { cleanUp } from '@cq/test-harness';
import { ConfigError } from '@cq/service-kit';

const roots: string[] = [];
cleanUp(() => roots.forEach((root) => rmSync(root, { recursive: true, force: true })));

function fakeRoot(files: Record<string, string>): string {
  const root = mkdtempSync(join(tmpdir(), 'cq-cgroupfs-'));
  roots.push(root);
  for (const [path, content] of Object.entries(files)) {
    mkdirSync(join(root, path, '..'), { recursive: true });
    writeFileSync(join(root, path), content);
  }
  return root;
}

describe('cgroup v1', () => {
  it("puts sessions under the host's own cgroup of each controller, with the caps, and counts memory kills", () => {
    const root = fakeRoot({ 'memory/cgroup.procs': '', 'pids/cgroup.procs': '', self: '' });
    const self = join(root, 'self');
    writeFileSync(self, '9:pids:/\n4:memory:/svc/worker\n0::/\n');
    mkdirSync(join(root, 'memory/svc/worker'), { recursive: true });
    const layout = prepareCgroups({ memoryMb: 64, pidsMax: 32 }, { root, self, pid: 42 })!;
    expect(layout.version).toBe(1);
    const spec = layout.specFor('session-a');
    expect(spec.dirs.map((d) => d.path)).toEqual([
      join(root, 'memory/svc/worker/cq-worker-42/session-a'),
      join(root, 'pids/cq-worker-42/session-a'),
    ]);
    expect(procsFiles(spec)).toEqual(spec.dirs.map((d) => join(d.path, 'cgroup.procs')));
    createCgroup(spec);
    expect(readFileSync(join(spec.dirs[0]!.path, 'memory.limit_in_bytes'), 'utf8')).toBe(String(64 * 2 ** 20));
    expect(readFileSync(join(spec.dirs[1]!.path, 'pids.max'), 'utf8')).toBe('32');
    writeFileSync(spec.oomFile!, 'oom_kill_disable 0\nunder_oom 0\noom_kill 2\n');
    expect(oomKills(spec)).toBe(2);
  });

  it('refuses a cap whose controller is not there, naming it', () => {
    const root = fakeRoot({ 'pids/cgroup.procs': '', self: '8:pids:/\n' });
    expect(() => prepareCgroups({ memoryMb: 64 }, { root, self: join(root, 'self') })).toThrow(
      `the cgroup v1 memory controller is not mounted at ${join(root, 'memory')}`,
    );
  });

  it('SESSION_CPUS: a CFS quota of that many 100 ms periods in the cpu hierarchy (mounted with cpuacct)', () => {
    const root = fakeRoot({ 'cpu/cgroup.procs': '', self: '' });
    const self = join(root, 'self');
    writeFileSync(self, '3:cpu,cpuacct:/svc\n0::/\n');
    const layout = prepareCgroups({ cpus: 0.25 }, { root, self, pid: 42 })!;
    const spec = layout.specFor('session-a');
    expect(spec.dirs).toEqual([
      {
        path: join(root, 'cpu/svc/cq-worker-42/session-a'),
        files: [
          ['cpu.cfs_period_us', '100000'],
          ['cpu.cfs_quota_us', '25000'],
        ],
      },
    ]);
    expect(spec.oomFile).toBeUndefined();
    createCgroup(spec);
    expect(readFileSync(join(spec.dirs[0]!.path, 'cpu.cfs_quota_us'), 'utf8')).toBe('25000');
    expect(prepareCgroups({ cpus: 2 }, { root, self, pid: 43 })!.specFor('s').dirs[0]!.files).toContainEqual([
      'cpu.cfs_quota_us',
      '200000',
    ]);
  });

  it('refuses SESSION_CPUS without the cpu controller: one line naming the variable, why, and the fix', () => {
    const root = fakeRoot({ 'pids/cgroup.procs': '', self: '8:pids:/\n' });
    expect(() => prepareCgroups({ cpus: 0.5 }, { root, self: join(root, 'self') })).toThrow(
      new ConfigError(
        `SESSION_CPUS cannot be enforced on this host: the cgroup v1 cpu controller is not mounted at ${join(root, 'cpu')}; unset it or give the host cgroups`,
      ),
    );
    expect(() => prepareCgroups({ pidsMax: 8, memoryMb: 64, cpus: 0.5 }, { root, self: join(root, 'self') })).toThrow(
      /^SESSION_MEMORY_MB, SESSION_PIDS_MAX and SESSION_CPUS cannot be enforced on this host: /,
    );
  });

  it('no caps: no cgroups at all', () => {
    expect(prepareCgroups({})).toBeUndefined();
  });

  it('removes what hosts that died left behind, and leaves a live host’s alone', () => {
    const root = fakeRoot({ 'pids/cgroup.procs': '', self: '8:pids:/\n' });
    mkdirSync(join(root, 'pids/cq-worker-999999999/session-old'), { recursive: true });
    mkdirSync(join(root, `pids/cq-worker-${process.pid}`), { recursive: true });
    prepareCgroups({ pidsMax: 8 }, { root, self: join(root, 'self'), pid: 7 });
    const left = readdirSync(join(root, 'pids')).filter((e) => e.startsWith('cq-worker-'));
    expect(left.sort()).toEqual([`cq-worker-${process.pid}`, 'cq-worker-7'].sort());
  });
});

describe('cgroup v2', () => {
  it('refuses controllers not delegated to the host, saying how to delegate them', () => {
    const root = fakeRoot({ 'cgroup.controllers': 'cpu io', 'svc/cgroup.controllers': 'cpu', self: '0::/svc\n' });
    expect(() => prepareCgroups({ memoryMb: 64 }, { root, self: join(root, 'self') })).toThrow(
      /controller\(s\) memory not delegated to this host's cgroup .*systemd Delegate=yes/,
    );
  });

  it("moves the host's processes into a leaf, hands memory and pids to the sessions, one cgroup each", () => {
    const root = fakeRoot({
      'cgroup.controllers': 'cpu memory pids',
      'svc/cgroup.controllers': 'memory pids',
      'svc/cgroup.subtree_control': '',
      'svc/cgroup.procs': '100\n101\n',
      'svc/memory.swap.max': 'max',
      self: '0::/svc\n',
    });
    const layout = prepareCgroups({ memoryMb: 64, pidsMax: 32 }, { root, self: join(root, 'self'), pid: 5 })!;
    expect(layout.version).toBe(2);
    // Every pid was written to the leaf (a real cgroupfs moves each; the fake keeps the last write).
    expect(existsSync(join(root, 'svc/cq-host/cgroup.procs'))).toBe(true);
    expect(readFileSync(join(root, 'svc/cgroup.subtree_control'), 'utf8')).toBe('+memory +pids');
    const spec = layout.specFor('s1');
    expect(spec.dirs).toEqual([
      {
        path: join(root, 'svc/cq-worker-5/s1'),
        files: [
          ['memory.max', String(64 * 2 ** 20)],
          ['memory.oom.group', '1'],
          ['memory.swap.max', '0'],
          ['pids.max', '32'],
        ],
      },
    ]);
    expect(spec.oomFile).toBe(join(root, 'svc/cq-worker-5/s1/memory.events'));
  });

  it('SESSION_CPUS: the cpu controller handed down, cpu.max of that many 100 ms periods', () => {
    const root = fakeRoot({
      'cgroup.controllers': 'cpu memory pids',
      'svc/cgroup.controllers': 'cpu pids',
      'svc/cgroup.subtree_control': '',
      'svc/cgroup.procs': '100\n',
      self: '0::/svc\n',
    });
    const layout = prepareCgroups({ cpus: 1.5 }, { root, self: join(root, 'self'), pid: 6 })!;
    expect(readFileSync(join(root, 'svc/cgroup.subtree_control'), 'utf8')).toBe('+cpu');
    expect(readFileSync(join(root, 'svc/cq-worker-6/cgroup.subtree_control'), 'utf8')).toBe('+cpu');
    expect(layout.specFor('s1').dirs).toEqual([
      { path: join(root, 'svc/cq-worker-6/s1'), files: [['cpu.max', '150000 100000']] },
    ]);
  });

  it('refuses SESSION_CPUS where cpu is not delegated, naming the variable and the fix', () => {
    const root = fakeRoot({ 'cgroup.controllers': 'cpu pids', 'svc/cgroup.controllers': 'pids', self: '0::/svc\n' });
    expect(() => prepareCgroups({ cpus: 0.5 }, { root, self: join(root, 'self') })).toThrow(
      /^SESSION_CPUS cannot be enforced on this host: cgroup v2 controller\(s\) cpu not delegated .*; unset it or give the host cgroups$/,
    );
  });
});
