import { connect, type Socket } from 'node:net';
import { Redis } from 'ioredis';

/** One command Redis ran, as MONITOR reported it. */
export interface Seen {
  readonly args: string[];
  /** `ip:port` of the client that sent it, or `lua` for a command run inside a script. */
  readonly source: string;
}

/**
 * Reads one MONITOR line's quoted arguments (`"set" "k" "a\"b"`), undoing Redis's escapes (sdscatrepr:
 * `\\`, `\"`, `\n`, `\r`, `\t`, `\a`, `\b`, `\xHH`).
 */
export function parseMonitorLine(line: string): Seen | undefined {
  const open = line.indexOf('[');
  const close = line.indexOf('] ', open);
  if (open < 0 || close < 0) return undefined;
  const source = line.slice(open + 1, close).split(' ')[1] ?? '';
  const args: string[] = [];
  let i = close + 2;
  while (i < line.length) {
    if (line[i] !== '"') {
      i++;
      continue;
    }
    let arg = '';
    i++;
    while (i < line.length && line[i] !== '"') {
      if (line[i] !== '\\') {
        arg += line[i++];
        continue;
      }
      const next = line[i + 1];
      const simple: Record<string, string> = { n: '\n', r: '\r', t: '\t', a: '\x07', b: '\b', '"': '"', '\\': '\\' };
      if (next === 'x') {
        arg += String.fromCharCode(parseInt(line.slice(i + 2, i + 4), 16));
        i += 4;
      } else {
        arg += simple[next ?? ''] ?? next ?? '';
        i += 2;
      }
    }
    args.push(arg);
    i++;
  }
  return { args, source };
}

/** RESP for one command. */
const command = (...args: string[]): string =>
  `*${args.length}\r\n${args.map((a) => `$${Buffer.byteLength(a)}\r\n${a}\r\n`).join('')}`;

/**
 * A MONITOR connection of its own, spoken on a plain socket. (ioredis's `monitor()` loses a race: when
 * its `+OK` and the first MONITOR line arrive in one read, the line comes before the connection counts
 * as monitoring, and is reported as a "Command queue state error" that rejects the `monitor()` call.)
 */
async function monitorSocket(url: string, onCommand: (seen: Seen) => void): Promise<Socket> {
  const { hostname, port, username, password } = new URL(url);
  const socket = connect({ host: hostname.replace(/^\[|\]$/g, ''), port: Number(port || 6379) });
  await new Promise<void>((resolve, reject) => {
    socket.once('connect', resolve);
    socket.once('error', reject);
  });
  socket.on('error', () => {});
  const replies: string[] = [];
  let answered: (() => void) | undefined;
  let buffered = '';
  socket.setEncoding('latin1');
  socket.on('data', (chunk: string) => {
    buffered += chunk;
    let end: number;
    while ((end = buffered.indexOf('\r\n')) >= 0) {
      const line = buffered.slice(0, end);
      buffered = buffered.slice(end + 2);
      const seen = line.startsWith('+') ? parseMonitorLine(line) : undefined;
      if (seen !== undefined) onCommand(seen);
      else {
        replies.push(line);
        answered?.();
      }
    }
  });
  const reply = async (): Promise<string> => {
    while (replies.length === 0) await new Promise<void>((resolve) => (answered = resolve));
    return replies.shift()!;
  };
  if (password !== '') {
    const user = username === '' ? [] : [decodeURIComponent(username)];
    socket.write(command('AUTH', ...user, decodeURIComponent(password)));
    const answer = await reply();
    if (answer !== '+OK') throw new Error(`MONITOR connection: AUTH answered ${answer}`);
  }
  socket.write(command('MONITOR'));
  const answer = await reply();
  if (answer !== '+OK') throw new Error(`MONITOR connection: MONITOR answered ${answer}`);
  return socket;
}

export interface CommandWatch {
  /** Every command seen so far that the filter kept, in the order Redis ran them. */
  readonly seen: Seen[];
  /** Resolves once every command Redis ran before this call has been seen. */
  settle(): Promise<void>;
  /** The commands run while `work` ran. */
  during(work: () => Promise<unknown>): Promise<Seen[]>;
  stop(): Promise<void>;
}

/**
 * Records the commands a Redis server runs that `keep` accepts. The MONITOR stream is asynchronous: an
 * ECHO of a marker sent by `marker`, once seen, says every command run before it has been seen.
 */
async function watch(url: string, marker: Pick<Redis, 'echo'>, keep: (seen: Seen) => boolean): Promise<CommandWatch> {
  const seen: Seen[] = [];
  let n = 0;
  const markers = new Map<string, () => void>();
  const socket = await monitorSocket(url, (command) => {
    const arrived = command.args[0]?.toLowerCase() === 'echo' ? markers.get(command.args[1] ?? '') : undefined;
    if (arrived !== undefined) arrived();
    else if (keep(command)) seen.push(command);
  });
  const settle = async (): Promise<void> => {
    const id = `monitor-marker-${process.pid}-${n++}`;
    const arrived = new Promise<void>((resolve) => markers.set(id, resolve));
    await marker.echo(id);
    await arrived;
    markers.delete(id);
  };
  return {
    seen,
    settle,
    async during(work) {
      await settle();
      const from = seen.length;
      await work();
      await settle();
      return seen.slice(from);
    },
    async stop() {
      socket.destroy();
    },
  };
}

/**
 * Records the commands Redis receives from one client (by its local address), leaving out those run
 * inside scripts, which MONITOR reports with the source `lua`. Used to count round trips.
 */
export async function watchClient(client: Redis, url: string): Promise<CommandWatch> {
  if (client.status !== 'ready') await new Promise((resolve) => client.once('ready', resolve));
  const port = client.stream.localPort;
  // The client's own ECHO marks "everything it sent before is in".
  return watch(url, client, (seen) => seen.source.endsWith(`:${port}`));
}

/** Records every command a Redis server runs, those inside scripts too. */
export async function watchServer(url: string): Promise<CommandWatch> {
  const marker = new Redis(url);
  const watching = await watch(url, marker, () => true);
  return {
    ...watching,
    async stop() {
      await watching.stop();
      marker.disconnect();
    },
  };
}
