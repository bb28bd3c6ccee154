import { describe, expect, it } from 'vitest';
import { probeContainment, type Probe } from './containment.js';

/** A host whose tools answer as `answers` says (by the program's name), with uid `uid`. */
function host(
  uid: number,
  answers: Record<string, { status: number | null; stdout?: string; stderr?: string; error?: string }>,
): Probe {
  return {
    uid,
    run(argv) {
      const answer = answers[argv[0]!] ?? { status: null, error: 'ENOENT' };
      return { stdout: '', stderr: '', ...answer };
    },
  };
}

const none = {
  memoryMb: undefined,
  pidsMax: undefined,
  user: undefined,
  network: 'auto',
  tmpMb: 64,
  sessionsDir: '/srv/cq-sessions',
} as const;
/** A host with util-linux and coreutils, without bubblewrap. */
const capable = { unshare: { status: 0 }, setpriv: { status: 0 }, env: { status: 0 } };
const sandboxed = { ...capable, bwrap: { status: 0 } };
const DIR = '/srv/cq-sessions/cq-worker-1/session-a-1';

describe('probeContainment (changes nothing)', () => {
  it('auto makes a namespace where unshare can, and wraps the command in it', () => {
    const { plan, fallback } = probeContainment({ containment: 'auto', ...none }, host(0, capable));
    expect(plan.mode).toBe('namespace');
    expect(fallback).toBeUndefined();
    const argv = plan.argv(['/bin/sh', '-c', 'run'], undefined, DIR);
    expect(argv.slice(0, 4)).toEqual(['setpriv', '--pdeathsig', 'KILL', '--']);
    expect(argv).toEqual(expect.arrayContaining(['unshare', '--pid', '--fork', '--mount-proc', '--kill-child']));
    expect(argv).not.toContain('--user');
    expect(argv.slice(-3)).toEqual(['/bin/sh', '-c', 'run']);
  });

  it('without root, the namespace comes with a user namespace', () => {
    const { plan } = probeContainment({ containment: 'namespace', ...none }, host(1000, capable));
    expect(plan.argv(['true'], undefined, DIR)).toEqual(expect.arrayContaining(['--user', '--map-current-user']));
  });

  it('auto falls back to process groups and says why; namespace refuses to start, naming what is missing', () => {
    const denied = { ...capable, unshare: { status: 1, stderr: 'unshare: unshare failed: Operation not permitted\n' } };
    const { plan, fallback } = probeContainment({ containment: 'auto', ...none }, host(1000, denied));
    expect(plan.mode).toBe('group');
    expect(fallback).toBe(
      'unshare could not make a user and PID namespace (unprivileged user namespaces): unshare: unshare failed: Operation not permitted',
    );
    expect(plan.argv(['/bin/sh', '-c', 'run'], undefined, DIR)).not.toContain('unshare');
    expect(() => probeContainment({ containment: 'namespace', ...none }, host(0, { setpriv: { status: 0 } }))).toThrow(
      "SESSION_CONTAINMENT is namespace but this host cannot make one: util-linux's unshare is not on the PATH",
    );
  });

  it('a host whose env cannot reset signals (coreutils before 8.31) makes no namespace: sessions would start with SIGINT ignored', () => {
    const oldEnv = {
      ...capable,
      env: { status: 125, stderr: "env: unrecognized option '--default-signal=INT,QUIT'\n" },
    };
    const { plan, fallback } = probeContainment({ containment: 'auto', ...none }, host(0, oldEnv));
    expect(plan.mode).toBe('group');
    expect(fallback).toBe(
      'env cannot reset signals (--default-signal needs coreutils 8.31 or later): sessions would start with SIGINT and SIGQUIT ignored',
    );
    expect(() => probeContainment({ containment: 'namespace', ...none }, host(0, oldEnv))).toThrow(
      'SESSION_CONTAINMENT is namespace but this host cannot make one: env cannot reset signals',
    );
  });

  it('group never tries a namespace', () => {
    expect(probeContainment({ containment: 'group', ...none }, host(0, capable)).plan.mode).toBe('group');
  });

  it('SESSION_USER: needs root and setpriv, looks the user up, and drops to it after entering the cgroups', () => {
    const withUser = { ...none, user: 'svc' };
    expect(() => probeContainment({ containment: 'group', ...withUser }, host(1000, capable))).toThrow(
      'SESSION_USER needs the worker host to run as root (it runs as uid 1000)',
    );
    expect(() => probeContainment({ containment: 'group', ...withUser }, host(0, capable))).toThrow(
      'SESSION_USER "svc" is not a user of this system (getent passwd svc)',
    );
    const known = { ...capable, getent: { status: 0, stdout: 'svc:x:990:985::/home/svc:/bin/sh\n' } };
    const { plan } = probeContainment({ containment: 'group', ...withUser }, host(0, known));
    expect(plan.user).toEqual({ name: 'svc', uid: 990, gid: 985, home: '/home/svc' });
    const argv = plan.argv(['/bin/sh', '-c', 'run'], undefined, DIR);
    const enter = argv.indexOf('cq-enter');
    const drop = argv.indexOf('--reuid=990');
    expect(enter).toBeGreaterThan(0);
    expect(drop).toBeGreaterThan(enter);
    // A change of user clears the parent-death signal: it is set again after it.
    expect(argv.slice(drop, argv.indexOf('--', drop))).toEqual([
      '--reuid=990',
      '--regid=985',
      '--init-groups',
      '--pdeathsig',
      'KILL',
    ]);
  });
});

describe('isolation: bubblewrap, the network, the files', () => {
  it('auto: with bwrap, a namespace of every kind, only loopback, the host read-only, its own /tmp, /dev/shm and SESSION_DIR', () => {
    const { plan, isolationMissing } = probeContainment({ containment: 'auto', ...none }, host(0, sandboxed));
    expect(isolationMissing).toBeUndefined();
    expect(plan.isolation).toMatchObject({ network: 'none', privateFiles: true, tmpBytes: 64 * 1024 * 1024 });
    const argv = plan.argv(['/bin/sh', '-c', 'run'], undefined, DIR);
    const at = (flag: string, n = 1): string[] => argv.slice(argv.indexOf(flag), argv.indexOf(flag) + n + 1);
    expect(argv).not.toContain('unshare');
    expect(argv).toEqual(
      expect.arrayContaining(['--unshare-pid', '--unshare-net', '--unshare-ipc', '--die-with-parent', '--as-pid-1']),
    );
    expect(at('--cap-drop')).toEqual(['--cap-drop', 'ALL']);
    expect(argv).not.toContain('--cap-add');
    expect(at('--ro-bind', 2)).toEqual(['--ro-bind', '/', '/']);
    const size = 64 * 1024 * 1024;
    expect(argv.join(' ')).toContain(
      `--perms 1777 --size ${size} --tmpfs /tmp --perms 1777 --size ${size} --tmpfs /dev/shm`,
    );
    // SESSIONS_DIR (outside /tmp here) is hidden, then the session's own directory bound on it, passable to it.
    expect(argv.join(' ')).toContain(
      `--tmpfs /srv/cq-sessions --perms 0711 --dir /srv/cq-sessions/cq-worker-1 --bind ${DIR} ${DIR}`,
    );
    expect(at('--chdir')).toEqual(['--chdir', DIR]);
    // bwrap ignores the group's SIGTERM; the init gets it at its default.
    expect(argv.indexOf('--ignore-signal=TERM,INT,HUP')).toBe(argv.indexOf('bwrap') - 1);
    expect(argv.slice(-3)).toEqual(['/bin/sh', '-c', 'run']);
  });

  it('SESSION_NETWORK=host keeps the network; SESSION_USER keeps CAP_SETUID and CAP_SETGID to become it', () => {
    const known = { ...sandboxed, getent: { status: 0, stdout: 'svc:x:990:985::/home/svc:/bin/sh\n' } };
    const { plan } = probeContainment({ containment: 'auto', ...none, network: 'host', user: 'svc' }, host(0, known));
    expect(plan.isolation.network).toBe('host');
    const argv = plan.argv(['true'], undefined, DIR);
    expect(argv).not.toContain('--unshare-net');
    expect(argv.join(' ')).toContain('--cap-drop ALL --cap-add CAP_SETUID --cap-add CAP_SETGID');
    expect(argv.indexOf('--reuid=990')).toBeGreaterThan(argv.indexOf('cq-init'));
  });

  it('egress: its own namespace, every private range and host address unreachable before bwrap, slirp4netns required', () => {
    const { plan } = probeContainment(
      { containment: 'auto', ...none, network: 'egress' },
      host(0, { ...sandboxed, slirp4netns: { status: 0 }, ip: { status: 0 } }),
    );
    expect(plan.isolation.network).toBe('egress');
    const argv = plan.argv(['true'], undefined, DIR);
    expect(argv.slice(argv.indexOf('setpriv') + 4, argv.indexOf('setpriv') + 7)).toEqual(['unshare', '--net', '--']);
    for (const range of ['10.0.0.0/8', '172.16.0.0/12', '192.168.0.0/16', '169.254.0.0/16', '127.0.0.0/8'])
      expect(argv.slice(0, argv.indexOf('bwrap'))).toContain(range);
    expect(argv).not.toContain('--unshare-net');
    expect(() =>
      probeContainment(
        { containment: 'auto', ...none, network: 'egress' },
        host(0, { ...sandboxed, ip: { status: 0 } }),
      ),
    ).toThrow('SESSION_NETWORK is egress but slirp4netns is not on the PATH (install Debian package slirp4netns)');
  });

  it('none or egress where the host cannot make them: refuses to start naming why; auto falls back to the host network', () => {
    for (const network of ['none', 'egress'] as const) {
      expect(() => probeContainment({ containment: 'auto', ...none, network }, host(0, capable))).toThrow(
        `SESSION_NETWORK is ${network} but this host cannot give a session a network of its own: ` +
          'bubblewrap (bwrap) is not on the PATH (install Debian package bubblewrap); set SESSION_NETWORK=host',
      );
      expect(() => probeContainment({ containment: 'group', ...none, network }, host(0, sandboxed))).toThrow(
        `SESSION_NETWORK is ${network} but this host cannot give a session a network of its own: sessions get no namespaces (SESSION_CONTAINMENT=group)`,
      );
    }
    const refused = {
      ...capable,
      bwrap: { status: 1, stderr: 'bwrap: Creating new namespace failed: Operation not permitted\n' },
    };
    const { plan, isolationMissing } = probeContainment({ containment: 'auto', ...none }, host(0, refused));
    expect(plan.isolation).toMatchObject({ network: 'host', privateFiles: false });
    expect(isolationMissing).toBe(
      "bwrap could not make a session's namespaces: bwrap: Creating new namespace failed: Operation not permitted",
    );
    expect(plan.argv(['true'], undefined, DIR)).toContain('unshare');
  });
});

describe('execArgv: a command run inside a running session', () => {
  const place = { pid: 4242, userNamespace: false, procs: ['/sys/fs/cgroup/pids/s/cgroup.procs'], cwd: '/work dir' };

  it('enters the cgroups, then every namespace of the session, then drops to its user without a capability', () => {
    const { plan } = probeContainment(
      { containment: 'auto', ...none, user: 'nobody' },
      host(0, {
        ...sandboxed,
        getent: { status: 0, stdout: 'nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n' },
      }),
    );
    const argv = plan.execArgv(place, ['id', '-u'], { A: '1', HOME: '/work dir' })!;
    expect(argv.slice(0, 4)).toEqual(['setpriv', '--pdeathsig', 'KILL', '--']);
    // The cgroups first, as root on the host (inside, /sys is read-only).
    expect(argv.indexOf('/sys/fs/cgroup/pids/s/cgroup.procs')).toBeLessThan(argv.indexOf('nsenter'));
    expect(argv).toEqual(
      expect.arrayContaining(['nsenter', '--target=4242', '--pid', '--mount', '--ipc', '--uts', '--net']),
    );
    // Never --wd: it would be opened on the host, outside the session's root.
    expect(argv.some((a) => a.startsWith('--wd'))).toBe(false);
    const drop = argv.slice(argv.lastIndexOf('setpriv'));
    expect(drop).toEqual([
      'setpriv',
      '--reuid=65534',
      '--regid=65534',
      '--init-groups',
      '--inh-caps=-all',
      '--bounding-set=-all',
      '--no-new-privs',
      '--pdeathsig',
      'KILL',
      '--',
      'env',
      '--default-signal=HUP,TERM,INT,QUIT',
      '-i',
      '--chdir=/work dir',
      'A=1',
      'HOME=/work dir',
      'id',
      '-u',
    ]);
  });

  it('a host that is not root enters the session’s user namespace too; group containment enters none', () => {
    const { plan } = probeContainment({ containment: 'auto', ...none }, host(1000, sandboxed));
    expect(plan.execArgv({ ...place, userNamespace: true }, ['true'], {})).toEqual(
      expect.arrayContaining(['--user', '--preserve-credentials']),
    );
    const group = probeContainment({ containment: 'group', ...none }, host(0, capable)).plan;
    const argv = group.execArgv({ ...place, pid: undefined, procs: [] }, ['true'], {})!;
    expect(argv).not.toContain('nsenter');
    expect(argv.slice(-3)).toEqual(['-i', '--chdir=/work dir', 'true']);
  });

  it('a program whose name holds = is run as a program, not taken by env for a variable', () => {
    const { plan } = probeContainment({ containment: 'auto', ...none }, host(0, sandboxed));
    expect(plan.execArgv(place, ['./a=b', '-x'], { A: '1' })!.slice(-7)).toEqual([
      'A=1',
      '/bin/sh',
      '-c',
      'exec "$@"',
      'cq-exec',
      './a=b',
      '-x',
    ]);
    expect(plan.execArgv(place, ['ls'], { A: '1' })!.slice(-2)).toEqual(['A=1', 'ls']);
  });

  it('without setpriv it cannot drop the host’s privileges: no command runs', () => {
    const { plan } = probeContainment(
      { containment: 'auto', ...none },
      host(0, { ...sandboxed, setpriv: { status: 1 } }),
    );
    expect(plan.execArgv(place, ['true'], {})).toBeUndefined();
  });
});
