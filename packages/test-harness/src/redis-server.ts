import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { once } from 'node:events';

/** Options of {@link startRedisServer}. */
export interface RedisServerOptions {
  /**
   * Port to listen on (127.0.0.1 only).
   * @defaultValue a free port chosen by the operating system
   */
  port?: number;
  /**
   * Extra `redis-server` arguments, e.g. `['--appendonly', 'yes']`.
   * @defaultValue none: no persistence at all
   */
  args?: readonly string[];
  /**
   * Data directory; removed on {@link RedisServer.stop} only when the harness created it.
   * @defaultValue a fresh temporary directory
   */
  dir?: string;
  /**
   * How long to wait for "Ready to accept connections", in milliseconds.
   * @defaultValue 10000
   */
  startTimeoutMs?: number;
}

/** A `redis-server` child process started by the harness. */
export interface RedisServer {
  readonly url: string;
  readonly port: number;
  readonly dir: string;
  /** Pid of the running server, or undefined while it is stopped. */
  pid(): number | undefined;
  /** Stops the server with SIGTERM (or the given signal) and waits for it to exit. Keeps the data directory. */
  halt(signal?: NodeJS.Signals): Promise<void>;
  /** Starts the server again on the same port with the same data directory. */
  resume(): Promise<void>;
  /** Stops the server and removes the data directory the harness created. */
  stop(): Promise<void>;
}

const READY_LINE = /Ready to accept connections/;

/** Name of the binary: `REDIS_SERVER_BIN`, else `redis-server` on the PATH. */
export function redisServerBinary(): string {
  return process.env['REDIS_SERVER_BIN'] ?? 'redis-server';
}

/** Asks the operating system for a free TCP port on 127.0.0.1. */
export async function freePort(): Promise<number> {
  const server = createServer();
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const address = server.address();
  server.close();
  await once(server, 'close');
  if (address === null || typeof address === 'string') throw new Error('could not determine a free port');
  return address.port;
}

function launch(
  bin: string,
  port: number,
  dir: string,
  args: readonly string[],
  timeoutMs: number,
): Promise<ChildProcess> {
  const child = spawn(
    bin,
    [
      '--port',
      String(port),
      '--bind',
      '127.0.0.1',
      '--dir',
      dir,
      '--save',
      '',
      '--appendonly',
      'no',
      '--daemonize',
      'no',
      '--logfile',
      '',
      ...args,
    ],
    { stdio: ['ignore', 'pipe', 'pipe'] },
  );
  return new Promise((resolve, reject) => {
    let output = '';
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`redis-server did not become ready on port ${port} within ${timeoutMs} ms:\n${output}`));
    }, timeoutMs);
    const onData = (chunk: Buffer): void => {
      output += chunk.toString();
      if (READY_LINE.test(output)) {
        clearTimeout(timer);
        child.stdout?.off('data', onData);
        child.stdout?.resume();
        resolve(child);
      }
    };
    child.stdout?.on('data', onData);
    child.stderr?.on('data', (chunk: Buffer) => {
      output += chunk.toString();
    });
    child.once('error', (err: NodeJS.ErrnoException) => {
      clearTimeout(timer);
      reject(
        err.code === 'ENOENT'
          ? new Error(
              `${bin} not found: install Redis (apt-get install redis-server), set REDIS_SERVER_BIN, or set REDIS_URL to a running server`,
            )
          : err,
      );
    });
    child.once('exit', (code, signal) => {
      clearTimeout(timer);
      reject(new Error(`redis-server exited (${code ?? signal}) before it was ready:\n${output}`));
    });
  });
}

/**
 * Starts the local `redis-server` binary on 127.0.0.1, without persistence unless `args` ask for it,
 * and resolves once it accepts connections.
 */
export async function startRedisServer(options: RedisServerOptions = {}): Promise<RedisServer> {
  const bin = redisServerBinary();
  const ownDir = options.dir === undefined;
  const dir = options.dir ?? (await mkdtemp(join(tmpdir(), 'cq-redis-')));
  const args = options.args ?? [];
  const timeoutMs = options.startTimeoutMs ?? 10_000;
  let port = options.port ?? 0;
  let child: ChildProcess | undefined;
  // A port found free can be taken by someone else before redis-server binds it; choose another then.
  for (let attempt = 0; child === undefined; attempt++) {
    const candidate = port === 0 ? await freePort() : port;
    try {
      child = await launch(bin, candidate, dir, args, timeoutMs);
      port = candidate;
    } catch (err) {
      const inUse = err instanceof Error && /Address already in use/.test(err.message);
      if (!inUse || options.port !== undefined || attempt >= 4) {
        if (ownDir) await rm(dir, { recursive: true, force: true });
        throw err;
      }
    }
  }

  // Should the test process end without stopping us, take the server along.
  const onExit = (): void => {
    child?.kill('SIGKILL');
  };
  process.once('exit', onExit);

  const halt = async (signal: NodeJS.Signals = 'SIGTERM'): Promise<void> => {
    const running = child;
    if (running === undefined || running.exitCode !== null || running.signalCode !== null) {
      child = undefined;
      return;
    }
    const exited = once(running, 'exit');
    running.kill(signal);
    await exited;
    child = undefined;
  };

  return {
    url: `redis://127.0.0.1:${port}`,
    port,
    dir,
    pid: () => child?.pid,
    halt,
    resume: async () => {
      if (child !== undefined) return;
      child = await launch(bin, port, dir, args, timeoutMs);
    },
    stop: async () => {
      process.off('exit', onExit);
      await halt('SIGTERM');
      if (ownDir) await rm(dir, { recursive: true, force: true });
    },
  };
}
