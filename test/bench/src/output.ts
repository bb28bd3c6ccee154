// Session output followed live: a line printed by a session → its SSE `line` event at a reader of the
// built API (real HTTP, real worker host, real session process), beside the limit (a minimal PUBLISH →
// SSE relay in a process of its own, fed by a printer process); and what 1 and 100 readers of one
// session cost Redis, in commands per second.
import { request, type ClientRequest } from 'node:http';
import { fileURLToPath } from 'node:url';
import { setTimeout as sleep } from 'node:timers/promises';
import { Redis } from 'ioredis';
import { API_KEY, Stack, startProc, visibleCopy, type Proc } from './sessions.js';

const PRINTER = fileURLToPath(new URL('./output-printer.js', import.meta.url));
const PRINTER_SCRIPT = 'test/bench/dist/output-printer.js';
const RELAY_CHANNEL = 'bench:relay:events';
const EVERY_MS = 100;

/** Epoch milliseconds with sub-millisecond precision, as the printers write them. */
const nowMs = (): number => performance.timeOrigin + performance.now();

export interface OutputLatencyRow {
  case: string;
  readers: number;
  /** Lines printed in the measured stretch. */
  lines: number;
  /** Deliveries measured (lines × readers). */
  n: number;
  /** Deliveries that did not arrive within the stretch plus 5 s (left out of the percentiles). */
  missing: number;
  p50: number;
  p99: number;
  max: number;
}

/** Redis commands counted over a window. */
export interface CommandsWindow {
  seconds: number;
  commandsPerSecond: number;
  /** Per command name, calls per second over the window (the ten busiest). */
  byCommand: Record<string, number>;
}

export interface OutputCommandsRow extends CommandsWindow {
  readers: number;
  /** Print → receipt over the window's lines, every reader (none with no reader). */
  p50?: number;
  p99?: number;
}

export interface OutputBench {
  latency: OutputLatencyRow[];
  commands: OutputCommandsRow[];
  /** API settings of the commands windows (the latency rows run on the defaults). */
  commandsApiEnv: Record<string, string>;
  containment: string;
}

function percentiles(values: number[]): { p50: number; p99: number; max: number } {
  const sorted = [...values].sort((a, b) => a - b);
  const at = (q: number): number => sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))] ?? NaN;
  return { p50: at(0.5), p99: at(0.99), max: sorted.at(-1) ?? NaN };
}

/** Calls per command name (INFO commandstats). */
async function commandStats(redis: Redis): Promise<Map<string, number>> {
  const calls = new Map<string, number>();
  for (const m of (await redis.info('commandstats')).matchAll(/cmdstat_([^:]+):calls=(\d+)/g))
    calls.set(m[1]!, Number(m[2]));
  return calls;
}

async function commandsProcessed(redis: Redis): Promise<number> {
  return Number(/total_commands_processed:(\d+)/.exec(await redis.info('stats'))![1]);
}

/** Redis's commands while `during` runs (the INFO calls themselves count too: four of them). */
async function counting(stats: Redis, during: () => Promise<void>): Promise<CommandsWindow> {
  const byNameBefore = await commandStats(stats);
  const before = await commandsProcessed(stats);
  const t0 = performance.now();
  await during();
  const seconds = (performance.now() - t0) / 1000;
  const after = await commandsProcessed(stats);
  const byNameAfter = await commandStats(stats);
  const byCommand = [...byNameAfter]
    .map(([command, calls]) => [command, (calls - (byNameBefore.get(command) ?? 0)) / seconds] as const)
    .filter(([, perSecond]) => perSecond > 0)
    .sort((a, b) => b[1] - a[1])
    .slice(0, 10);
  return { seconds, commandsPerSecond: (after - before) / seconds, byCommand: Object.fromEntries(byCommand) };
}

/**
 * SSE readers of one URL: for each reader, when (epoch ms) each printed line arrived, by its sequence
 * number, and when it was printed. `lineOf` takes a `data:` payload to the printed line ("<seq> <ms>").
 */
class Readers {
  readonly received: Array<Map<number, number>> = [];
  readonly printedAt = new Map<number, number>();
  readonly #requests: ClientRequest[] = [];

  constructor(
    readonly url: string,
    readonly headers: Record<string, string>,
    readonly lineOf: (data: string) => string | undefined,
  ) {}

  get count(): number {
    return this.received.length;
  }

  /** Opens `count` more readers; resolves once each has its answer's headers (a 200). */
  async open(count: number): Promise<void> {
    await Promise.all(Array.from({ length: count }, () => this.#openOne()));
  }

  async #openOne(): Promise<void> {
    const got = new Map<number, number>();
    for (let attempt = 0; ; attempt++) {
      const status = await new Promise<number>((resolve, reject) => {
        const req = request(this.url, { headers: { accept: 'text/event-stream', ...this.headers } }, (res) => {
          if (res.statusCode !== 200) {
            res.resume();
            resolve(res.statusCode ?? 0);
            return;
          }
          let buffer = '';
          res.setEncoding('utf8');
          res.on('data', (chunk: string) => {
            const at = nowMs();
            buffer += chunk;
            let end: number;
            while ((end = buffer.indexOf('\n')) >= 0) {
              const text = buffer.slice(0, end);
              buffer = buffer.slice(end + 1);
              if (!text.startsWith('data: ')) continue;
              const line = this.lineOf(text.slice(6));
              if (line === undefined) continue;
              const [seq, printed] = line.split(' ');
              if (!got.has(Number(seq))) got.set(Number(seq), at);
              this.printedAt.set(Number(seq), Number(printed));
            }
          });
          res.on('error', () => {});
          this.#requests.push(req);
          resolve(200);
        });
        req.on('error', reject);
        req.end();
      });
      if (status === 200) break;
      // The session's output exists once its host has made it (its first append): until then, 404.
      if (status !== 404 || attempt > 250) throw new Error(`${this.url}: ${status}`);
      await sleep(20);
    }
    this.received.push(got);
  }

  /** The newest line the first reader has. */
  newest(): number {
    return Math.max(-1, ...this.received[0]!.keys());
  }

  /**
   * Waits until every reader has a line printed after the moment of the call: each has caught up with
   * what was kept before it came (a reader of the API starts from the oldest kept line) and follows live.
   */
  async live(timeoutMs = 10_000): Promise<void> {
    const since = nowMs();
    const until = performance.now() + timeoutMs;
    const newest = (got: Map<number, number>): number => this.printedAt.get(Math.max(-1, ...got.keys())) ?? 0;
    while (!this.received.every((got) => newest(got) > since)) {
      if (performance.now() > until) throw new Error(`${this.url}: readers not following within ${timeoutMs} ms`);
      await sleep(10);
    }
  }

  close(): void {
    for (const req of this.#requests) req.destroy();
    this.#requests.length = 0;
    this.received.length = 0;
  }
}

/**
 * Times the next `lines` lines at every reader: print → receipt, ms. Answers the row and the window's
 * Redis commands (from just before the first measured line is printed to the last one's receipt).
 */
async function stretch(
  name: string,
  readers: Readers,
  lines: number,
  stats: Redis,
): Promise<{ row: OutputLatencyRow; window: CommandsWindow }> {
  await readers.live();
  // The next line may be on its way already: the stretch starts with the one after it.
  const first = readers.newest() + 2;
  const last = first + lines - 1;
  while (readers.newest() < first - 1) await sleep(5);
  const until = performance.now() + lines * EVERY_MS + 5000;
  const window = await counting(stats, async () => {
    while (readers.received[0]!.get(last) === undefined && performance.now() < until) await sleep(5);
  });
  while (performance.now() < until && !readers.received.every((got) => got.has(last))) await sleep(10);
  const latencies: number[] = [];
  let missing = 0;
  for (const got of readers.received)
    for (let seq = first; seq <= last; seq++) {
      const at = got.get(seq);
      const printed = readers.printedAt.get(seq);
      if (at === undefined || printed === undefined) missing++;
      else latencies.push(at - printed);
    }
  return {
    row: { case: name, readers: readers.count, lines, n: latencies.length, missing, ...percentiles(latencies) },
    window,
  };
}

/**
 * One session of the built API and worker host (their defaults) printing a line every 100 ms, followed
 * by 1 then 100 readers, each stretch of `lines` lines beside the same with a minimal relay. The two
 * run side by side throughout (so they share whatever else the machine does), their printers 50 ms
 * apart. Then the relay stops, the API is restarted with its sweep slowed (it reads every slot's index
 * every 5 s: 16,384 commands that would swamp the count) and Redis's commands per second are counted
 * with 0, 1 and 100 readers of the session.
 */
export async function benchOutput(redisUrl: string, quick: boolean): Promise<OutputBench> {
  const LINES = quick ? 10 : 200;
  const WINDOW_LINES = quick ? 5 : 100;
  const MANY = 100;
  const result: OutputBench = {
    latency: [],
    commands: [],
    commandsApiEnv: { SWEEP_INTERVAL_MS: '3600000' },
    containment: '',
  };
  const stats = new Redis(redisUrl);
  const stack = new Stack(redisUrl, 'benchoutput', `exec "${process.execPath}" "${visibleCopy(PRINTER)}"`);
  let relay: Proc | undefined;
  let printer: Proc | undefined;
  const open: Readers[] = [];
  const readersOf = (url: string, headers: Record<string, string>, lineOf: (data: string) => string | undefined) => {
    const readers = new Readers(url, headers, lineOf);
    open.push(readers);
    return readers;
  };
  try {
    // The limit: PUBLISH → one subscriber → SSE, in a process of its own, fed by a printer of its own
    // (started meanwhile: it only publishes until a reader listens).
    relay = startProc('test/bench/dist/sse-relays.js', { REDIS_URL: redisUrl, RELAY_MODE: 'publish' });
    printer = startProc(PRINTER_SCRIPT, { REDIS_URL: redisUrl, PRINT_CHANNEL: RELAY_CHANNEL, PRINT_PHASE_MS: '50' });
    await stack.startApi();
    result.containment = (await stack.addHost('output-1', 4)).containment;
    const userId = 'output-user';
    const [token] = await stack.tokens([userId]);
    const { sessionId } = (await stack.post('/v1/spawn', { token }, false)) as { sessionId: string };
    await stack.waitStarted([userId]);
    const logsPath = `/v1/users/${userId}/sessions/${sessionId}/logs`;
    const fromApi = (data: string): string | undefined => {
      const parsed = JSON.parse(data) as { line?: string };
      return parsed.line;
    };

    const relayUrl = String((await relay.waitFor((l) => l['msg'] === 'listening'))['url']);

    const ours = readersOf(`${stack.baseUrl}${logsPath}`, { authorization: `Bearer ${API_KEY}` }, fromApi);
    const bare = readersOf(relayUrl, {}, (data) => data);
    await Promise.all([ours.open(1), bare.open(1)]);
    const oursCase = 'ours: session stdout → worker host → Redis → GET …/logs SSE (built API and host)';
    const bareCase = 'limit: PUBLISH → one subscriber → SSE (minimal relay)';
    result.latency.push((await stretch(oursCase, ours, LINES, stats)).row);
    result.latency.push((await stretch(bareCase, bare, LINES, stats)).row);
    await Promise.all([ours.open(MANY - 1), bare.open(MANY - 1)]);
    result.latency.push((await stretch(oursCase, ours, LINES, stats)).row);
    result.latency.push((await stretch(bareCase, bare, LINES, stats)).row);
    for (const readers of open) readers.close();

    // Redis commands per second with 0, 1 and 100 readers, on an API whose sweep is out of the way.
    await Promise.all([relay.stop(), printer.stop(), stack.api.stop()]);
    await stack.startApi(result.commandsApiEnv);
    const counted = readersOf(`${stack.baseUrl}${logsPath}`, { authorization: `Bearer ${API_KEY}` }, fromApi);
    result.commands.push({ readers: 0, ...(await counting(stats, () => sleep(WINDOW_LINES * EVERY_MS))) });
    for (const readers of [1, MANY]) {
      await counted.open(readers - counted.count);
      const { row, window } = await stretch('ours, sweep slowed', counted, WINDOW_LINES, stats);
      result.commands.push({ readers, ...window, p50: row.p50, p99: row.p99 });
    }
  } finally {
    for (const readers of open) readers.close();
    await relay?.stop();
    await printer?.stop();
    await stack.stop();
    stats.disconnect();
  }
  return result;
}
