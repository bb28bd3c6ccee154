// Terminals inside a live session (issue 47, item 2): the exec WebSocket with Kubernetes' framing, judged
// from outside: the test reads the command's processes in /proc, and what they leave in the session.
import { execFileSync, spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import WebSocket from 'ws';
import { CommandTimeoutError, NoFileError } from '@cq/client';
import { cleanUp } from '@cq/test-harness';
import { cq } from '../support/cli.js';
import { ROOT, pidsWithEnv, until } from '../support/processes.js';
import { API_KEY, sessionVisibleDir, startSystem, type System } from '../support/system.js';

const PROXY_SECRET = randomBytes(32).toString('hex');
const SESSION = 'echo \'{"ready": true}\' >&3; exec sleep 100000 3>&-';

/** Live pids whose environment holds `CQ_CMD=<nonce>` (a command the test started, and what it started). */
const commandPids = (nonce: string): number[] => pidsWithEnv([`CQ_CMD=${nonce}`]);

/** An exec WebSocket, with what came on each channel and how it closed. */
interface Terminal {
  ws: WebSocket;
  /** stdout (and, with a terminal, stderr) so far, as text. */
  out(): string;
  err(): string;
  /** The order of what came: channel numbers, then 'close'. */
  order: Array<number | 'close'>;
  status: Promise<Record<string, unknown> | undefined>;
  closed: Promise<{ code: number; reason: string }>;
  send(channel: number, bytes: string | Buffer): void;
}

function openTerminal(system: System, sessionId: string, query: Record<string, string>): Promise<Terminal> {
  const url = new URL(`${system.api.baseUrl.replace('http', 'ws')}/v1/sessions/${sessionId}/exec`);
  for (const [k, v] of Object.entries(query)) url.searchParams.set(k, v);
  const ws = new WebSocket(url, ['v5.channel.k8s.io'], { headers: { authorization: `Bearer ${API_KEY}` } });
  let out = '';
  let err = '';
  const order: Array<number | 'close'> = [];
  let status: Record<string, unknown> | undefined;
  const closed = new Promise<{ code: number; reason: string }>((resolve) =>
    ws.once('close', (code, reason) => {
      order.push('close');
      resolve({ code, reason: reason.toString() });
    }),
  );
  ws.on('message', (data: Buffer) => {
    order.push(data[0]!);
    if (data[0] === 1) out += data.subarray(1).toString();
    if (data[0] === 2) err += data.subarray(1).toString();
    if (data[0] === 3) status = JSON.parse(data.subarray(1).toString()) as Record<string, unknown>;
  });
  return new Promise((resolve, reject) => {
    ws.once('error', reject);
    ws.once('open', () => {
      expect(ws.protocol).toBe('v5.channel.k8s.io');
      resolve({
        ws,
        out: () => out,
        err: () => err,
        order,
        status: closed.then(() => status),
        closed,
        send: (channel, bytes) => ws.send(Buffer.concat([Buffer.from([channel]), Buffer.from(bytes)])),
      });
    });
  });
}

describe('terminals inside a session', () => {
  let system: System;
  let sessionId: string;
  const run = async (argv: string[]): Promise<string> => {
    const res = await fetch(`${system.api.baseUrl}/v1/sessions/${sessionId}/commands`, {
      method: 'POST',
      headers: { authorization: `Bearer ${API_KEY}`, 'content-type': 'application/json' },
      body: JSON.stringify({ argv }),
    });
    return String(((await res.json()) as { stdout: string }).stdout);
  };

  beforeAll(async () => {
    system = await startSystem({
      workers: 0,
      apiEnv: { PROXY_SECRET },
      workerEnv: { PROXY_SECRET, SESSION_COMMAND: SESSION, SESSION_USER: 'nobody', SESSION_GRACE_MS: '1000' },
    });
    await system.addWorker('host-terminal');
    sessionId = (await system.client.spawn((await system.client.issueToken({ userId: 'term' })).token)).sessionId;
    await until(async () => (await system.client.findSession('term'))?.ready === true, 15_000, 'ready');
  });
  afterAll(async () => {
    await system.client.stopSession('term').catch(() => {});
  });

  it('without a terminal: stdin in, stdout and stderr apart, closing stdin, then the status before a normal close', async () => {
    const t = await openTerminal(system, sessionId, {
      argv: JSON.stringify(['sh', '-c', 'cat; echo err >&2; exit 3']),
    });
    t.send(0, 'hello\n');
    t.send(255, Buffer.from([0]));
    expect(await t.closed).toEqual({ code: 1000, reason: 'exited 3' });
    expect(await t.status).toMatchObject({ status: 'Failure', exitCode: 3 });
    expect([t.out(), t.err()]).toEqual(['hello\n', 'err\n']);
    // The status is the last message, then the close.
    expect(t.order.slice(-2)).toEqual([3, 'close']);
  });

  it('tty=true: a real terminal of the size asked; a resize changes it; Ctrl-C interrupts the foreground job', async () => {
    const t = await openTerminal(system, sessionId, {
      argv: JSON.stringify(['/bin/sh']),
      tty: 'true',
      cols: '91',
      rows: '33',
    });
    t.send(0, 'tty; stty size\n');
    await until(() => /\/dev\/pts\/\d+\r?\n33 91\r?\n/.test(t.out()), 5000, 'tty and its size');
    // A foreground job that says its size when SIGWINCH comes (a trap run between its sleeps; a job of
    // its own, as the interactive shell gives each: SIGWINCH goes to the terminal's foreground group).
    t.send(0, `sh -c "trap 'stty size' WINCH; while :; do sleep 0.05; done"\n`);
    await until(() => t.out().includes('while :'), 5000, 'the loop echoed');
    t.send(4, JSON.stringify({ Width: 120, Height: 40 }));
    await until(() => /40 120\r?\n/.test(t.out()), 5000, 'the new size, told by SIGWINCH');
    t.send(0, '\x03');
    t.send(0, 'sleep 100\n');
    await until(() => /sleep 100/.test(t.out()), 5000, 'sleep echoed');
    t.send(0, '\x03');
    t.send(0, 'echo "after:$?"\n');
    await until(() => /after:130/.test(t.out()), 5000, 'the sleep interrupted');
    t.send(0, 'exit 5\n');
    expect((await t.closed).code).toBe(1000);
    expect(await t.status).toMatchObject({ status: 'Failure', exitCode: 5 });
  });

  it('a dropped WebSocket hangs the command up: SIGHUP, then SIGKILL after the grace time; nothing runs on unseen', async () => {
    const nonce = randomBytes(8).toString('hex');
    // One that ends on SIGHUP (saying so in its /tmp), one that ignores it.
    const polite = await openTerminal(system, sessionId, {
      argv: JSON.stringify([
        'sh',
        '-c',
        `trap 'echo hup > /tmp/hup-${nonce}; exit 0' HUP; CQ_CMD=${nonce}-a sleep 1000 & wait`,
      ]),
    });
    const stubborn = await openTerminal(system, sessionId, {
      argv: JSON.stringify(['sh', '-c', `trap '' HUP; CQ_CMD=${nonce}-b exec sleep 1000`]),
    });
    await until(() => commandPids(`${nonce}-a`).length > 0 && commandPids(`${nonce}-b`).length > 0, 5000, 'running');
    polite.ws.terminate();
    stubborn.ws.terminate();
    await until(async () => (await run(['cat', `/tmp/hup-${nonce}`])) === 'hup\n', 3000, 'the SIGHUP seen');
    const droppedAt = Date.now();
    await until(() => commandPids(`${nonce}-b`).length === 0, 3000, 'the one that ignored SIGHUP killed');
    // Not before its grace time (1 s) had passed.
    expect(Date.now() - droppedAt).toBeGreaterThan(500);
  });

  it('bad input: 400 for an argv that is not a JSON array, and without an upgrade', async () => {
    const bad = await fetch(`${system.api.baseUrl}/v1/sessions/${sessionId}/exec?argv=ls`, {
      headers: { authorization: `Bearer ${API_KEY}` },
    });
    expect(bad.status).toBe(400);
    const plain = await fetch(`${system.api.baseUrl}/v1/sessions/${sessionId}/exec`, {
      headers: { authorization: `Bearer ${API_KEY}` },
    });
    expect(plain.status).toBe(400);
    expect(((await plain.json()) as { error: { message: string } }).error.message).toContain('WebSocket');
  });
});

describe('cq exec and cq cp, and the client’s handles', () => {
  let system: System;
  let env: Record<string, string>;
  const userId = 'cli-exec';

  beforeAll(async () => {
    system = await startSystem({
      workers: 0,
      apiEnv: { PROXY_SECRET },
      workerEnv: { PROXY_SECRET, SESSION_COMMAND: SESSION },
    });
    await system.addWorker('host-cli');
    await system.client.spawn((await system.client.issueToken({ userId })).token);
    await until(async () => (await system.client.findSession(userId))?.ready === true, 15_000, 'ready');
    env = { CQ_API_URL: system.api.baseUrl, CQ_API_KEY: API_KEY };
  });
  afterAll(async () => {
    await system.client.stopSession(userId).catch(() => {});
  });

  it('cq exec: the command’s output apart and its exit status; -i gives it our stdin, without -i its stdin is closed', async () => {
    const ran = await cq(['exec', userId, '--', 'sh', '-c', 'echo out; echo err >&2; exit 7'], env);
    expect(ran).toMatchObject({ code: 7, stdout: 'out\n' });
    expect(ran.stderr).toBe('err\n');
    expect(await cq(['exec', '-i', userId, '--', 'tr', 'a-z', 'A-Z'], env, 'piped in\n')).toMatchObject({
      code: 0,
      stdout: 'PIPED IN\n',
    });
    // A command that reads stdin ends at once without -i, though our stdin stays open.
    expect(await cq(['exec', userId, '--', 'cat'], env)).toMatchObject({ code: 0, stdout: '' });
    expect((await cq(['exec', 'nobody-here', '--', 'true'], env)).code).toBe(5);
  });

  it('cq cp: a file into the session and back, byte for byte, streamed both ways', async () => {
    const dir = sessionVisibleDir('cp');
    const bytes = randomBytes(2 * 1024 * 1024 + 17);
    writeFileSync(join(dir, 'in.bin'), bytes);
    expect((await cq(['cp', join(dir, 'in.bin'), `${userId}:/tmp/copied.bin`], env)).code).toBe(0);
    expect((await cq(['cp', `${userId}:/tmp/copied.bin`, join(dir, 'out.bin')], env)).code).toBe(0);
    expect(readFileSync(join(dir, 'out.bin')).equals(bytes)).toBe(true);
    const missing = await cq(['cp', `${userId}:/tmp/not-there`, join(dir, 'x')], env);
    expect(missing.code).toBe(9);
    expect(missing.stderr).toContain('no_file');
    expect((await cq(['cp', 'a', 'b'], env)).code).toBe(2);
  });

  it('cq exec -it in tmux: a raw terminal of the window’s size, resized with it; keys go through; its exit status', async () => {
    const socket = `cq-exec-${process.pid}`;
    const dir = sessionVisibleDir('tmux');
    const status = join(dir, 'status');
    const tmux = (...args: string[]): string => execFileSync('tmux', ['-L', socket, ...args], { encoding: 'utf8' });
    cleanUp(() => spawnSync('tmux', ['-L', socket, 'kill-server']));
    const line = `${process.execPath} ${ROOT}packages/cli/bin/cq.js exec -it ${userId} -- /bin/sh; echo "exit:$?" > ${status}`;
    execFileSync('tmux', ['-L', socket, '-f', '/dev/null', 'new-session', '-d', '-x', '100', '-y', '30', line], {
      env: { ...process.env, ...env },
    });
    const pane = (): string => tmux('capture-pane', '-p', '-J');
    /** Waits for `condition`; a failure shows the window as it was. */
    const seen = async (condition: () => boolean, what: string): Promise<void> => {
      await until(condition, 5000, what).catch((err: Error) => {
        throw new Error(`${err.message}; the window:\n${pane()}`);
      });
    };
    // The shell's prompt (# as root).
    await until(() => /[$#] $/m.test(pane()), 10_000, 'the prompt');
    tmux('send-keys', 'tty; stty size', 'Enter');
    await seen(() => /\/dev\/pts\/\d+\s+30 100/.test(pane()), "tty and the window's size");
    // A foreground job that says its size when SIGWINCH comes (the resize reaches the session's terminal
    // through cq and its host a moment after the window's): asked once, it could answer the old one.
    // Each job is found in /proc by a variable of its own.
    const job = `winch-${process.pid}`;
    tmux('send-keys', `CQ_CMD=${job} sh -c "trap 'stty size' WINCH; while :; do sleep 0.05; done"`, 'Enter');
    await seen(() => commandPids(job).length > 0, 'the job started');
    tmux('resize-window', '-x', '120', '-y', '40');
    await seen(() => /^40 120$/m.test(pane()), 'the new size, told by SIGWINCH');
    // Keys go through raw: Ctrl-C interrupts the command's foreground job, not cq.
    tmux('send-keys', 'C-c');
    await seen(() => commandPids(job).length === 0, 'the job interrupted');
    const sleeper = `sleep-${process.pid}`;
    tmux('send-keys', `CQ_CMD=${sleeper} sleep 100`, 'Enter');
    await seen(() => commandPids(sleeper).length > 0, 'the sleep started');
    tmux('send-keys', 'C-c');
    tmux('send-keys', 'echo "after:$?"', 'Enter');
    await seen(() => /after:130/.test(pane()), 'the sleep interrupted');
    expect(commandPids(sleeper)).toEqual([]);
    tmux('send-keys', 'exit 6', 'Enter');
    await until(() => existsSync(status), 5000, 'cq exited');
    expect(readFileSync(status, 'utf8').trim()).toBe('exit:6');
  });

  it('the client: session.commands.run, session.files.write and read as streams, session.exec as a duplex with its exit code', async () => {
    const session = await system.client.session((await system.client.getSession(userId)).sessionId);
    expect(await session.commands.run(['sh', '-c', 'echo "$A"'], { env: { A: 'from the client' } })).toMatchObject({
      exitCode: 0,
      stdout: 'from the client\n',
    });
    await expect(session.commands.run(['sleep', '10'], { timeoutMs: 200 })).rejects.toBeInstanceOf(CommandTimeoutError);
    async function* parts(): AsyncGenerator<Uint8Array> {
      for (let i = 0; i < 100; i++) yield new TextEncoder().encode(`line ${i}\n`);
    }
    await session.files.write('/tmp/streamed', parts());
    const text = await new Response(await session.files.read('/tmp/streamed')).text();
    expect(text.split('\n')).toHaveLength(101);
    await expect(session.files.read('/tmp/nothing')).rejects.toBeInstanceOf(NoFileError);
    const shell = await session.exec({ argv: ['sh', '-c', 'read x; echo "got $x"; exit 3'] });
    let out = '';
    shell.on('data', (chunk: Buffer) => (out += chunk.toString()));
    shell.end('hello\n');
    expect(await shell.exited).toMatchObject({ exitCode: 3, status: 'Failure' });
    expect(out).toBe('got hello\n');
    expect(shell.exitCode).toBe(3);
  });
});
