// Child process of the exec benchmark: the limits of work inside a session, done minimally from a Node
// process of its own, on the host, with no API or host process in the way. One JSON request as argv[2],
// one JSON answer on stdout:
//   {"mode": "run", "argv": [...], "n": N}: spawns argv N times, one after the other; ms spawn → exit each;
//   {"mode": "echo", "argv": [...], "n": N}: spawns argv (a terminal running cat) once, then N times
//     writes one byte and waits for it to come back; ms each;
//   {"mode": "stream", "argv": [...]}: spawns argv once and reads its stdout to the end; bytes and MB/s.
import { spawn } from 'node:child_process';

const request = JSON.parse(process.argv[2]!) as { mode: 'run' | 'echo' | 'stream'; argv: string[]; n?: number };
const [program, ...args] = request.argv as [string, ...string[]];

async function run(n: number): Promise<number[]> {
  const ms: number[] = [];
  for (let i = 0; i < n; i++) {
    const started = performance.now();
    await new Promise<void>((resolve, reject) =>
      spawn(program, args, { stdio: 'ignore' })
        .once('exit', (code) => (code === 0 ? resolve() : reject(new Error(`${request.argv.join(' ')}: exit ${code}`))))
        .once('error', reject),
    );
    ms.push(performance.now() - started);
  }
  return ms;
}

async function echo(n: number): Promise<number[]> {
  const child = spawn(program, args, { stdio: ['pipe', 'pipe', 'ignore'] });
  let waiting: (() => void) | undefined;
  let seen = '';
  child.stdout.on('data', (chunk: Buffer) => {
    seen += chunk.toString('latin1');
    if (seen.includes('a')) {
      seen = '';
      waiting?.();
    }
  });
  const ms: number[] = [];
  for (let i = 0; i < n + 5; i++) {
    const started = performance.now();
    await new Promise<void>((resolve) => {
      waiting = resolve;
      child.stdin.write('a');
    });
    // The first few warm the path up.
    if (i >= 5) ms.push(performance.now() - started);
  }
  child.kill('SIGKILL');
  return ms;
}

async function stream(): Promise<{ bytes: number; mbps: number }> {
  const started = performance.now();
  const child = spawn(program, args, { stdio: ['ignore', 'pipe', 'ignore'] });
  let bytes = 0;
  child.stdout.on('data', (chunk: Buffer) => (bytes += chunk.length));
  await new Promise((resolve) => child.once('close', resolve));
  return { bytes, mbps: bytes / 1e6 / ((performance.now() - started) / 1000) };
}

const answer =
  request.mode === 'run' ? await run(request.n!) : request.mode === 'echo' ? await echo(request.n!) : await stream();
process.stdout.write(`${JSON.stringify(answer)}\n`);
