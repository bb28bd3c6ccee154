// Work inside a live session (issue 47): commands and files through the API, judged from outside. The
// test finds a command's processes itself, in /proc, by a variable of its own in their environment, and
// reads their user, capabilities, cgroup and namespaces there.
import { randomBytes } from 'node:crypto';
import { readFileSync, readdirSync, readlinkSync, rmSync, writeFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sessionCgroupsOf, sessionDirOf, sessionPids, until, type Started } from '../support/processes.js';
import { API_KEY, startSystem, type System } from '../support/system.js';

const PROXY_SECRET = randomBytes(32).toString('hex');
/** The session: marks its own /tmp, says it is ready, and waits. */
const SESSION = 'echo "$SESSION_ID" > /tmp/marker; echo \'{"ready": true}\' >&3; exec sleep 100000 3>&-';

/** The pids of live processes whose environment holds `CQ_CMD=<nonce>`. */
function commandPids(nonce: string): number[] {
  const pids: number[] = [];
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      if (readFileSync(`/proc/${entry}/environ`, 'latin1').split('\0').includes(`CQ_CMD=${nonce}`)) {
        const stat = readFileSync(`/proc/${entry}/stat`, 'utf8');
        if (stat.slice(stat.lastIndexOf(')') + 2)[0] !== 'Z') pids.push(Number(entry));
      }
    } catch {
      // gone meanwhile
    }
  }
  return pids;
}

interface Result {
  status: number;
  body: Record<string, unknown> & { error?: Record<string, unknown> };
}

async function call(baseUrl: string, method: string, path: string, body?: unknown, key = API_KEY): Promise<Result> {
  const res = await fetch(`${baseUrl}${path}`, {
    method,
    headers: {
      authorization: `Bearer ${key}`,
      ...(body === undefined ? {} : { 'content-type': 'application/json' }),
    },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });
  const text = await res.text();
  return { status: res.status, body: text === '' ? {} : (JSON.parse(text) as Result['body']) };
}

describe.each([
  ['root', {}],
  ['SESSION_USER=nobody', { SESSION_USER: 'nobody' }],
] as const)('commands inside a session, as %s', (as, userEnv) => {
  let system: System;
  let host: Started;
  let sessionId: string;
  let fence: number;
  const userId = `exec-${as === 'root' ? 'root' : 'nobody'}`;
  const run = (body: Record<string, unknown>): Promise<Result> =>
    call(system.api.baseUrl, 'POST', `/v1/sessions/${sessionId}/commands`, body);

  beforeAll(async () => {
    system = await startSystem({
      workers: 0,
      apiEnv: { PROXY_SECRET },
      workerEnv: { PROXY_SECRET, SESSION_COMMAND: SESSION, SESSION_PIDS_MAX: '64', ...userEnv },
    });
    host = await system.addWorker('host-exec');
    const session = await system.client.spawn((await system.client.issueToken({ userId })).token);
    sessionId = session.sessionId;
    fence = session.fence;
    await until(async () => (await system.client.findSession(userId))?.ready === true, 15_000, 'the session ready');
  });
  afterAll(async () => {
    await system.client.stopSession(userId).catch(() => {});
  });

  it('runs inside the session: its /tmp and processes, not the host’s; its user, no capability, its cgroup; stdin given then closed', async () => {
    const hostFile = `/tmp/cq-exec-host-${process.pid}`;
    writeFileSync(hostFile, 'host');
    try {
      const nonce = randomBytes(8).toString('hex');
      const pending = run({
        argv: [
          'sh',
          '-c',
          'cat /tmp/marker; ls /proc | grep -c "^[0-9]"; test -e "$1" && echo host-file || echo no-host-file; pwd; echo "$HOME"; id -u; sed -n 1p; sleep 1',
          'sh',
          hostFile,
        ],
        stdin: 'from stdin\nsecond line\n',
        env: { CQ_CMD: nonce },
      });
      // Seen from outside while it runs: its user, its capabilities, its cgroup, its namespaces.
      await until(() => commandPids(nonce).length > 0, 5000, 'the command running');
      const [pid] = commandPids(nonce);
      const status = readFileSync(`/proc/${pid}/status`, 'utf8');
      const uid = Number(/^Uid:\s+(\d+)/m.exec(status)![1]);
      expect(uid).toBe(as === 'root' ? 0 : 65534);
      expect(/^CapEff:\s+(\w+)/m.exec(status)![1]).toBe('0000000000000000');
      expect(/^CapPrm:\s+(\w+)/m.exec(status)![1]).toBe('0000000000000000');
      // The session's own processes (its init and below: the wrappers before them are in the host's).
      const nsOf = (p: number | 'self', kind: string): string | undefined => {
        try {
          return readlinkSync(`/proc/${p}/ns/${kind}`);
        } catch {
          return undefined; // gone meanwhile
        }
      };
      const inSession = sessionPids(userId).filter(
        (p) => !commandPids(nonce).includes(p) && ![undefined, nsOf('self', 'pid')].includes(nsOf(p, 'pid')),
      );
      expect(inSession.length).toBeGreaterThan(0);
      for (const ns of ['pid', 'mnt', 'net']) expect(nsOf(pid!, ns), ns).toBe(nsOf(inSession[0]!, ns));
      const cgroup = /^\d+:pids:(.*)$/m.exec(readFileSync(`/proc/${pid}/cgroup`, 'utf8'))![1]!;
      expect(sessionCgroupsOf(host.child.pid!)().some((name) => cgroup.endsWith(`/${name}`))).toBe(true);

      const result = await pending;
      expect(result.status).toBe(200);
      const dir = sessionDirOf(userId, fence);
      expect(result.body).toMatchObject({ exitCode: 0, stderr: '', truncated: false });
      const lines = String(result.body['stdout']).trim().split('\n');
      expect(lines[0]).toBe(sessionId);
      // Only the session's own processes: its init, sh, sleep, and the command's few.
      expect(Number(lines[1])).toBeLessThan(12);
      expect(lines.slice(2)).toEqual(['no-host-file', dir, dir, as === 'root' ? '0' : '65534', 'from stdin']);
    } finally {
      rmSync(hostFile, { force: true });
    }
  });

  it('answers the exit code, the signal, and each output cut at 1 MiB', async () => {
    expect((await run({ argv: ['sh', '-c', 'echo out; echo err >&2; exit 3'] })).body).toEqual({
      exitCode: 3,
      stdout: 'out\n',
      stderr: 'err\n',
      truncated: false,
    });
    expect((await run({ argv: ['sh', '-c', 'kill -9 $$'] })).body).toMatchObject({ exitCode: 137, signal: 'SIGKILL' });
    const long = await run({ argv: ['head', '-c', '3000000', '/dev/zero'] });
    expect(long.body['truncated']).toBe(true);
    expect(String(long.body['stdout']).length).toBe(1024 * 1024);
    // A program that does not exist: the command's own failure, as a shell would say it.
    const missing = await run({ argv: ['no-such-program-here'] });
    expect(missing.status).toBe(200);
    // 127 where no directory of PATH has it; 126 where one it may not search could (as a shell says it).
    expect([126, 127]).toContain(missing.body['exitCode']);
    expect(missing.body['stderr']).toContain('no-such-program-here');
  });

  it('a command that outlives timeoutMs is killed with its children: 408 command_timeout with what it printed', async () => {
    const nonce = randomBytes(8).toString('hex');
    const result = await run({
      argv: ['sh', '-c', 'sleep 100 & sleep 100 & echo started; wait'],
      env: { CQ_CMD: nonce },
      timeoutMs: 1000,
    });
    expect(result.status).toBe(408);
    expect(result.body.error).toMatchObject({ code: 'command_timeout', stdout: 'started\n', signal: 'SIGKILL' });
    expect(commandPids(nonce)).toEqual([]);
  });

  it('bad input: 400, and nothing runs', async () => {
    expect((await run({ argv: [] })).status).toBe(400);
    expect((await run({ argv: ['true'], cwd: 'relative' })).status).toBe(400);
    expect((await run({ argv: ['true'], env: { 'A=B': 'x' } })).status).toBe(400);
    const gone = await call(system.api.baseUrl, 'POST', '/v1/sessions/00000000-0000-4000-8000-000000000000/commands', {
      argv: ['true'],
    });
    expect(gone.status).toBe(404);
    expect(gone.body.error).toMatchObject({ code: 'no_session' });
  });

  it('a session that ends kills its commands: the command is answered 404 no_session', async () => {
    const nonce = randomBytes(8).toString('hex');
    const pending = run({ argv: ['sleep', '100'], env: { CQ_CMD: nonce } });
    await until(() => commandPids(nonce).length > 0, 5000, 'the command running');
    await system.client.stopSession(userId);
    const result = await pending;
    expect(result.status, JSON.stringify(result.body)).toBe(404);
    expect(result.body.error).toMatchObject({ code: 'no_session' });
    await until(() => commandPids(nonce).length === 0, 2000, 'the command gone');
  });
});
