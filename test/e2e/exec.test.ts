// Work inside a live session (issue 47): commands and files through the API, judged from outside. The
// test finds a command's processes itself, in /proc, by a variable of its own in their environment, and
// reads their user, capabilities, cgroup and namespaces there.
import { createHash, randomBytes } from 'node:crypto';
import { readFileSync, readlinkSync, rmSync, writeFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  pidsWithEnv,
  rss,
  sessionCgroupsOf,
  sessionDirOf,
  sessionPids,
  until,
  type Started,
} from '../support/processes.js';
import { API_KEY, startSystem, type System } from '../support/system.js';

const PROXY_SECRET = randomBytes(32).toString('hex');
/** The session: marks its own /tmp, says it is ready, and waits. */
const SESSION = 'echo "$SESSION_ID" > /tmp/marker; echo \'{"ready": true}\' >&3; exec sleep 100000 3>&-';

/** Live pids whose environment holds `CQ_CMD=<nonce>` (a command the test started, and what it started). */
const commandPids = (nonce: string): number[] => pidsWithEnv([`CQ_CMD=${nonce}`]);

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

  it('files: what is put at /tmp/x is what the session reads there, and comes back byte for byte', async () => {
    const bytes = randomBytes(300_000);
    const put = await fetch(`${system.api.baseUrl}/v1/sessions/${sessionId}/files?path=/tmp/x.bin`, {
      method: 'PUT',
      headers: { authorization: `Bearer ${API_KEY}` },
      body: bytes,
    });
    expect(put.status).toBe(204);
    const seen = await run({ argv: ['sh', '-c', 'sha256sum /tmp/x.bin | cut -d" " -f1; stat -c "%u %a" /tmp/x.bin'] });
    const [sum, owner] = String(seen.body['stdout']).trim().split('\n');
    expect(sum).toBe(createHash('sha256').update(bytes).digest('hex'));
    expect(owner).toBe(`${as === 'root' ? 0 : 65534} 644`);
    const got = await fetch(`${system.api.baseUrl}/v1/sessions/${sessionId}/files?path=/tmp/x.bin`, {
      headers: { authorization: `Bearer ${API_KEY}` },
    });
    expect(got.status).toBe(200);
    expect(Buffer.from(await got.arrayBuffer()).equals(bytes)).toBe(true);
    // An empty file is a file.
    await run({ argv: ['touch', '/tmp/empty'] });
    const empty = await fetch(`${system.api.baseUrl}/v1/sessions/${sessionId}/files?path=/tmp/empty`, {
      headers: { authorization: `Bearer ${API_KEY}` },
    });
    expect([empty.status, await empty.text()]).toEqual([200, '']);
  });

  it('files: never outside the session’s view (.., symlinks, /proc/<pid>/root), never where the session could not', async () => {
    const secret = `/tmp/cq-exec-secret-${process.pid}`;
    writeFileSync(secret, 'host secret');
    try {
      const get = async (path: string): Promise<[number, string]> => {
        const res = await fetch(
          `${system.api.baseUrl}/v1/sessions/${sessionId}/files?path=${encodeURIComponent(path)}`,
          { headers: { authorization: `Bearer ${API_KEY}` } },
        );
        const text = await res.text();
        return [res.status, res.status === 200 ? text : (JSON.parse(text) as { error: { code: string } }).error.code];
      };
      const put = async (path: string, body = 'x'): Promise<[number, string]> => {
        const res = await fetch(
          `${system.api.baseUrl}/v1/sessions/${sessionId}/files?path=${encodeURIComponent(path)}`,
          { method: 'PUT', headers: { authorization: `Bearer ${API_KEY}` }, body },
        );
        const text = await res.text();
        return [res.status, text === '' ? '' : (JSON.parse(text) as { error: { code: string } }).error.code];
      };
      // The host's /tmp is not the session's, by any way of naming it.
      expect(await get(secret)).toEqual([404, 'no_file']);
      expect(await get(`/etc/../tmp/../${secret}`)).toEqual([404, 'no_file']);
      expect(await get(`/proc/1/root${secret}`)).toEqual([404, 'no_file']);
      // The host's processes are not in the session's /proc: the worker host's pid names nothing there.
      expect((await get(`/proc/${host.child.pid!}/root${secret}`))[0]).toBe(404);
      await run({ argv: ['ln', '-sf', '/proc/1/root/tmp', '/tmp/escape'] });
      expect(await get(`/tmp/escape/${secret.slice(5)}`)).toEqual([404, 'no_file']);
      // A write through the same names lands in the session's own /tmp (as nobody, the session may not
      // even follow /proc/1/root, its init's), never in the host's.
      if (as === 'root') {
        expect(await put(`/tmp/escape/${secret.slice(5)}`, 'written inside')).toEqual([204, '']);
        expect((await run({ argv: ['cat', secret] })).body['stdout']).toBe('written inside');
      } else expect((await put(`/tmp/escape/${secret.slice(5)}`, 'written inside'))[0]).not.toBe(204);
      expect(readFileSync(secret, 'utf8')).toBe('host secret');
      // The host is read-only to the session, root or not; a missing directory is no file; a directory no file.
      expect(await put(`/etc/cq-exec-${process.pid}`)).toEqual([403, 'path_forbidden']);
      expect(await put('/usr/bin/env')).toEqual([403, 'path_forbidden']);
      expect(await put('/no/such/dir/x')).toEqual([404, 'no_file']);
      expect(await put('/tmp/')).toEqual([400, 'invalid_request']);
      expect(await get('/tmp')).toEqual([400, 'invalid_request']);
      expect(await get('/no/such/file')).toEqual([404, 'no_file']);
      expect(await get('relative/path')).toEqual([400, 'invalid_request']);
      // A file the session's user may not read: as nobody, /etc/shadow; as root without a capability,
      // a file of another user that only its owner may read.
      if (as === 'root') {
        await run({ argv: ['sh', '-c', 'umask 077; echo mine > /tmp/owned'] });
        expect(await get('/tmp/owned')).toEqual([200, 'mine\n']);
        expect(await get('/etc/shadow')).toEqual([200, readFileSync('/etc/shadow', 'utf8')]);
      } else expect(await get('/etc/shadow')).toEqual([403, 'path_forbidden']);
    } finally {
      rmSync(secret, { force: true });
    }
  });

  it('FILES_MAX_MB: a larger upload is refused 413 while it streams, and leaves neither a partial file nor a changed one', async () => {
    const small = await system.addApi({ FILES_MAX_MB: '1' });
    const url = (path: string): string => `${small.baseUrl}/v1/sessions/${sessionId}/files?path=${path}`;
    const auth = { authorization: `Bearer ${API_KEY}` };
    expect((await fetch(url('/tmp/kept'), { method: 'PUT', headers: auth, body: 'before' })).status).toBe(204);
    // Declared too large: refused before a byte is read.
    const declared = await fetch(url('/tmp/kept'), {
      method: 'PUT',
      headers: auth,
      body: Buffer.alloc(2 * 1024 * 1024),
    });
    expect(declared.status).toBe(413);
    // Streamed without a length: refused once it passes the limit.
    let sent = 0;
    const stream = new ReadableStream<Uint8Array>({
      pull(controller) {
        if (sent >= 8 * 1024 * 1024) controller.close();
        else {
          sent += 64 * 1024;
          controller.enqueue(new Uint8Array(64 * 1024));
        }
      },
    });
    const streamed = await fetch(url('/tmp/kept'), {
      method: 'PUT',
      headers: auth,
      body: stream,
      duplex: 'half',
    } as RequestInit).catch((err: unknown) => err as Error);
    // The API answers 413 and closes the connection mid-upload; a client may see either.
    if (!(streamed instanceof Error)) expect(streamed.status).toBe(413);
    await until(
      async () => !String((await run({ argv: ['ls', '-a', '/tmp'] })).body['stdout']).includes('.cq-upload'),
      5000,
      'no partial upload left',
    );
    expect((await run({ argv: ['cat', '/tmp/kept'] })).body['stdout']).toBe('before');
    expect(small.logs.some((l) => l['audit'] === true && l['action'] === 'session.file_write')).toBe(true);
    // The audit lines name the command or the path, never stdin or the bytes.
    const audits = system.api.logs.filter((l) => l['audit'] === true);
    expect(audits.some((l) => l['action'] === 'session.command' && Array.isArray(l['argv']))).toBe(true);
    expect(JSON.stringify(audits)).not.toContain('from stdin');
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

describe('files stream, both ways', () => {
  it('500 MB in and out of a session: the API and the host each grow by less than 100 MB', async () => {
    const system = await startSystem({
      workers: 0,
      apiEnv: { PROXY_SECRET, FILES_MAX_MB: '600' },
      workerEnv: { PROXY_SECRET, SESSION_COMMAND: SESSION },
    });
    const host = await system.addWorker('host-files');
    const admission = await system.client.spawn((await system.client.issueToken({ userId: 'files-big' })).token);
    await until(async () => (await system.client.findSession('files-big'))?.ready === true, 15_000, 'ready');
    const url = `${system.api.baseUrl}/v1/sessions/${admission.sessionId}/files?path=${encodeURIComponent(
      `${sessionDirOf('files-big', admission.fence)}/big`,
    )}`;
    const auth = { authorization: `Bearer ${API_KEY}` };
    const SIZE = 500 * 1024 * 1024;
    const CHUNK = 1024 * 1024;
    const processes = { api: system.api.child.pid!, host: host.child.pid! };
    const before = { api: rss(processes.api), host: rss(processes.host) };
    const peak = { ...before };
    const sampler = setInterval(() => {
      peak.api = Math.max(peak.api, rss(processes.api));
      peak.host = Math.max(peak.host, rss(processes.host));
    }, 20);
    try {
      let sent = 0;
      const chunk = new Uint8Array(CHUNK).fill(7);
      const put = await fetch(url, {
        method: 'PUT',
        headers: { ...auth, 'content-length': String(SIZE) },
        body: new ReadableStream<Uint8Array>({
          pull(controller) {
            if (sent >= SIZE) controller.close();
            else {
              sent += CHUNK;
              controller.enqueue(chunk);
            }
          },
        }),
        duplex: 'half',
      } as RequestInit);
      expect(put.status).toBe(204);
      const got = await fetch(url, { headers: auth });
      expect(got.status).toBe(200);
      let received = 0;
      let wrong = 0;
      for await (const part of got.body! as unknown as AsyncIterable<Uint8Array>) {
        received += part.length;
        if (part.some((b) => b !== 7)) wrong++;
      }
      expect([received, wrong]).toEqual([SIZE, 0]);
    } finally {
      clearInterval(sampler);
    }
    const growth = { api: (peak.api - before.api) / 2 ** 20, host: (peak.host - before.host) / 2 ** 20 };
    console.info(`files 500 MB in and out: API grew ${growth.api.toFixed(1)} MiB, host ${growth.host.toFixed(1)} MiB`);
    expect(growth.api).toBeLessThan(100);
    expect(growth.host).toBeLessThan(100);
    await system.client.stopSession('files-big');
  });
});
