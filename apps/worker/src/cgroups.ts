// Session caps through cgroups, v1 (a hierarchy per controller under /sys/fs/cgroup/<controller>) and
// v2 (one unified hierarchy, the host's cgroup delegated to it). At start, the host prepares where its
// sessions' cgroups go and proves that it can make one with the caps (else it refuses to start); the
// session runtime makes each session's cgroup before the session starts, reads its memory-kill count when
// it ends, kills what is left in it and removes it. A session enters its cgroup(s) itself, before it
// runs anything of its own: the first process of the session writes 0 (itself) to each `cgroup.procs`.
import { existsSync, mkdirSync, readFileSync, readdirSync, rmdirSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { ConfigError } from '@cq/service-kit';

/** The caps of one session. */
export interface SessionCaps {
  /** Memory of all its processes together, MiB. */
  readonly memoryMb?: number | undefined;
  /** Processes and threads at once. */
  readonly pidsMax?: number | undefined;
  /** CPU time of all its processes together, in CPUs (0.5: half a second of CPU time per second). */
  readonly cpus?: number | undefined;
}

/**
 * The CFS bandwidth period, microseconds: the kernel's default, so the cap holds over each 100 ms (a
 * session may use `cpus` × 100 ms of CPU time in each, then waits for the next).
 */
const CPU_PERIOD_US = 100_000;

/** The CFS quota per period for `cpus` CPUs, microseconds. */
function cpuQuotaUs(cpus: number): number {
  return Math.round(cpus * CPU_PERIOD_US);
}

/** One session's cgroup(s), as plain data: it crosses the IPC channel from the host to the runtime. */
export interface CgroupSpec {
  readonly version: 1 | 2;
  /** The cgroup directories (one per controller on v1, one on v2), each with the files written once it is made. */
  readonly dirs: ReadonlyArray<{ readonly path: string; readonly files: ReadonlyArray<readonly [string, string]> }>;
  /** Whose `oom_kill` line counts the session's memory kills (v1 memory.oom_control, v2 memory.events). */
  readonly oomFile?: string;
}

/** The `cgroup.procs` files a session's first process writes 0 to, to enter its cgroup(s). */
export function procsFiles(spec: CgroupSpec): string[] {
  return spec.dirs.map((dir) => join(dir.path, 'cgroup.procs'));
}

/** Makes the session's cgroup(s) with their caps. Throws (with the path) when the kernel refuses. */
export function createCgroup(spec: CgroupSpec): void {
  for (const dir of spec.dirs) {
    mkdirSync(dir.path, { recursive: true });
    for (const [file, value] of dir.files) writeFileSync(join(dir.path, file), value);
  }
}

/** How many of the session's processes the kernel killed for its memory cap (0 without one). */
export function oomKills(spec: CgroupSpec): number {
  if (spec.oomFile === undefined) return 0;
  try {
    const match = /^oom_kill (\d+)$/m.exec(readFileSync(spec.oomFile, 'utf8'));
    return match === null ? 0 : Number(match[1]);
  } catch {
    return 0;
  }
}

/** The pids still in the session's cgroup(s). */
function members(spec: CgroupSpec): number[] {
  const pids = new Set<number>();
  for (const file of procsFiles(spec)) {
    try {
      for (const line of readFileSync(file, 'utf8').split('\n')) if (line !== '') pids.add(Number(line));
    } catch {
      // not made, or removed already
    }
  }
  return [...pids];
}

/**
 * SIGKILLs every process left in the session's cgroup(s) (v2: `cgroup.kill`, which also catches one
 * forking meanwhile) and removes them. True once they are gone; false while a process is still being
 * killed (call again a little later).
 */
export function removeCgroup(spec: CgroupSpec): boolean {
  for (const dir of spec.dirs) {
    const kill = join(dir.path, 'cgroup.kill');
    if (spec.version === 2 && existsSync(kill)) {
      try {
        writeFileSync(kill, '1');
      } catch {
        // gone already
      }
    }
  }
  for (const pid of members(spec)) {
    try {
      process.kill(pid, 'SIGKILL');
    } catch {
      // exited meanwhile
    }
  }
  let removed = true;
  for (const dir of spec.dirs) {
    try {
      rmdirSync(dir.path);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'ENOENT') removed = false;
    }
  }
  return removed;
}

/** Where a host's sessions' cgroups go, worked out once at start. */
export interface CgroupLayout {
  readonly version: 1 | 2;
  /** The spec of one session's cgroup(s); `name` is unique among the host's sessions. */
  specFor(name: string): CgroupSpec;
  /** Removes the host's own parent cgroups, once its sessions are gone (best effort). */
  release(): void;
}

/** Where to look: the real paths by default, a directory of the test's own in tests. */
export interface CgroupPaths {
  /** @defaultValue '/sys/fs/cgroup' */
  readonly root?: string;
  /** @defaultValue '/proc/self/cgroup' */
  readonly self?: string;
  /** The host's own pid, for the names of its cgroups. @defaultValue process.pid */
  readonly pid?: number;
}

/**
 * Makes the place for the sessions' cgroups with these caps, changing the machine: removes the cgroups
 * of this machine's hosts that died, makes the host's parent cgroup(s), on v2 moves the host's own
 * processes into a leaf and hands the controllers down (`cgroup.subtree_control`), and proves the caps
 * by making (and removing) a probe cgroup with them. Called once, at the host's start. Returns undefined
 * when no cap is set (sessions then get no cgroup); throws a {@link ConfigError} naming the variable and
 * what is missing when the caps cannot be enforced here.
 */
export function prepareCgroups(caps: SessionCaps, paths: CgroupPaths = {}): CgroupLayout | undefined {
  if (caps.memoryMb === undefined && caps.pidsMax === undefined && caps.cpus === undefined) return undefined;
  try {
    return makeLayout(caps, paths);
  } catch (err) {
    const names = [
      ...(caps.memoryMb === undefined ? [] : ['SESSION_MEMORY_MB']),
      ...(caps.pidsMax === undefined ? [] : ['SESSION_PIDS_MAX']),
      ...(caps.cpus === undefined ? [] : ['SESSION_CPUS']),
    ];
    const which = names.length === 1 ? names[0]! : `${names.slice(0, -1).join(', ')} and ${names.at(-1)!}`;
    throw new ConfigError(
      `${which} cannot be enforced on this host: ${(err as Error).message}; unset it or give the host cgroups`,
      { cause: err },
    );
  }
}

function makeLayout(caps: SessionCaps, paths: CgroupPaths): CgroupLayout {
  const root = paths.root ?? '/sys/fs/cgroup';
  const own = parseSelf(readFileSync(paths.self ?? '/proc/self/cgroup', 'utf8'));
  const tag = `cq-worker-${paths.pid ?? process.pid}`;
  const layout = existsSync(join(root, 'cgroup.controllers'))
    ? layoutV2(caps, root, own, tag)
    : layoutV1(caps, root, own, tag);
  const probe = layout.specFor('probe');
  try {
    createCgroup(probe);
  } catch (err) {
    layout.release();
    throw new Error(`could not make a cgroup with the caps (${(err as Error).message})`, { cause: err });
  }
  removeCgroup(probe);
  return layout;
}

/**
 * Removes the parent cgroups left by hosts of this machine that died (SIGKILL leaves them): each
 * `cq-worker-<pid>` beside `parent` whose pid no longer runs, with any empty session cgroup in it.
 */
function pruneDead(parent: string): void {
  const dir = dirname(parent);
  let entries: string[];
  try {
    entries = readdirSync(dir);
  } catch {
    return;
  }
  for (const entry of entries) {
    const match = /^cq-worker-(\d+)$/.exec(entry);
    if (match === null || join(dir, entry) === parent || running(Number(match[1]))) continue;
    try {
      for (const child of readdirSync(join(dir, entry), { withFileTypes: true }))
        if (child.isDirectory()) rmdirSync(join(dir, entry, child.name));
      rmdirSync(join(dir, entry));
    } catch {
      // a process still in it, or removed by another host meanwhile
    }
  }
}

/** Whether process `pid` runs (as this machine sees it; EPERM: it runs as another user). */
export function running(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/** `/proc/self/cgroup` as controller → path ('' for the v2 hierarchy). */
function parseSelf(text: string): Map<string, string> {
  const own = new Map<string, string>();
  for (const line of text.split('\n')) {
    const match = /^\d+:([^:]*):(.*)$/.exec(line);
    if (match === null) continue;
    for (const controller of match[1]!.split(',')) own.set(controller, match[2]!);
  }
  return own;
}

function layoutV1(caps: SessionCaps, root: string, own: Map<string, string>, tag: string): CgroupLayout {
  const controllers: Array<{ name: string; files: (dir: string) => Array<[string, string]> }> = [];
  if (caps.memoryMb !== undefined) {
    const bytes = String(caps.memoryMb * 1024 * 1024);
    controllers.push({
      name: 'memory',
      // With swap accounting, memory + swap is capped too (set after the memory cap: it may not be lower).
      files: (dir) => [
        ['memory.limit_in_bytes', bytes],
        ...(existsSync(join(dir, 'memory.memsw.limit_in_bytes'))
          ? [['memory.memsw.limit_in_bytes', bytes] as [string, string]]
          : []),
      ],
    });
  }
  if (caps.pidsMax !== undefined) controllers.push({ name: 'pids', files: () => [['pids.max', String(caps.pidsMax)]] });
  // The `cpu` hierarchy (often mounted together with cpuacct, as `cpu,cpuacct`, linked from `cpu`). The
  // period first: the kernel checks the quota against it. The host's parent cgroup keeps its quota
  // unlimited (-1), as v1 refuses a child a quota above its parent's.
  if (caps.cpus !== undefined) {
    const quota = String(cpuQuotaUs(caps.cpus));
    controllers.push({
      name: 'cpu',
      files: () => [
        ['cpu.cfs_period_us', String(CPU_PERIOD_US)],
        ['cpu.cfs_quota_us', quota],
      ],
    });
  }
  const parents = controllers.map((controller) => {
    const mount = join(root, controller.name);
    if (!existsSync(join(mount, 'cgroup.procs')))
      throw new Error(`the cgroup v1 ${controller.name} controller is not mounted at ${mount}`);
    const parent = join(mount, own.get(controller.name) ?? '/', tag);
    pruneDead(parent);
    return { ...controller, parent };
  });
  return {
    version: 1,
    specFor: (name) => ({
      version: 1,
      dirs: parents.map((p) => ({ path: join(p.parent, name), files: p.files(p.parent) })),
      ...(caps.memoryMb === undefined
        ? {}
        : { oomFile: join(parents.find((p) => p.name === 'memory')!.parent, name, 'memory.oom_control') }),
    }),
    release: () => {
      for (const p of parents) {
        try {
          rmdirSync(p.parent);
        } catch {
          // sessions still in it, or gone
        }
      }
    },
  };
}

/**
 * cgroup v2: the sessions' cgroups are children of the host's own cgroup, which must be delegated to it
 * (systemd `Delegate=yes`, or a container's own cgroup namespace). A cgroup that hands controllers to
 * its children may hold no process itself, so the host first moves the processes of its cgroup into a
 * leaf of their own (`cq-host`), as systemd's delegation documentation describes.
 */
function layoutV2(caps: SessionCaps, root: string, own: Map<string, string>, tag: string): CgroupLayout {
  const base = join(root, own.get('') ?? '/');
  const needed = [
    ...(caps.memoryMb === undefined ? [] : ['memory']),
    ...(caps.pidsMax === undefined ? [] : ['pids']),
    ...(caps.cpus === undefined ? [] : ['cpu']),
  ];
  const available = readFileSync(join(base, 'cgroup.controllers'), 'utf8').trim().split(/\s+/);
  const missing = needed.filter((c) => !available.includes(c));
  if (missing.length > 0)
    throw new Error(
      `cgroup v2 controller(s) ${missing.join(', ')} not delegated to this host's cgroup ${base} ` +
        '(run it with systemd Delegate=yes, or enable them in the parent cgroup.subtree_control)',
    );
  const enabled = readFileSync(join(base, 'cgroup.subtree_control'), 'utf8').trim().split(/\s+/);
  const toEnable = needed.filter((c) => !enabled.includes(c));
  if (toEnable.length > 0) {
    const leaf = join(base, 'cq-host');
    mkdirSync(leaf, { recursive: true });
    for (const pid of readFileSync(join(base, 'cgroup.procs'), 'utf8')
      .split('\n')
      .filter((l) => l !== ''))
      writeFileSync(join(leaf, 'cgroup.procs'), pid);
    writeFileSync(join(base, 'cgroup.subtree_control'), toEnable.map((c) => `+${c}`).join(' '));
  }
  const parent = join(base, tag);
  pruneDead(parent);
  mkdirSync(parent, { recursive: true });
  writeFileSync(join(parent, 'cgroup.subtree_control'), needed.map((c) => `+${c}`).join(' '));
  const files: Array<[string, string]> = [];
  if (caps.memoryMb !== undefined) {
    files.push(['memory.max', String(caps.memoryMb * 1024 * 1024)], ['memory.oom.group', '1']);
    if (existsSync(join(base, 'memory.swap.max'))) files.push(['memory.swap.max', '0']);
  }
  if (caps.pidsMax !== undefined) files.push(['pids.max', String(caps.pidsMax)]);
  if (caps.cpus !== undefined) files.push(['cpu.max', `${cpuQuotaUs(caps.cpus)} ${CPU_PERIOD_US}`]);
  return {
    version: 2,
    specFor: (name) => ({
      version: 2,
      dirs: [{ path: join(parent, name), files }],
      ...(caps.memoryMb === undefined ? {} : { oomFile: join(parent, name, 'memory.events') }),
    }),
    release: () => {
      try {
        rmdirSync(parent);
      } catch {
        // sessions still in it, or gone
      }
    },
  };
}
