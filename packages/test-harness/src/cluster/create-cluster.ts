import { spawn } from 'node:child_process';
import { HOST } from './address.js';

/** Name of the binary: `REDIS_CLI_BIN`, else `redis-cli` on the PATH. */
export function redisCliBinary(): string {
  return process.env['REDIS_CLI_BIN'] ?? 'redis-cli';
}

/** Runs `redis-cli --cluster create` and resolves with its output, or rejects with it. */
export function createCluster(ports: readonly number[], replicas: number, timeoutMs: number): Promise<string> {
  const bin = redisCliBinary();
  const args = [
    '--cluster',
    'create',
    ...ports.map((p) => `${HOST}:${p}`),
    '--cluster-replicas',
    String(replicas),
    '--cluster-yes',
  ];
  const child = spawn(bin, args, { stdio: ['ignore', 'pipe', 'pipe'] });
  return new Promise((resolve, reject) => {
    let output = '';
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`${bin} --cluster create did not finish within ${timeoutMs} ms:\n${output}`));
    }, timeoutMs);
    child.stdout.on('data', (chunk: Buffer) => (output += chunk.toString()));
    child.stderr.on('data', (chunk: Buffer) => (output += chunk.toString()));
    child.once('error', (err: NodeJS.ErrnoException) => {
      clearTimeout(timer);
      reject(
        err.code === 'ENOENT'
          ? new Error(
              `${bin} not found: install Redis (apt-get install redis-server), set REDIS_CLI_BIN, ` +
                'or set REDIS_CLUSTER_NODES to a running cluster',
            )
          : err,
      );
    });
    child.once('close', (code, signal) => {
      clearTimeout(timer);
      if (code === 0) resolve(output);
      else reject(new Error(`${bin} ${args.join(' ')} failed (${code ?? signal}):\n${output}`));
    });
  });
}
