// What a session sees of the host, besides its processes (containment.ts): its network, its files.
// Built from the kernel's tools made for it, no plumbing of our own:
//   - bubblewrap (`bwrap`, Flatpak's sandbox) makes the session's namespaces (PID, mount, IPC, UTS,
//     cgroup, and network unless `host`): the host's filesystem read-only (`--ro-bind / /`, root included:
//     every capability is dropped, so not even a remount), a fresh /proc and /dev, its own `/tmp` and
//     `/dev/shm` (tmpfs of SESSION_TMP_MB each), SESSIONS_DIR hidden, and its own SESSION_DIR bound
//     writable as its current directory. Its PID 1 is our init (`--as-pid-1`), as with `unshare`.
//   - `none`: the network namespace holds only loopback. No address outside it is reachable, abstract
//     unix sockets included; two sessions may listen on the same port.
//   - `egress`: slirp4netns (the user-mode network rootless Podman and Docker use) gives the namespace a
//     tap device whose traffic it sends out through its own sockets on the host. Before anything of the
//     session runs, a small step as root inside the new namespace makes every loopback, private,
//     link-local, shared, reserved and multicast range and each of the host's own addresses
//     unreachable (routes the session, without CAP_NET_ADMIN, cannot change); `--disable-host-loopback`
//     closes slirp's door to the host's 127.0.0.1. DNS goes to slirp's forwarder (10.0.2.3), which asks
//     the host's resolver. IPv6 is not configured: no IPv6 address outside is reachable.
//     (pasta, Podman's newer user-mode network, was measured first: Debian's build drops to `nobody` and
//     its capabilities as root, and then may not open a root-owned network namespace: "Couldn't open
//     network namespace /proc/<pid>/ns/net". slirp4netns runs as root, and says when it is ready.)
import { mkdirSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { networkInterfaces } from 'node:os';
import { dirname, join } from 'node:path';
import { running } from './cgroups.js';

/** What a session reaches on the network (the contract's `SESSION_NETWORK`, as resolved). */
export type SessionNetwork = 'none' | 'egress' | 'host';

/** What a host gives each session besides its process namespace, worked out at start. */
export interface IsolationPlan {
  readonly network: SessionNetwork;
  /** bwrap makes the session's mount namespace: its own /tmp, /dev/shm and SESSION_DIR, the rest read-only. */
  readonly privateFiles: boolean;
  /** Size of /tmp and of /dev/shm, bytes. */
  readonly tmpBytes: number;
  /** Where the hosts make the session directories (hidden inside every session). */
  readonly sessionsDir: string;
  /** The host's own addresses, refused to `egress` sessions. */
  readonly hostAddresses: readonly string[];
  /** With `egress`: the file bound on /etc/resolv.conf (slirp's DNS forwarder). */
  readonly resolvConf: string | undefined;
}

/**
 * IPv4 ranges an `egress` session may not reach (RFC 6890's special-purpose registry, less the
 * documentation ranges a test's "public" host uses): this network, private, shared (CGNAT),
 * loopback, link-local, IETF assignments, benchmarking, multicast and reserved. slirp's own network
 * (10.0.2.0/24: its gateway with the host's loopback closed, and its DNS forwarder) is a more specific
 * route, and stays reachable.
 */
export const REFUSED_RANGES = [
  '0.0.0.0/8',
  '10.0.0.0/8',
  '100.64.0.0/10',
  '127.0.0.0/8',
  '169.254.0.0/16',
  '172.16.0.0/12',
  '192.0.0.0/24',
  '192.168.0.0/16',
  '198.18.0.0/15',
  '224.0.0.0/4',
  '240.0.0.0/4',
] as const;

/** slirp4netns's network inside the namespace: its DNS forwarder's address. */
export const SLIRP_DNS = '10.0.2.3';

/** The host's own IPv4 addresses, loopback aside (which is covered by its range). */
export function hostAddresses(): string[] {
  const addresses = new Set<string>();
  for (const list of Object.values(networkInterfaces()))
    for (const address of list ?? [])
      if (address.family === 'IPv4' && !address.internal) addresses.add(address.address);
  return [...addresses];
}

/**
 * The step an `egress` session runs first, as root in its new network namespace (before bwrap drops
 * every capability): makes each range given unreachable, says on fd 4 that its namespace is made (the
 * runtime then starts slirp4netns on it), waits for the word that slirp has configured it, closes fd 4,
 * and runs the rest.
 */
const EGRESS_STEP = [
  // (The loop runs in the pipeline's subshell: the ranges are shifted off after it.)
  'for r; do [ "$r" = -- ] && break; echo "route add unreachable $r"; done | ip -batch - || exit 126',
  'while [ "$1" != -- ]; do shift; done; shift',
  'echo netns >&4 || exit 126',
  'read -r go <&4 || exit 126',
  'exec 4<&-',
  'exec "$@"',
].join('\n');

/**
 * The session's program up to its init: the network namespace step for `egress`, then bwrap with its
 * namespaces and mounts. `dir` is the session's SESSION_DIR; `uid` the host's; `setuid` whether the
 * init changes to SESSION_USER (it then keeps CAP_SETUID and CAP_SETGID for that, and loses them with it).
 */
export function isolationArgv(plan: IsolationPlan, dir: string, uid: number, setuid: boolean): string[] {
  const egress =
    plan.network === 'egress'
      ? [
          'unshare',
          '--net',
          '--',
          '/bin/sh',
          '-c',
          EGRESS_STEP,
          'cq-egress',
          ...REFUSED_RANGES,
          ...plan.hostAddresses.map((a) => `${a}/32`),
          '--',
        ]
      : [];
  // Under /tmp, the session's own /tmp hides the other sessions' directories already; elsewhere a
  // tmpfs on SESSIONS_DIR does. The directories down to SESSION_DIR are made on it passable (0711), as
  // outside, for a session that runs as SESSION_USER.
  const underTmp = `${plan.sessionsDir}/`.startsWith('/tmp/');
  const top = underTmp ? '/tmp' : plan.sessionsDir;
  const steps = dir
    .slice(top.length + 1)
    .split('/')
    .slice(0, -1);
  const passable = steps.flatMap((_, i) => ['--perms', '0711', '--dir', `${top}/${steps.slice(0, i + 1).join('/')}`]);
  const sessionsHidden = [...(underTmp ? [] : ['--tmpfs', plan.sessionsDir]), ...passable];
  return [
    ...egress,
    // bwrap leads the session's process group and dies of a SIGTERM, SIGINT or SIGHUP to it (taking the
    // sandbox with it, `--die-with-parent`): it ignores them, as unshare --fork does, and the init gets
    // them at their defaults (it passes them on; see containment.ts).
    'env',
    '--ignore-signal=TERM,INT,HUP',
    'bwrap',
    ...(uid === 0 ? [] : ['--unshare-user']),
    '--unshare-pid',
    '--unshare-ipc',
    '--unshare-uts',
    '--unshare-cgroup-try',
    ...(plan.network === 'none' ? ['--unshare-net'] : []),
    '--die-with-parent',
    '--as-pid-1',
    '--cap-drop',
    'ALL',
    ...(setuid ? ['--cap-add', 'CAP_SETUID', '--cap-add', 'CAP_SETGID'] : []),
    '--ro-bind',
    '/',
    '/',
    '--dev',
    '/dev',
    '--proc',
    '/proc',
    // Writable by every user, sticky, as a /tmp is (the session may run as SESSION_USER).
    '--perms',
    '1777',
    '--size',
    String(plan.tmpBytes),
    '--tmpfs',
    '/tmp',
    '--perms',
    '1777',
    '--size',
    String(plan.tmpBytes),
    '--tmpfs',
    '/dev/shm',
    ...sessionsHidden,
    '--bind',
    dir,
    dir,
    ...(plan.resolvConf === undefined ? [] : ['--ro-bind', plan.resolvConf, '/etc/resolv.conf']),
    '--chdir',
    dir,
    '--',
    'env',
    '--default-signal=TERM,INT,HUP',
  ];
}

/**
 * slirp4netns for the `egress` session whose network namespace `pid` holds: it writes to fd 3 once the
 * namespace is configured, and exits when fd 4 closes (the runtime holds its other end).
 */
export function slirpArgv(pid: number): string[] {
  return [
    'slirp4netns',
    '--configure',
    '--mtu=65520',
    '--disable-host-loopback',
    '--ready-fd=3',
    '--exit-fd=4',
    String(pid),
    'tap0',
  ];
}

/**
 * Where a host makes its sessions' directories, one per host process (`cq-worker-<pid>`, as its
 * cgroups are named), so that a host's start can remove what hosts of this machine that died left.
 */
export function hostDir(sessionsDir: string, pid: number = process.pid): string {
  return join(sessionsDir, `cq-worker-${pid}`);
}

/**
 * Removes the session directories left by hosts of this machine that died together with their session
 * runtime (a runtime outliving its host removes its sessions' directories itself): each `cq-worker-<pid>`
 * in `sessionsDir` whose pid no longer runs. Called at a host's start.
 */
export function pruneSessionDirs(sessionsDir: string): void {
  let entries: string[];
  try {
    entries = readdirSync(sessionsDir);
  } catch {
    return;
  }
  for (const entry of entries) {
    const match = /^cq-worker-(\d+)$/.exec(entry);
    if (match === null || Number(match[1]) === process.pid || running(Number(match[1]))) continue;
    rmSync(join(sessionsDir, entry), { recursive: true, force: true });
  }
}

/**
 * Writes the resolv.conf an `egress` session sees (slirp4netns's DNS forwarder, which asks the host's
 * resolver), where the plan says: in the host's directory, hidden from the sessions but for this file.
 */
export function writeResolvConf(plan: IsolationPlan): void {
  if (plan.resolvConf === undefined) return;
  mkdirSync(dirname(plan.resolvConf), { recursive: true, mode: 0o711 });
  writeFileSync(plan.resolvConf, `# cq: an egress session's DNS goes through slirp4netns\nnameserver ${SLIRP_DNS}\n`, {
    mode: 0o644,
  });
}
