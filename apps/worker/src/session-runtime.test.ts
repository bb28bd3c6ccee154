// The runtime's logic without processes: a fake child, fake timers, a clock of the test's own.
import { EventEmitter } from 'node:events';
import type { ChildProcess } from 'node:child_process';
import { PassThrough } from 'node:stream';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import type { CgroupSpec } from './cgroups.js';
import type { FromRuntime, ToRuntime } from './runtime-protocol.js';
import { createRuntime, type RuntimeDeps } from './session-runtime.js';

interface FakeChild extends EventEmitter {
  pid: number;
  stdout: PassThrough;
  stderr: PassThrough;
  stdio: unknown[];
}

function fakeChild(pid: number): FakeChild {
  const child = new EventEmitter() as FakeChild;
  child.pid = pid;
  child.stdout = new PassThrough();
  child.stderr = new PassThrough();
  child.stdio = [null, child.stdout, child.stderr, new PassThrough()];
  return child;
}

let sent: FromRuntime[];
let signals: Array<[number, NodeJS.Signals]>;
let children: FakeChild[];
let cgroupCalls: string[];
let oomCount: number;

function runtime(): ReturnType<typeof createRuntime> {
  const deps: RuntimeDeps = {
    spawn: () => {
      const child = fakeChild(1000 + children.length);
      children.push(child);
      return child as unknown as ChildProcess;
    },
    send: (message, done) => {
      sent.push(message);
      done();
    },
    now: () => performance.now(),
    signalGroup: (pgid, signal) => {
      signals.push([pgid, signal]);
      // The group dies of a SIGKILL: its leader exits.
      if (signal === 'SIGKILL') {
        const child = children.find((c) => c.pid === pgid);
        queueMicrotask(() => child?.emit('exit', null, 'SIGKILL'));
      }
    },
    exit: () => {},
    warn: () => {},
    cgroups: {
      create: (spec) => void cgroupCalls.push(`create ${spec.dirs[0]!.path}`),
      oomKills: () => oomCount,
      remove: (spec) => (cgroupCalls.push(`remove ${spec.dirs[0]!.path}`), true),
    },
  };
  return createRuntime(deps);
}

const start = (extra: Partial<Extract<ToRuntime, { t: 'start' }>> = {}): Extract<ToRuntime, { t: 'start' }> => ({
  t: 'start',
  id: '1',
  argv: ['/bin/sh', '-c', 'true'],
  env: {},
  outputRate: 1000,
  graceMs: 500,
  deadlineAt: performance.now() + 60_000,
  killBy: performance.now() + 10_000,
  ...extra,
});

beforeEach(() => {
  vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout', 'performance', 'queueMicrotask'] });
  sent = [];
  signals = [];
  children = [];
  cgroupCalls = [];
  oomCount = 0;
});
afterEach(() => vi.useRealTimers());

describe('createRuntime', () => {
  it('kills the group at killBy to the millisecond, unless a renewal moved it', async () => {
    const r = runtime();
    r.order(start({ killBy: performance.now() + 1000 }));
    vi.advanceTimersByTime(900);
    r.order({ t: 'lease', id: '1', killBy: performance.now() + 1000 });
    vi.advanceTimersByTime(999);
    expect(signals).toEqual([]);
    vi.advanceTimersByTime(1);
    // (Its exit brings the group's SIGKILL again, for what the leader left behind.)
    expect(signals[0]).toEqual([1000, 'SIGKILL']);
    expect(signals.every(([pgid, signal]) => pgid === 1000 && signal === 'SIGKILL')).toBe(true);
    await vi.runAllTimersAsync();
    expect(sent.at(-1)).toEqual({ t: 'exit', id: '1', code: 137, cause: 'lease' });
  });

  it('a start order that comes after its lease ran out starts nothing and answers the lease as its end', () => {
    const r = runtime();
    r.order(start({ killBy: performance.now() - 1 }));
    r.order(start({ id: '2', killBy: performance.now() }));
    expect(children).toEqual([]);
    expect(sent).toEqual([
      { t: 'exit', id: '1', code: 137, cause: 'lease' },
      { t: 'exit', id: '2', code: 137, cause: 'lease' },
    ]);
  });

  it('leases: one order moves the instants of many sessions, each to its own; an unknown id is passed over', () => {
    const r = runtime();
    r.order(start({ id: '1', killBy: performance.now() + 1000 }));
    r.order(start({ id: '2', killBy: performance.now() + 1000 }));
    vi.advanceTimersByTime(900);
    r.order({
      t: 'leases',
      leases: [
        ['1', performance.now() + 1000],
        ['2', performance.now() + 500],
        ['gone', performance.now() + 100],
      ],
    });
    vi.advanceTimersByTime(499);
    expect(signals).toEqual([]);
    vi.advanceTimersByTime(1);
    // Session 2's group only (its exit may bring the group's SIGKILL again).
    expect(new Set(signals.map(([pgid]) => pgid))).toEqual(new Set([1001]));
    vi.advanceTimersByTime(500);
    expect(new Set(signals.map(([pgid]) => pgid))).toEqual(new Set([1000, 1001]));
  });

  it('term: SIGTERM, then SIGKILL after the grace time, never after killBy', () => {
    const r = runtime();
    r.order(start({ graceMs: 5000, killBy: performance.now() + 300 }));
    r.order({ t: 'term', id: '1' });
    expect(signals).toEqual([[1000, 'SIGTERM']]);
    vi.advanceTimersByTime(299);
    expect(signals).toEqual([[1000, 'SIGTERM']]);
    vi.advanceTimersByTime(1);
    expect(signals.slice(1).every(([, signal]) => signal === 'SIGKILL')).toBe(true);
    expect(signals.length).toBeGreaterThan(1);
  });

  it('passes lines on within the rate; what is over it is dropped and marked once a second', async () => {
    const r = runtime();
    r.order(start({ outputRate: 1000 }));
    const out = children[0]!.stdout;
    // The burst (1 MiB) first: 1,024 lines of 1 KiB (with their newlines) pass, the next ones are dropped.
    const line = `${'x'.repeat(1023)}\n`;
    out.write(line.repeat(1100));
    await vi.advanceTimersByTimeAsync(0);
    const passed = (): string[] => sent.flatMap((m) => (m.t === 'out' ? [...m.lines] : []));
    // The first drop is marked at once, even with no line after it; the message says how much it marks.
    expect(passed().length).toBe(1025);
    expect(passed()[1024]).toBe(`[output dropped: ${76 * 1024} bytes]`);
    expect(sent.filter((m) => m.t === 'out').at(-1)).toMatchObject({ dropped: 76 * 1024 });
    // More dropped within the second: marked when the second is up, though no line comes.
    out.write(line.repeat(10));
    await vi.advanceTimersByTimeAsync(900);
    expect(passed().length).toBe(1025);
    await vi.advanceTimersByTimeAsync(200);
    expect(passed()[1025]).toBe(`[output dropped: ${10 * 1024} bytes]`);
    // A second later the bucket has 1000 bytes again: not enough for a line of 1024.
    await vi.advanceTimersByTimeAsync(1100);
    out.write(`${'z'.repeat(99)}\n`);
    await vi.advanceTimersByTimeAsync(0);
    expect(passed().slice(1026)).toEqual(['z'.repeat(99)]);
  });

  it('cuts a line over 16 KiB and marks it', async () => {
    const r = runtime();
    r.order(start({ outputRate: 1_000_000 }));
    children[0]!.stderr.write('y'.repeat(20_000));
    await vi.advanceTimersByTimeAsync(0);
    expect(sent.find((m) => m.t === 'out')).toEqual({
      t: 'out',
      id: '1',
      stream: 'stderr',
      lines: [`${'y'.repeat(16_384)} [line cut]`],
    });
  });

  it('activity on the notify fd: the first at once, then at most one report per 100 ms with the latest instant; readiness counts', async () => {
    const r = runtime();
    r.order(start());
    const notify = children[0]!.stdio[3] as PassThrough;
    const reports = (): Array<FromRuntime & { t: 'active' }> =>
      sent.filter((m): m is FromRuntime & { t: 'active' } => m.t === 'active');
    const t0 = performance.now();
    notify.write('{"active": true}\n');
    await vi.advanceTimersByTimeAsync(0);
    expect(reports()).toEqual([{ t: 'active', id: '1', at: t0 }]);
    // Three more within the next 100 ms: one report, at the 100 ms slot, naming the last of them.
    for (const ms of [10, 30, 20]) {
      await vi.advanceTimersByTimeAsync(ms);
      notify.write('{"active":true}\n');
    }
    await vi.advanceTimersByTimeAsync(0);
    expect(reports()).toHaveLength(1);
    await vi.advanceTimersByTimeAsync(100 - 60 - 1);
    expect(reports()).toHaveLength(1);
    await vi.advanceTimersByTimeAsync(1);
    expect(reports().at(-1)).toEqual({ t: 'active', id: '1', at: t0 + 60 });
    // A readiness line is activity too (and still marks the session ready).
    await vi.advanceTimersByTimeAsync(500);
    notify.write('{"ready": true, "endpoint": "http://x:1"}\n');
    await vi.advanceTimersByTimeAsync(0);
    expect(reports().at(-1)).toEqual({ t: 'active', id: '1', at: t0 + 600 });
    expect(sent).toContainEqual({ t: 'ready', id: '1', endpoint: 'http://x:1' });
    // Anything else is not activity.
    notify.write('{"active": false}\n{"busy": 1}\n');
    await vi.advanceTimersByTimeAsync(1000);
    expect(reports()).toHaveLength(3);
    expect(sent.filter((m) => m.t === 'notify_bad')).toHaveLength(2);
  });

  it('makes the cgroup before the session starts, says when its memory cap killed it, and removes the cgroup', async () => {
    const r = runtime();
    const cgroup: CgroupSpec = {
      version: 1,
      dirs: [{ path: '/cg/s1', files: [] }],
      oomFile: '/cg/s1/memory.oom_control',
    };
    r.order(start({ cgroup }));
    expect(cgroupCalls).toEqual(['create /cg/s1']);
    oomCount = 1;
    children[0]!.emit('exit', 137, null);
    for (const pipe of [children[0]!.stdout, children[0]!.stderr, children[0]!.stdio[3] as PassThrough]) pipe.end();
    await vi.advanceTimersByTimeAsync(0);
    expect(sent.at(-1)).toEqual({ t: 'exit', id: '1', code: 137, oom: true });
    expect(cgroupCalls).toEqual(['create /cg/s1', 'remove /cg/s1']);
  });

  it('what a session wrote before it exited is passed on before its exit, in whatever order Node reports the exit and the ends of its pipes', async () => {
    const r = runtime();
    r.order(start());
    const child = children[0]!;
    const notify = child.stdio[3] as PassThrough;
    // Node reports the exit first; fd 3 has already ended, stdout and stderr are read after the exit.
    notify.end();
    await vi.advanceTimersByTimeAsync(0);
    child.emit('exit', 0, null);
    await vi.advanceTimersByTimeAsync(10);
    child.stdout.end('a summary\nits last line without a newline');
    await vi.advanceTimersByTimeAsync(10);
    child.stderr.end('an error\n');
    await vi.advanceTimersByTimeAsync(0);
    expect(sent.filter((m) => m.t === 'out' || m.t === 'exit')).toEqual([
      { t: 'out', id: '1', stream: 'stdout', lines: ['a summary'] },
      { t: 'out', id: '1', stream: 'stdout', lines: ['its last line without a newline'] },
      { t: 'out', id: '1', stream: 'stderr', lines: ['an error'] },
      { t: 'exit', id: '1', code: 0 },
    ]);
    // The group was SIGKILLed at the exit, so nothing left in it holds the pipes open.
    expect(signals[0]).toEqual([1000, 'SIGKILL']);
  });

  it('a pipe that never ends (held by a process that left the group) holds the exit back 250 ms after it, no longer', async () => {
    const r = runtime();
    r.order(start());
    const child = children[0]!;
    child.emit('exit', null, 'SIGTERM');
    await vi.advanceTimersByTimeAsync(200);
    child.stdout.write('late\n');
    (child.stdio[3] as PassThrough).write('{"ready": true}\n');
    await vi.advanceTimersByTimeAsync(49);
    expect(sent.some((m) => m.t === 'exit')).toBe(false);
    await vi.advanceTimersByTimeAsync(1);
    expect(sent.filter((m) => m.t !== 'started' && m.t !== 'active')).toEqual([
      { t: 'out', id: '1', stream: 'stdout', lines: ['late'] },
      { t: 'ready', id: '1' },
      { t: 'exit', id: '1', code: 143 },
    ]);
  });
});
