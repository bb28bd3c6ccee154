import { readFileSync, readdirSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { until } from '@cq/test-harness';
import { pino } from 'pino';
import { afterEach, describe, expect, it } from 'vitest';
import { probeContainment, type ContainmentPlan } from './containment.js';
import { RuntimeLauncher, type LaunchSpec, type SessionHandle } from './session-process.js';

/** True while `pid` runs (a zombie counts as gone). */
function alive(pid: number): boolean {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3) !== 'Z';
  } catch {
    return false;
  }
}

/** The pids of the processes in group `pgid`, from /proc. */
function groupMembers(pgid: number): number[] {
  const members: number[] = [];
  for (const entry of readdirSync('/proc').filter((e) => /^\d+$/.test(e))) {
    try {
      const stat = readFileSync(`/proc/${entry}/stat`, 'utf8');
      const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      if (Number(fields[2]) === pgid && fields[0] !== 'Z') members.push(Number(entry));
    } catch {
      // gone meanwhile
    }
  }
  return members;
}

/** A field of /proc/<pid>/status ('' when the process is gone). */
function statusField(pid: number, field: string): string {
  try {
    return new RegExp(`^${field}:\\s*(.*)$`, 'm').exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1] ?? '';
  } catch {
    return '';
  }
}

/** The pids of the children of `pid`, from /proc. */
function childrenOf(pid: number): number[] {
  return readdirSync('/proc')
    .filter((e) => /^\d+$/.test(e))
    .filter((e) => statusField(Number(e), 'PPid') === String(pid))
    .map(Number);
}

/** The runtime as built (a separate Node.js process cannot run the TypeScript source). */
const builtRuntime = fileURLToPath(new URL('../dist/runtime-main.js', import.meta.url));
const logs: Array<Record<string, unknown>> = [];
const logger = pino(
  { level: 'debug' },
  { write: (line: string) => void logs.push(JSON.parse(line) as Record<string, unknown>) },
);
const launchers: RuntimeLauncher[] = [];
afterEach(async () => {
  await Promise.all(launchers.splice(0).map((l) => l.close()));
  logs.length = 0;
});

/** A launcher running `command`, opened. */
async function launcher(command: string, containment?: ContainmentPlan): Promise<RuntimeLauncher> {
  const l = new RuntimeLauncher({
    command,
    logger,
    program: builtRuntime,
    ...(containment === undefined ? {} : { containment }),
  });
  launchers.push(l);
  await l.open();
  return l;
}

/** Launches with a lease that holds `holdsMs` from now and a deadline far away; collects output. */
function launch(
  l: RuntimeLauncher,
  holdsMs: number,
  extra: Partial<LaunchSpec> = {},
): { handle: SessionHandle; output: string[] } {
  const output: string[] = [];
  const handle = l.launch({
    sessionEnv: { SESSION_ID: 's', USER_ID: 'u', FENCE: '1', DEADLINE: '0', SESSION_METADATA: '{}' },
    graceMs: 300,
    deadlineAt: performance.now() + 60_000,
    holdsUntil: performance.now() + holdsMs,
    onOutput: (_stream, lines) => output.push(...lines),
    ...extra,
  });
  return { handle, output };
}

/** The pid the session printed first (`echo $$`). */
async function pidOf(output: string[]): Promise<number> {
  await until(() => output.length > 0, 5000, 'the session printed its pid');
  return Number(output[0]);
}

describe('the session runtime', () => {
  it('starts the session in a process group of its own, away from the host and the runtime', async () => {
    const l = await launcher('echo $$; sleep 0.1; exit 3');
    const { handle, output } = launch(l, 60_000);
    const pid = await pidOf(output);
    expect(groupMembers(pid)).toContain(pid);
    expect(pid).not.toBe(l.runtimePid);
    expect(await handle.exited).toEqual({ exitCode: 3 });
  });

  it('kills the whole group when the lease stops holding, unless a renewal moved it', async () => {
    const l = await launcher('echo $$; sleep 600 & sleep 600');
    // Leases long enough for both sessions to have started (and printed their pids) on a busy machine.
    const leaseMs = 1000;
    const started = performance.now();
    const kept = launch(l, leaseMs);
    const lapsed = launch(l, leaseMs);
    // Only the first one's lease is renewed, from its launch on (however long the session takes to start).
    const renewals = setInterval(() => kept.handle.leaseHolds(performance.now() + leaseMs), 100);
    try {
      const keptPid = await pidOf(kept.output);
      const lapsedPid = await pidOf(lapsed.output);
      expect(await lapsed.handle.exited).toEqual({ exitCode: 137, cause: 'lease' });
      expect(performance.now() - started).toBeLessThan(leaseMs + 200);
      await until(() => groupMembers(lapsedPid).length === 0, 1000, 'the lapsed group is gone');
      expect(alive(keptPid)).toBe(true);
    } finally {
      clearInterval(renewals);
    }
    expect(await kept.handle.exited).toEqual({ exitCode: 137, cause: 'lease' });
  });

  it('terminate: SIGTERM, then SIGKILL after the grace time to a session that ignores it; kill: SIGKILL at once', async () => {
    const l = await launcher(`trap '' TERM; echo $$; while :; do sleep 0.05; done`);
    const stubborn = launch(l, 60_000);
    await pidOf(stubborn.output);
    const asked = performance.now();
    stubborn.handle.terminate();
    expect(await stubborn.handle.exited).toEqual({ exitCode: 137 });
    expect(performance.now() - asked).toBeGreaterThanOrEqual(300 - 5);

    const killed = launch(l, 60_000);
    await pidOf(killed.output);
    killed.handle.kill();
    expect(await killed.handle.exited).toEqual({ exitCode: 137 });
  });

  it('ends a session at its deadline on its own (SIGTERM, then SIGKILL)', async () => {
    const l = await launcher('echo $$; exec sleep 600');
    const { handle } = launch(l, 60_000, { deadlineAt: performance.now() + 200 });
    expect(await handle.exited).toEqual({ exitCode: 143, cause: 'deadline' });
  });

  it('a moved deadline is the one that counts: a later one keeps the session running, a sooner one ends it', async () => {
    const l = await launcher('echo $$; exec sleep 600');
    const startedAt = performance.now();
    const { handle } = launch(l, 60_000, { deadlineAt: startedAt + 300 });
    let exited = false;
    void handle.exited.then(() => (exited = true));
    handle.deadlineMoved(performance.now() + 60_000);
    await until(() => performance.now() > startedAt + 800, 5000, 'the first deadline has passed');
    expect(exited).toBe(false);
    const movedAt = performance.now();
    handle.deadlineMoved(movedAt + 200);
    expect(await handle.exited).toEqual({ exitCode: 143, cause: 'deadline' });
    expect(performance.now() - movedAt).toBeGreaterThanOrEqual(200 - 5);
    expect(performance.now() - movedAt).toBeLessThan(200 + 500);
  });

  it('when the runtime is SIGKILLed: the host kills the groups, reports runtime_lost, and starts a new runtime', async () => {
    const l = await launcher('echo $$; sleep 600 & sleep 600');
    const sessions = [launch(l, 60_000), launch(l, 60_000)];
    const pids = await Promise.all(sessions.map((s) => pidOf(s.output)));
    const first = l.runtimePid!;
    process.kill(first, 'SIGKILL');
    for (const s of sessions) expect(await s.handle.exited).toEqual({ exitCode: 137, cause: 'runtime_lost' });
    await until(() => pids.every((pid) => groupMembers(pid).length === 0), 1000, 'the groups are gone');
    expect(logs.some((line) => line['msg'] === 'session runtime died; its sessions are killed and end as lost')).toBe(
      true,
    );
    await until(() => l.runtimePid !== undefined && l.runtimePid !== first, 2000, 'a new runtime');
    const next = launch(l, 60_000);
    await pidOf(next.output);
    next.handle.kill();
    expect((await next.handle.exited).exitCode).toBe(137);
  });

  it('when the runtime is frozen: the host kills the group on its own clock and settles the session', async () => {
    const l = await launcher('echo $$; exec sleep 600');
    const { handle, output } = launch(l, 60_000);
    const pid = await pidOf(output);
    await until(() => l.runtimePid !== undefined, 1000, 'runtime');
    process.kill(l.runtimePid!, 'SIGSTOP');
    try {
      handle.kill();
      await until(() => !alive(pid) || groupMembers(pid).length === 0, 1000, 'the group killed by the host');
      expect((await handle.exited).exitCode).toBe(137);
    } finally {
      process.kill(l.runtimePid!, 'SIGCONT');
    }
  });

  it('a runtime that cannot start is backed off, and its sessions fail instead of spinning', async () => {
    const l = new RuntimeLauncher({ command: 'true', logger, program: '/nonexistent/session-runtime.js' });
    launchers.push(l);
    await l.open();
    // Started again at once after the first death; after the second young one, it waits.
    await until(
      () =>
        logs.filter((line) => line['msg'] === 'session runtime died; its sessions are killed and end as lost')
          .length === 2,
      3000,
      'the runtime died twice',
    );
    expect(await launch(l, 60_000).handle.exited).toEqual({ exitCode: 127, cause: 'spawn_failed' });
    expect(logs.filter((line) => line['msg'] === 'session runtime started').length).toBe(2);
  });

  it('closing lets the runtime exit', async () => {
    const l = await launcher('exit 0');
    const pid = l.runtimePid!;
    expect((await launch(l, 60_000).handle.exited).exitCode).toBe(0);
    await l.close();
    await until(() => !alive(pid), 2000, 'the runtime exited');
  });
});

describe.each(['namespace', 'group'] as const)('signals in %s containment', (mode) => {
  const plan = (): ContainmentPlan =>
    probeContainment({
      containment: mode,
      memoryMb: undefined,
      pidsMax: undefined,
      user: undefined,
      network: 'auto',
      tmpMb: 16,
      sessionsDir: '/var/tmp/cq-sessions-test',
    }).plan;

  it('a session starts with SIGINT and SIGQUIT at their defaults, and its SIGINT trap runs on a SIGINT to its group', async () => {
    // Prints its pid (as its own PID namespace numbers it), then waits for SIGINT in a trap.
    const l = await launcher(`trap 'echo got INT; exit 5' INT; echo $$; while :; do sleep 0.05; done`, plan());
    const { handle, output } = launch(l, 60_000);
    const inside = await pidOf(output);
    // The session's group is led by the runtime's child (unshare in namespace mode, the session's
    // shell in group mode); the shell is the member its namespace numbers `inside`.
    const [group] = childrenOf(l.runtimePid!);
    const shell = groupMembers(group!).find((pid) => statusField(pid, 'NSpid').split(/\s+/).at(-1) === String(inside));
    expect(shell).toBeDefined();
    // SIGINT is caught (the trap), SIGQUIT at its default: neither is ignored (bits 2 and 3 of SigIgn).
    const ignored = BigInt(`0x${statusField(shell!, 'SigIgn')}`);
    expect(ignored & 0b110n).toBe(0n);
    // The runtime signals a session's process group, as it does with SIGTERM.
    process.kill(-group!, 'SIGINT');
    expect((await handle.exited).exitCode).toBe(5);
    expect(output).toContain('got INT');
  });
});

describe('readiness on SESSION_NOTIFY_FD (fd 3)', () => {
  it('a ready line marks the session ready with its endpoint; junk, 10 MB without a newline and an overlong endpoint are skipped, bounded and reported', async () => {
    // Writes to fd 3, in order: junk, 10 MB in one line, an endpoint over 512 characters, then the
    // announcement twice (the second is not passed on), then a new endpoint; then it waits to be stopped.
    const script = [
      "echo 'not json' >&3",
      "head -c 10485760 /dev/zero | tr '\\0' x >&3; echo >&3",
      `printf '{"ready": true, "endpoint": "%s"}\\n' "$(head -c 600 /dev/zero | tr '\\0' e)" >&3`,
      `echo '{"ready": true, "endpoint": "http://10.0.0.7:8888"}' >&3`,
      `echo '{"ready": true, "endpoint": "http://10.0.0.7:8888"}' >&3`,
      `echo '{"ready": true, "endpoint": "http://10.0.0.7:9999"}' >&3`,
      'echo done',
      'exec sleep 60',
    ].join('; ');
    const l = await launcher(script);
    const endpoints: Array<string | undefined> = [];
    const { handle, output } = launch(l, 60_000, { onReady: (endpoint) => endpoints.push(endpoint) });
    await until(() => endpoints.length === 2, 20_000, 'two announcements');
    expect(endpoints).toEqual(['http://10.0.0.7:8888', 'http://10.0.0.7:9999']);
    await until(() => output.includes('done'), 5000, 'the script ran through');
    const bad = logs.filter((l) => String(l['msg']).startsWith('bad line on SESSION_NOTIFY_FD'));
    expect(bad.map((l) => l['reason'])).toEqual([
      'not JSON',
      'a line longer than 1024 characters',
      'endpoint must be a string of 1 to 512 characters',
    ]);
    handle.kill();
    expect((await handle.exited).exitCode).toBe(137);
  }, 30_000);

  it('what a session announced just before it exited is passed on before its end (600 at once)', async () => {
    const l = await launcher(`echo '{"ready": true, "endpoint": "h:1"}' >&3; exit 0`);
    const order: string[][] = [];
    await Promise.all(
      Array.from({ length: 600 }, async (_, i) => {
        const seen: string[] = [];
        order[i] = seen;
        const { handle } = launch(l, 60_000, { onReady: (endpoint) => seen.push(`ready ${endpoint}`) });
        const exit = await handle.exited;
        seen.push(`exit ${exit.exitCode}`);
      }),
    );
    for (const seen of order) expect(seen).toEqual(['ready h:1', 'exit 0']);
  }, 30_000);

  it('activity on the notify fd reaches the host as the instant it happened, on its own clock', async () => {
    // Active, then quiet for 300 ms, then active again: two reports, in order. Each is the instant the
    // runtime read the line, so the first may be late on a busy machine; the second cannot come before
    // the session's 300 ms of quiet have passed since the launch.
    const l = await launcher(`echo '{"active": true}' >&3; sleep 0.3; echo '{"active": true}' >&3; sleep 0.2`);
    const seen: number[] = [];
    const before = performance.now();
    const { handle } = launch(l, 60_000, { onActive: (at) => seen.push(at) });
    await handle.exited;
    expect(seen).toHaveLength(2);
    expect(seen[0]!).toBeGreaterThanOrEqual(before);
    expect(seen[1]!).toBeGreaterThan(seen[0]!);
    expect(seen[1]! - before).toBeGreaterThanOrEqual(300);
    expect(seen[1]!).toBeLessThanOrEqual(performance.now());
  });

  it('a session that never writes there is never ready, and runs as before', async () => {
    const l = await launcher('echo hello; exit 0');
    const endpoints: Array<string | undefined> = [];
    const { handle, output } = launch(l, 60_000, { onReady: (endpoint) => endpoints.push(endpoint) });
    expect((await handle.exited).exitCode).toBe(0);
    expect(output).toEqual(['hello']);
    expect(endpoints).toEqual([]);
  });
});
