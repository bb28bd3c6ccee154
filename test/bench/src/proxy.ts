// The session proxy, measured on the built API and worker host with their defaults (PROXY_SECRET set):
// client → API → host → session, beside a direct connection to the same session server (the limit) and
// beside configurable-http-proxy (JupyterHub's proxy, one hop) in front of it. The session server is
// test/support/proxy-session.mjs in every case: the sessions' copies (network `none`, the default, where
// the host reaches it through socat in its namespace; and network `host`), and one the bench starts on
// the host's loopback for the direct connection and CHP.
import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { request } from 'node:http';
import { createRequire } from 'node:module';
import { createServer, type AddressInfo } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import WebSocket from 'ws';
import { load } from './http-edge.js';
import type { LoadResult } from './http-load.js';
import { cpuOf, descendants } from './proc.js';
import { ROOT, Stack, percentiles, visibleCopy } from './sessions.js';

const SECRET = 'bench-proxy-secret-0123456789abcdef0123456789';
const CONNECTIONS = 50;

export interface ProxyPathRow {
  readonly path: string;
  readonly rounds: LoadResult[];
  readonly rps: number;
  readonly p50: number;
  readonly p99: number;
  readonly downloadMBps: number;
  readonly wsRtt: { p50: number; p99: number; n: number };
  /** CPU µs per request answered, by serving process (its last round): where the time goes. */
  readonly cpuPerRequestUs: Record<string, number>;
}

export interface ProxyBench {
  readonly seconds: number;
  readonly rounds: number;
  readonly rows: ProxyPathRow[];
}

function freePort(): Promise<number> {
  return new Promise((resolve) => {
    const server = createServer().listen(0, '127.0.0.1', () => {
      const { port } = server.address() as AddressInfo;
      server.close(() => resolve(port));
    });
  });
}

const children = new Set<ChildProcess>();
process.on('exit', () => {
  for (const child of children) child.kill('SIGKILL');
});

/** Waits until something answers HTTP on `port`. */
async function listening(port: number): Promise<void> {
  for (let i = 0; i < 500; i++) {
    const up = await new Promise<boolean>((resolve) => {
      const req = request({ host: '127.0.0.1', port, path: '/echo' }, (res) => {
        res.resume();
        resolve(true);
      });
      req.on('error', () => resolve(false));
      req.end();
    });
    if (up) return;
    await sleep(20);
  }
  throw new Error(`nothing answers on port ${port}`);
}

/** A process of the bench's own (the direct server, CHP), killed when the bench exits. */
function startChild(args: string[], env: Record<string, string> = {}): ChildProcess {
  const child = spawn(process.execPath, args, { stdio: 'ignore', env: { PATH: process.env['PATH'] ?? '', ...env } });
  children.add(child);
  return child;
}

/** How to reach the session server by one path: a base URL and the headers every request carries. */
interface Path {
  readonly name: string;
  /** The processes that serve it, by role, found just before each run. */
  readonly processes: () => Record<string, number[]>;
  readonly base: string;
  readonly headers: Record<string, string>;
  /** Where a WebSocket connects (and with which headers). */
  readonly ws: { url: string; headers: Record<string, string> };
}

/** MB/s of one `GET /bytes?n=<bytes>` read to its end. */
function download(path: Path, bytes: number): Promise<number> {
  return new Promise((resolve, reject) => {
    const started = performance.now();
    const url = new URL(`${path.base}/bytes?n=${bytes}`);
    const req = request(
      { host: url.hostname, port: url.port, path: `${url.pathname}${url.search}`, headers: path.headers },
      (res) => {
        let got = 0;
        res.on('data', (c: Buffer) => (got += c.length));
        res.on('end', () => {
          if (got !== bytes) reject(new Error(`${path.name}: ${got} of ${bytes} bytes`));
          else resolve(bytes / 1e6 / ((performance.now() - started) / 1000));
        });
      },
    );
    req.on('error', reject);
    req.end();
  });
}

/** Round trips of one small WebSocket message, one at a time, ms. */
async function wsRoundTrips(path: Path, count: number): Promise<number[]> {
  const ws = new WebSocket(path.ws.url, { headers: path.ws.headers, perMessageDeflate: false });
  await once(ws, 'open');
  const rtts: number[] = [];
  for (let i = 0; i < count; i++) {
    const started = performance.now();
    const echoed = once(ws, 'message');
    ws.send(`ping ${i}`);
    await echoed;
    rtts.push(performance.now() - started);
  }
  ws.close(1000);
  return rtts;
}

export async function benchProxy(redisUrl: string, quick: boolean): Promise<ProxyBench> {
  const seconds = quick ? 1 : 5;
  const rounds = quick ? 1 : 2;
  const program = visibleCopy(`${ROOT}test/support/proxy-session.mjs`);
  const stack = new Stack(redisUrl, `bench-proxy-${process.pid}`, 'true');
  await stack.startApi({ PROXY_SECRET: SECRET });
  const hostPort = await freePort();
  const none = await stack.addHost('proxy-none', 2, {
    PROXY_SECRET: SECRET,
    POOL: 'none',
    SESSION_COMMAND: `exec ${process.execPath} ${program}`,
  });
  const hostNet = await stack.addHost('proxy-host', 2, {
    PROXY_SECRET: SECRET,
    POOL: 'hostnet',
    SESSION_NETWORK: 'host',
    SESSION_COMMAND: `PROXY_PORT=${hostPort} exec ${process.execPath} ${program}`,
  });
  const apiPort = new URL(stack.baseUrl).port;
  const apiPid = stack.api.child.pid!;
  /** Who serves `ours`: the API, the host, its socat processes, the session's server. */
  const oursProcesses =
    (host: { host: { child: ChildProcess }; runtimePid: number }) => (): Record<string, number[]> => ({
      API: [apiPid],
      host: [host.host.child.pid!],
      'socat (host)': descendants(host.host.child.pid!)
        .filter((p) => p.name === 'socat')
        .map((p) => p.pid),
      'session server': descendants(host.runtimePid)
        .filter((p) => p.name === 'node')
        .map((p) => p.pid),
    });
  /** A ready session in `pool`, and how the proxy reaches its port. */
  const session = async (
    userId: string,
    pool: string,
    name: string,
    processes: () => Record<string, number[]>,
  ): Promise<Path> => {
    const { token } = (await stack.post('/v1/tokens', { userId, pool })) as { token: string };
    const { sessionId } = (await stack.post('/v1/spawn', { token }, false)) as { sessionId: string };
    for (;;) {
      const live = (await stack.get(`/v1/sessions/${sessionId}`)) as { ready?: boolean; port?: number };
      if (live.ready === true && live.port !== undefined) {
        const connect = (await stack.post(`/v1/sessions/${sessionId}/connect`, {})) as { token: string; port: number };
        const host = `${connect.port}-${sessionId}.localhost:${apiPort}`;
        const headers = { host, 'cq-connect-token': connect.token };
        return {
          name,
          processes,
          base: `http://127.0.0.1:${apiPort}`,
          headers,
          ws: { url: `ws://127.0.0.1:${apiPort}/ws`, headers },
        };
      }
      await sleep(20);
    }
  };
  const oursNone = await session(
    'bench-proxy-none',
    'none',
    'ours: client → API → host → session (network none, the default)',
    oursProcesses(none),
  );
  const oursHost = await session(
    'bench-proxy-host',
    'hostnet',
    "ours: the same, the session on the host's network",
    oursProcesses(hostNet),
  );
  // The limit: the same server, started here on the host's loopback, reached directly.
  const directPort = await freePort();
  const directServer = startChild([program], { PROXY_PORT: String(directPort) });
  await listening(directPort);
  const direct: Path = {
    name: 'limit: a direct connection to the session server',
    processes: () => ({ 'session server': [directServer.pid!] }),
    base: `http://127.0.0.1:${directPort}`,
    headers: {},
    ws: { url: `ws://127.0.0.1:${directPort}/ws`, headers: {} },
  };
  // What a user would pick instead: configurable-http-proxy (JupyterHub's), one hop, its defaults.
  const chpPort = await freePort();
  const chpBin = createRequire(import.meta.url).resolve('configurable-http-proxy/bin/configurable-http-proxy');
  const chpProcess = startChild([
    chpBin,
    '--ip',
    '127.0.0.1',
    '--port',
    String(chpPort),
    '--api-ip',
    '127.0.0.1',
    '--api-port',
    String(await freePort()),
    '--default-target',
    `http://127.0.0.1:${directPort}`,
    '--log-level',
    'error',
  ]);
  await listening(chpPort);
  const chp: Path = {
    name: 'configurable-http-proxy 4.6 (one hop) in front of it',
    processes: () => ({ 'configurable-http-proxy': [chpProcess.pid!], 'session server': [directServer.pid!] }),
    base: `http://127.0.0.1:${chpPort}`,
    headers: {},
    ws: { url: `ws://127.0.0.1:${chpPort}/ws`, headers: {} },
  };
  const paths = [direct, chp, oursNone, oursHost];
  const loadOf = (path: Path, runSeconds: number) => ({
    url: `${path.base}/bytes?n=1024`,
    method: 'GET' as const,
    body: '',
    headers: path.headers,
    randomUser: false,
    connections: CONNECTIONS,
    seconds: runSeconds,
  });
  const cpuOfAll = (pids: number[]): number =>
    pids.reduce((sum, pid) => {
      try {
        return sum + cpuOf(pid).self;
      } catch {
        return sum;
      }
    }, 0);
  const results = new Map<Path, LoadResult[]>(paths.map((p) => [p, []]));
  const cpu = new Map<Path, Record<string, number>>();
  // Each path once per round, in turn (the order turning between rounds), each run right after a second
  // of warm-up on the same path (its connections open, as a busy client's are); the CPU each serving
  // process spent per request answered, read from /proc around the run.
  for (let round = 0; round < rounds; round++)
    for (const path of round % 2 === 0 ? paths : [...paths].reverse()) {
      await load(loadOf(path, 1));
      const roles = path.processes();
      const before = Object.fromEntries(Object.entries(roles).map(([role, pids]) => [role, cpuOfAll(pids)]));
      const result = await load(loadOf(path, seconds));
      results.get(path)!.push(result);
      cpu.set(
        path,
        Object.fromEntries(
          Object.entries(roles).map(([role, pids]) => [
            role,
            ((cpuOfAll(pids) - before[role]!) * 1000) / Math.max(1, result.requests),
          ]),
        ),
      );
    }
  const DOWNLOAD = (quick ? 20 : 100) * 1e6;
  const rows: ProxyPathRow[] = [];
  for (const path of paths) {
    const runs = results.get(path)!;
    const median = (pick: (r: LoadResult) => number): number => {
      const sorted = runs.map(pick).sort((a, b) => a - b);
      return sorted[Math.floor(sorted.length / 2)]!;
    };
    const speeds: number[] = [];
    for (let i = 0; i < (quick ? 1 : 3); i++) speeds.push(await download(path, DOWNLOAD));
    const rtts = await wsRoundTrips(path, quick ? 300 : 2000);
    rows.push({
      path: path.name,
      rounds: runs,
      rps: median((r) => r.rps),
      p50: median((r) => r.p50),
      p99: median((r) => r.p99),
      downloadMBps: speeds.sort((a, b) => a - b)[Math.floor(speeds.length / 2)]!,
      wsRtt: percentiles(rtts),
      cpuPerRequestUs: cpu.get(path) ?? {},
    });
  }
  for (const child of children) child.kill('SIGTERM');
  await stack.stop();
  return { seconds, rounds, rows };
}
