// How a worker host keeps every process of a session inside the session, worked out once at start.
//
// `namespace`: each session runs in a PID namespace of its own (util-linux `unshare`, on every Linux
// machine), with its own /proc. A small init (a POSIX shell, PID 1 of the namespace) starts the
// session's command (with SIGINT and SIGQUIT at their defaults, as in `group` mode: see {@link INIT}),
// passes SIGTERM and SIGINT on to every process of the namespace (PID 1 ignores signals it has no
// handler for, the reason tini exists), reaps what is left to it, and exits with the command's status
// when the command exits. When PID 1 ends, the kernel kills every process of the
// namespace, daemons included. The session sees and can signal only its own processes.
// `group`: the session leads a process group of its own; a process that leaves it (setsid, a daemon)
// is not caught.
// Worked out in two steps: `probeContainment` finds out what this host can do and changes nothing;
// `prepareCgroups` (cgroups.ts) makes the cgroups the caps need, at the host's start.
// Both: the first process of a session has a parent-death signal (SIGKILL when the runtime dies; `unshare
// --kill-child` passes it on to the namespace's init), raises its OOM score to the most (the kernel then
// picks a session, never the host, when the machine runs out of memory), enters the session's cgroups
// when there are caps, and, with SESSION_USER, runs the command as that user.
import { spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ConfigError } from '@cq/service-kit';
import { procsFiles, type CgroupSpec } from './cgroups.js';
import { hostAddresses, hostDir, isolationArgv, type IsolationPlan, type SessionNetwork } from './isolation.js';

/** How a host contains its sessions (the contract's `containment`). */
export type Containment = 'namespace' | 'group';

/** The system user sessions run as. */
export interface SessionUser {
  readonly name: string;
  readonly uid: number;
  readonly gid: number;
  readonly home: string;
}

/** What a host does for each session, worked out at start. */
export interface ContainmentPlan {
  readonly mode: Containment;
  readonly user: SessionUser | undefined;
  /** util-linux's setpriv is there: sessions get a parent-death signal. */
  readonly pdeathsig: boolean;
  /** The session's network, and whether its files are its own (isolation.ts). */
  readonly isolation: IsolationPlan;
  /** The whole program of one session whose SESSION_DIR is `dir`: the wrappers, then `command`. */
  argv(command: readonly string[], cgroup: CgroupSpec | undefined, dir: string): string[];
  /**
   * The program that runs `command` inside a running session (exec/): in its cgroups, its namespaces
   * (those of process `inside`, a process in its PID namespace; none with `group`), as its user with no
   * capability, in `cwd` (as the session sees its files), with exactly `env`. Undefined when this host
   * cannot (no setpriv: it could not drop the host's privileges).
   */
  execArgv(inside: ExecPlace, command: readonly string[], env: Readonly<Record<string, string>>): string[] | undefined;
}

/** Where a command runs inside a session. */
export interface ExecPlace {
  /** A process in the session's PID namespace (as this machine numbers it); undefined with `group`. */
  readonly pid: number | undefined;
  /** The session's user namespace is not the host's (a host that is not root): enter it too. */
  readonly userNamespace: boolean;
  /** The `cgroup.procs` files of the session's cgroups. */
  readonly procs: readonly string[];
  /** The working directory, as the session sees its files. */
  readonly cwd: string;
}

/** Signals a command run inside a session gets at their defaults, whatever its host ignores. */
const EXEC_SIGNALS = 'HUP,TERM,INT,QUIT';

/** What the host asked for. */
export interface ContainmentRequest {
  readonly containment: 'auto' | 'namespace' | 'group';
  readonly memoryMb: number | undefined;
  readonly pidsMax: number | undefined;
  readonly user: string | undefined;
  readonly network: 'auto' | SessionNetwork;
  /** Size of a session's /tmp and /dev/shm, MiB. */
  readonly tmpMb: number;
  readonly sessionsDir: string;
}

/** The plan, and why `auto` fell back to `group` or to the host's network (undefined when it did not). */
export interface PlannedContainment {
  readonly plan: ContainmentPlan;
  readonly fallback: string | undefined;
  /** Why the session's files or network are not its own (bubblewrap is missing or cannot run here). */
  readonly isolationMissing: string | undefined;
}

/**
 * The first process of a session (as root, before anything of the session runs): the highest OOM score,
 * its cgroups (each `cgroup.procs` given before `--`), then the rest of the argv.
 */
const ENTER = [
  'echo 1000 > /proc/self/oom_score_adj 2>/dev/null',
  'for f; do shift; [ "$f" = -- ] && break; echo 0 > "$f" || { echo "cq: cannot enter cgroup $f" >&2; exit 126; }; done',
  'exec "$@"',
].join('; ');

/**
 * PID 1 of a session's namespace: enters the session's cgroups and raises its OOM score as {@link ENTER}
 * does (one process fewer per session than a separate step), starts the command, passes
 * SIGTERM/SIGINT/SIGHUP on to every other process of the namespace (`kill -1` from PID 1), and exits
 * with the command's status once it has exited. A trapped signal interrupts `wait` (which then answers
 * 128 + the signal, even when the command has just exited): after a trap it waits again, and that wait
 * answers the command's own status. The command is an asynchronous list, which a non-interactive shell starts with SIGINT
 * and SIGQUIT ignored (POSIX; dash even makes them untrappable), and an ignored signal stays ignored
 * across exec: `env --default-signal` (coreutils 8.31 or later, probed at start) puts them back to their
 * defaults, so a session gets the dispositions `group` mode gives it.
 */
const INIT = [
  'echo 1000 > /proc/self/oom_score_adj 2>/dev/null',
  'for f; do shift; [ "$f" = -- ] && break; echo 0 > "$f" || { echo "cq: cannot enter cgroup $f" >&2; exit 126; }; done',
  'trap "trapped=1; kill -TERM -1 2>/dev/null" TERM',
  'trap "trapped=1; kill -INT -1 2>/dev/null" INT',
  'trap "trapped=1; kill -HUP -1 2>/dev/null" HUP',
  'env --default-signal=INT,QUIT "$@" &',
  'main=$!',
  'code=',
  'while :; do',
  '  trapped=',
  '  wait "$main"; status=$?',
  // Waiting again for a command already collected answers 127 (bash): the status before was its own.
  '  [ "$status" = 127 ] && [ -n "$code" ] && break',
  '  code=$status',
  '  [ -z "$trapped" ] && break',
  'done',
  'exit "$code"',
].join('\n');

/** How a test or a host without the real tools answers the probes. */
export interface Probe {
  /** Runs a command, answering its exit status (null when it could not start) and what it printed. */
  run(argv: readonly string[]): { status: number | null; stdout: string; stderr: string; error?: string };
  /** The host's uid. */
  readonly uid: number;
}

const realProbe: Probe = {
  run(argv) {
    const result = spawnSync(argv[0]!, argv.slice(1), { stdio: ['ignore', 'pipe', 'pipe'], timeout: 5000 });
    return {
      status: result.status,
      stdout: result.stdout?.toString() ?? '',
      stderr: result.stderr?.toString() ?? '',
      ...(result.error === undefined
        ? {}
        : { error: (result.error as NodeJS.ErrnoException).code ?? result.error.message }),
    };
  },
  uid: process.getuid?.() ?? 0,
};

/** The unshare options of a session's namespace on this host (a user namespace too, when not root). */
function unshareArgs(uid: number): string[] {
  return [
    'unshare',
    ...(uid === 0 ? [] : ['--user', '--map-current-user']),
    '--pid',
    '--fork',
    '--mount-proc',
    '--kill-child',
    '--',
  ];
}

/** Why this host cannot make a session namespace (or start a session in one as {@link INIT} does), or undefined when it can. */
function namespaceMissing(probe: Probe): string | undefined {
  const result = probe.run([...unshareArgs(probe.uid), 'true']);
  if (result.status !== 0) {
    if (result.error === 'ENOENT') return "util-linux's unshare is not on the PATH";
    const said = result.stderr.trim().split('\n')[0];
    const how = probe.uid === 0 ? 'a PID namespace' : 'a user and PID namespace (unprivileged user namespaces)';
    return `unshare could not make ${how}${said === undefined || said === '' ? '' : `: ${said}`}`;
  }
  if (probe.run(['env', '--default-signal=INT,QUIT', 'true']).status !== 0)
    return (
      'env cannot reset signals (--default-signal needs coreutils 8.31 or later): ' +
      'sessions would start with SIGINT and SIGQUIT ignored'
    );
  return undefined;
}

/** The passwd entry of `user` (name or uid). */
function lookUpUser(user: string, probe: Probe): SessionUser {
  const result = probe.run(['getent', 'passwd', user]);
  const fields = result.status === 0 ? result.stdout.trim().split(':') : [];
  if (fields.length < 6)
    throw new ConfigError(`SESSION_USER "${user}" is not a user of this system (getent passwd ${user})`);
  return { name: fields[0]!, uid: Number(fields[2]), gid: Number(fields[3]), home: fields[5]! };
}

/**
 * Finds out how this host can contain its sessions, changing nothing (it runs `setpriv`, `unshare` and
 * `env` once each to see whether they work, and looks up SESSION_USER). Throws a {@link ConfigError}
 * whose message is one line naming what is missing and the variable to change: `namespace` where no
 * namespace can be made, SESSION_USER without root or without setpriv. Whether the caps can be enforced
 * is found out by `prepareCgroups` (cgroups.ts), which makes their cgroups.
 */
export function probeContainment(request: ContainmentRequest, probe: Probe = realProbe): PlannedContainment {
  const pdeathsig = probe.run(['setpriv', '--pdeathsig', 'KILL', '--', 'true']).status === 0;
  let mode: Containment = 'group';
  let fallback: string | undefined;
  if (request.containment !== 'group') {
    const missing = namespaceMissing(probe);
    if (missing === undefined) mode = 'namespace';
    else if (request.containment === 'namespace')
      throw new ConfigError(`SESSION_CONTAINMENT is namespace but this host cannot make one: ${missing}`);
    else fallback = missing;
  }
  let user: SessionUser | undefined;
  if (request.user !== undefined) {
    if (probe.uid !== 0)
      throw new ConfigError(`SESSION_USER needs the worker host to run as root (it runs as uid ${probe.uid})`);
    if (!pdeathsig) throw new ConfigError("SESSION_USER needs util-linux's setpriv on the PATH");
    user = lookUpUser(request.user, probe);
  }
  const base: IsolationPlan = {
    network: 'host',
    privateFiles: false,
    tmpBytes: request.tmpMb * 1024 * 1024,
    sessionsDir: request.sessionsDir,
    hostAddresses: [],
    resolvConf: undefined,
  };
  const isolationMissing =
    mode === 'namespace'
      ? bubblewrapMissing(probe, base, user !== undefined)
      : `sessions get no namespaces (${fallback ?? 'SESSION_CONTAINMENT=group'})`;
  const network = isolationMissing === undefined ? chooseNetwork(request.network, probe) : 'host';
  if (network === 'host' && (request.network === 'none' || request.network === 'egress'))
    throw new ConfigError(
      `SESSION_NETWORK is ${request.network} but this host cannot give a session a network of its own: ` +
        `${isolationMissing!}; set SESSION_NETWORK=host to run sessions on the host's network`,
    );
  const isolation: IsolationPlan = {
    ...base,
    network,
    privateFiles: isolationMissing === undefined,
    hostAddresses: network === 'egress' ? hostAddresses() : [],
    resolvConf: network === 'egress' ? join(hostDir(request.sessionsDir), 'resolv.conf') : undefined,
  };
  return { plan: containmentPlan(mode, user, pdeathsig, probe.uid, isolation), fallback, isolationMissing };
}

/** What `SESSION_NETWORK` gives on a host where bubblewrap works: `egress` needs slirp4netns and ip too. */
function chooseNetwork(asked: ContainmentRequest['network'], probe: Probe): SessionNetwork {
  if (asked === 'auto') return 'none';
  if (asked !== 'egress') return asked;
  for (const [tool, argv, from] of [
    ['slirp4netns', ['slirp4netns', '--version'], 'Debian package slirp4netns'],
    ['ip', ['ip', '-V'], 'iproute2'],
  ] as const)
    if (probe.run(argv).status !== 0)
      throw new ConfigError(`SESSION_NETWORK is egress but ${tool} is not on the PATH (install ${from})`);
  return 'egress';
}

/**
 * Why bubblewrap cannot make a session's namespaces and mounts here (it is missing, or the kernel
 * refuses), or undefined when it can: it runs `true` in the sandbox a session would get, network
 * namespace included, on a directory of its own.
 */
function bubblewrapMissing(probe: Probe, plan: IsolationPlan, setuid: boolean): string | undefined {
  // SESSIONS_DIR must exist before a sandbox mounts on it (the host's filesystem is read-only there): the
  // one thing this probe makes, and the host needs it anyway.
  try {
    mkdirSync(plan.sessionsDir, { recursive: true, mode: 0o711 });
  } catch (err) {
    throw new ConfigError(`SESSIONS_DIR ${plan.sessionsDir} cannot be made: ${(err as Error).message}`, { cause: err });
  }
  const dir = mkdtempSync(join(tmpdir(), 'cq-probe-'));
  try {
    // From bwrap on: the env before it is the one probed for --default-signal.
    const argv = isolationArgv({ ...plan, network: 'none' }, dir, probe.uid, setuid);
    const result = probe.run([...argv.slice(argv.indexOf('bwrap')), 'true']);
    if (result.status === 0) return undefined;
    if (result.error === 'ENOENT') return 'bubblewrap (bwrap) is not on the PATH (install Debian package bubblewrap)';
    const said = result.stderr.trim().split('\n')[0];
    return `bwrap could not make a session's namespaces${said === undefined || said === '' ? '' : `: ${said}`}`;
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

/** Sessions in process groups of their own, as the host's user, without a parent-death signal: needs no probe. */
export const PROCESS_GROUPS: ContainmentPlan = containmentPlan('group', undefined, false, 0, {
  network: 'host',
  privateFiles: false,
  tmpBytes: 0,
  sessionsDir: join(tmpdir(), 'cq-sessions'),
  hostAddresses: [],
  resolvConf: undefined,
});

/** The plan for what the probes found (builds the argv; runs nothing). */
function containmentPlan(
  mode: Containment,
  user: SessionUser | undefined,
  pdeathsig: boolean,
  uid: number,
  isolation: IsolationPlan,
): ContainmentPlan {
  const setuid = (withDeathSignal: boolean): string[] =>
    user === undefined
      ? []
      : [
          'setpriv',
          `--reuid=${user.uid}`,
          `--regid=${user.gid}`,
          '--init-groups',
          // A change of user clears the parent-death signal: set it again after it.
          ...(withDeathSignal ? ['--pdeathsig', 'KILL'] : []),
          '--',
        ];
  return {
    mode,
    user,
    pdeathsig,
    isolation,
    execArgv(inside, command, env) {
      if (!pdeathsig) return undefined;
      const enter = inside.procs.length === 0 ? [] : ['/bin/sh', '-c', ENTER, 'cq-enter', ...inside.procs, '--'];
      // The command's own process: the session's user (or root without a single capability), its
      // parent-death signal set after the change of user (which clears it), no new privileges.
      const drop = [
        'setpriv',
        ...(user === undefined ? [] : [`--reuid=${user.uid}`, `--regid=${user.gid}`, '--init-groups']),
        '--inh-caps=-all',
        '--bounding-set=-all',
        '--no-new-privs',
        '--pdeathsig',
        'KILL',
        '--',
        'env',
        `--default-signal=${EXEC_SIGNALS}`,
        '-i',
        // As the session's user, in its mount namespace: a directory it may not enter fails as it would.
        `--chdir=${inside.cwd}`,
        ...Object.entries(env).map(([name, value]) => `${name}=${value}`),
        // env takes a first word with `=` in it for one more variable: such a program goes through a shell's exec.
        ...(command[0]?.includes('=') === true ? ['/bin/sh', '-c', 'exec "$@"', 'cq-exec'] : []),
        ...command,
      ];
      const enterNamespaces =
        mode === 'group' || inside.pid === undefined
          ? []
          : [
              // nsenter waits for the command and dies of the signal that killed it (its status is the
              // command's); the host hangs a command up past it (session-exec.ts).
              'nsenter',
              `--target=${inside.pid}`,
              ...(inside.userNamespace ? ['--user', '--preserve-credentials'] : []),
              '--pid',
              '--mount',
              '--ipc',
              '--uts',
              '--net',
              // No --wd: nsenter would open it before entering, a directory outside the session's root.
              // Entering its mount namespace makes the session's root the command's root and directory.
              '--',
            ];
      // The first process dies with the host; the command with nsenter (its parent), each by its own signal.
      return ['setpriv', '--pdeathsig', 'KILL', '--', ...enter, ...enterNamespaces, ...drop];
    },
    argv(command, cgroup, dir) {
      const deathSignal = pdeathsig ? ['setpriv', '--pdeathsig', 'KILL', '--'] : [];
      const procs = cgroup === undefined ? [] : procsFiles(cgroup);
      if (mode === 'group')
        return [...deathSignal, '/bin/sh', '-c', ENTER, 'cq-enter', ...procs, '--', ...setuid(true), ...command];
      if (isolation.privateFiles)
        // The cgroups are entered before bwrap (inside, /sys is read-only); bwrap's namespaces, then
        // the init as PID 1 of them, as below.
        return [
          ...deathSignal,
          ...(procs.length === 0 ? [] : ['/bin/sh', '-c', ENTER, 'cq-enter', ...procs, '--']),
          ...isolationArgv(isolation, dir, uid, user !== undefined),
          '/bin/sh',
          '-c',
          INIT,
          'cq-init',
          '--',
          ...setuid(false),
          ...command,
        ];
      // unshare stays outside the session's cgroups: its init and everything under it are inside.
      return [
        ...deathSignal,
        ...unshareArgs(uid),
        '/bin/sh',
        '-c',
        INIT,
        'cq-init',
        ...procs,
        '--',
        ...setuid(false),
        ...command,
      ];
    },
  };
}
