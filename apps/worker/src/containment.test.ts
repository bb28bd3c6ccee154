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

const none = { memoryMb: undefined, pidsMax: undefined, user: undefined };
const capable = { unshare: { status: 0 }, setpriv: { status: 0 }, env: { status: 0 } };

describe('probeContainment (changes nothing)', () => {
  it('auto makes a namespace where unshare can, and wraps the command in it', () => {
    const { plan, fallback } = probeContainment({ containment: 'auto', ...none }, host(0, capable));
    expect(plan.mode).toBe('namespace');
    expect(fallback).toBeUndefined();
    const argv = plan.argv(['/bin/sh', '-c', 'run'], undefined);
    expect(argv.slice(0, 4)).toEqual(['setpriv', '--pdeathsig', 'KILL', '--']);
    expect(argv).toEqual(expect.arrayContaining(['unshare', '--pid', '--fork', '--mount-proc', '--kill-child']));
    expect(argv).not.toContain('--user');
    expect(argv.slice(-3)).toEqual(['/bin/sh', '-c', 'run']);
  });

  it('without root, the namespace comes with a user namespace', () => {
    const { plan } = probeContainment({ containment: 'namespace', ...none }, host(1000, capable));
    expect(plan.argv(['true'], undefined)).toEqual(expect.arrayContaining(['--user', '--map-current-user']));
  });

  it('auto falls back to process groups and says why; namespace refuses to start, naming what is missing', () => {
    const denied = { ...capable, unshare: { status: 1, stderr: 'unshare: unshare failed: Operation not permitted\n' } };
    const { plan, fallback } = probeContainment({ containment: 'auto', ...none }, host(1000, denied));
    expect(plan.mode).toBe('group');
    expect(fallback).toBe(
      'unshare could not make a user and PID namespace (unprivileged user namespaces): unshare: unshare failed: Operation not permitted',
    );
    expect(plan.argv(['/bin/sh', '-c', 'run'], undefined)).not.toContain('unshare');
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
    const argv = plan.argv(['/bin/sh', '-c', 'run'], undefined);
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
