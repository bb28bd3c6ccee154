// Work inside a session (issue 47), measured on the built API and worker host with their defaults
// (PROXY_SECRET set; the session isolated, network none): a command's round trip (`true`), a terminal's
// keystroke echo, and streams out of a session (a terminal printing 200 MB, GET of a 200 MB file), each
// beside its limit: the same work done minimally on the host by a Node process of its own
// (exec-limit.ts): nsenter into the session's namespaces and `true`; util-linux's script running cat
// (the terminal we give a session); nsenter and the same output read from a pipe.
import { spawn } from 'node:child_process';
import { readFileSync, readdirSync, readlinkSync } from 'node:fs';
import { request } from 'node:http';
import { fileURLToPath } from 'node:url';
import { setTimeout as sleep } from 'node:timers/promises';
import WebSocket from 'ws';
import { API_KEY, Stack, percentiles } from './sessions.js';

const SECRET = 'bench-exec-secret-0123456789abcdef0123456789ab';

export interface ExecBench {
  readonly samples: number;
  readonly streamBytes: number;
  readonly commands: { ours: Percentiles; limit: Percentiles };
  readonly echo: { ours: Percentiles; limit: Percentiles };
  readonly streams: {
    terminalMBps: number;
    /** The exec WebSocket without a terminal. */
    execMBps: number;
    filesMBps: number;
    limitMBps: number;
    limitTerminalMBps: number;
    limitCatMBps: number;
  };
}

type Percentiles = { p50: number; p99: number; n: number };

/** The limit process's answer for `req`. */
function limit<T>(req: Record<string, unknown>): Promise<T> {
  return new Promise((resolve, reject) => {
    const child = spawn(
      process.execPath,
      [fileURLToPath(new URL('./exec-limit.js', import.meta.url)), JSON.stringify(req)],
      {
        stdio: ['ignore', 'pipe', 'inherit'],
      },
    );
    let out = '';
    child.stdout.on('data', (c: Buffer) => (out += c.toString()));
    child.once('close', (code) =>
      code === 0 ? resolve(JSON.parse(out) as T) : reject(new Error(`exec-limit: exit ${code}`)),
    );
  });
}

/** A process in the session's own PID namespace (its init), found in /proc by its SESSION_ID. */
function sessionInit(sessionId: string): number {
  const own = readlinkSync('/proc/self/ns/pid');
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      if (
        readFileSync(`/proc/${entry}/environ`, 'latin1').split('\0').includes(`SESSION_ID=${sessionId}`) &&
        readlinkSync(`/proc/${entry}/ns/pid`) !== own
      )
        return Number(entry);
    } catch {
      // gone meanwhile
    }
  }
  throw new Error(`no process of session ${sessionId} in a PID namespace of its own`);
}

/** An exec WebSocket of the API. */
function openWs(baseUrl: string, sessionId: string, argv: string[], tty: boolean): Promise<WebSocket> {
  const url = new URL(`${baseUrl.replace('http', 'ws')}/v1/sessions/${sessionId}/exec`);
  url.searchParams.set('argv', JSON.stringify(argv));
  if (tty) url.searchParams.set('tty', 'true');
  const ws = new WebSocket(url, ['v5.channel.k8s.io'], {
    headers: { authorization: `Bearer ${API_KEY}` },
    perMessageDeflate: false,
  });
  return new Promise((resolve, reject) => {
    ws.once('error', reject);
    ws.once('open', () => resolve(ws));
  });
}

/** Bytes a GET of `path` gives, read to the end, and MB/s. */
function download(baseUrl: string, path: string): Promise<number> {
  return new Promise((resolve, reject) => {
    const started = performance.now();
    const req = request(`${baseUrl}${path}`, { headers: { authorization: `Bearer ${API_KEY}` } }, (res) => {
      let got = 0;
      res.on('data', (c: Buffer) => (got += c.length));
      res.on('end', () => resolve(got / 1e6 / ((performance.now() - started) / 1000)));
    });
    req.on('error', reject);
    req.end();
  });
}

export async function benchExec(redisUrl: string, quick: boolean): Promise<ExecBench> {
  const samples = quick ? 30 : 300;
  const streamBytes = quick ? 50_000_000 : 200_000_000;
  const stack = new Stack(redisUrl, `bench-exec-${process.pid}`, `echo '{"ready": true}' >&3; exec sleep 100000 3>&-`);
  try {
    await stack.startApi({ PROXY_SECRET: SECRET });
    await stack.addHost('exec-host', 2, { PROXY_SECRET: SECRET });
    const { token } = (await stack.post('/v1/tokens', { userId: 'bench-exec' })) as { token: string };
    const { sessionId } = (await stack.post('/v1/spawn', { token }, false)) as { sessionId: string };
    while (((await stack.get(`/v1/sessions/${sessionId}`)) as { ready?: boolean }).ready !== true) await sleep(20);
    const init = sessionInit(sessionId);
    const enter = ['nsenter', `--target=${init}`, '--pid', '--mount', '--net', '--ipc', '--uts', '--'];

    // Commands: `true`, one after the other, the limit interleaved in rounds.
    const ours: number[] = [];
    const limitRuns: number[] = [];
    const rounds = 3;
    for (let round = 0; round < rounds; round++) {
      for (let i = 0; i < samples / rounds; i++) {
        const started = performance.now();
        await stack.post(`/v1/sessions/${sessionId}/commands`, { argv: ['true'] });
        ours.push(performance.now() - started);
      }
      limitRuns.push(...(await limit<number[]>({ mode: 'run', argv: [...enter, 'true'], n: samples / rounds })));
    }

    // Keystroke echo: one byte to a terminal running cat, back from its echo.
    const ws = await openWs(stack.baseUrl, sessionId, ['cat'], true);
    const echoes: number[] = [];
    let waiting: (() => void) | undefined;
    ws.on('message', (data: Buffer) => {
      if (data[0] === 1 && data.includes(0x61)) waiting?.();
    });
    for (let i = 0; i < samples + 5; i++) {
      const started = performance.now();
      await new Promise<void>((resolve) => {
        waiting = resolve;
        ws.send(Buffer.from([0, 0x61]));
      });
      if (i >= 5) echoes.push(performance.now() - started);
    }
    ws.close();
    const echoLimit = await limit<number[]>({
      mode: 'echo',
      argv: ['script', '--quiet', '--command', 'cat', '/dev/null'],
      n: samples,
    });

    // Streams out of the session: the exec WebSocket with a terminal and without one, a file read.
    const printed = async (tty: boolean): Promise<number> => {
      const ws = await openWs(stack.baseUrl, sessionId, ['head', '-c', String(streamBytes), '/dev/zero'], tty);
      return new Promise<number>((resolve) => {
        const started = performance.now();
        let got = 0;
        ws.on('message', (data: Buffer) => {
          if (data[0] === 1) got += data.length - 1;
        });
        ws.once('close', () => resolve(got / 1e6 / ((performance.now() - started) / 1000)));
      });
    };
    const terminalMBps = await printed(true);
    const execMBps = await printed(false);
    const file = '/tmp/bench-exec-file';
    await stack.post(`/v1/sessions/${sessionId}/commands`, {
      argv: ['sh', '-c', `head -c ${streamBytes} /dev/zero > ${file}`],
    });
    const filesMBps = await download(stack.baseUrl, `/v1/sessions/${sessionId}/files?path=${encodeURIComponent(file)}`);
    const limitStream = await limit<{ mbps: number }>({
      mode: 'stream',
      argv: [...enter, 'head', '-c', String(streamBytes), '/dev/zero'],
    });
    const limitCat = await limit<{ mbps: number }>({ mode: 'stream', argv: [...enter, 'cat', file] });
    // The terminal's own limit: the same output through script's terminal, read from a pipe.
    const limitTerminal = await limit<{ mbps: number }>({
      mode: 'stream',
      argv: [...enter, 'script', '--quiet', '--command', `head -c ${streamBytes} /dev/zero`, '/dev/null'],
    });
    return {
      samples,
      streamBytes,
      commands: { ours: percentiles(ours), limit: percentiles(limitRuns) },
      echo: { ours: percentiles(echoes), limit: percentiles(echoLimit) },
      streams: {
        terminalMBps,
        execMBps,
        filesMBps,
        limitMBps: limitStream.mbps,
        limitTerminalMBps: limitTerminal.mbps,
        limitCatMBps: limitCat.mbps,
      },
    };
  } finally {
    await stack.stop();
  }
}
