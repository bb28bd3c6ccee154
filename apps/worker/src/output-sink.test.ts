// OutputSink without Redis: an append of the test's own, answered when the test says, and fake timers.
import { UnavailableError, type OutputStore } from '@cq/coordinator';
import { pino } from 'pino';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { droppedLine } from './output.js';
import { OutputSink } from './output-sink.js';

interface Append {
  readonly lines: ReadonlyArray<{ stream: string; line: string }>;
  readonly droppedBytes: number;
  answered: boolean;
  answer(err?: Error): void;
}

/** A sink whose appends wait in `appends` until the test answers them. */
function sinkWithAppends(options: { maxUnsentBytes?: number; batchLines?: number } = {}): {
  sink: OutputSink;
  appends: Append[];
  kept: Append[];
} {
  const appends: Append[] = [];
  const kept: Append[] = [];
  const store = {
    append: (_user: string, _session: string, lines: Append['lines'], keeping: { droppedBytes: number }) =>
      new Promise<string | undefined>((resolve, reject) => {
        const append: Append = {
          lines: [...lines],
          droppedBytes: keeping.droppedBytes,
          answered: false,
          answer: (err) => {
            append.answered = true;
            if (err !== undefined) return reject(err);
            kept.push(append);
            resolve(undefined);
          },
        };
        appends.push(append);
      }),
  } as unknown as OutputStore;
  const sink = new OutputSink({
    store,
    userId: 'u',
    sessionId: 's',
    keepLines: 1_000_000,
    retentionMs: 60_000,
    endsBy: () => Date.now() + 60_000,
    log: pino({ level: 'silent' }),
    ...options,
  });
  return { sink, appends, kept };
}

/** A tiny deterministic PRNG, so a failure can be replayed. */
function random(seed: number): () => number {
  let x = seed;
  return () => {
    x = (x * 1_103_515_245 + 12_345) % 2 ** 31;
    return x / 2 ** 31;
  };
}

const bytesOf = (line: string): number => Buffer.byteLength(line) + 1;
const MARK = /^\[output dropped: (\d+) bytes\]$/;

beforeEach(() => {
  vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout', 'performance', 'Date'] });
});
afterEach(() => vi.useRealTimers());

describe('OutputSink', () => {
  it('the constructor sends nothing; start() makes the output exist with one empty append', async () => {
    const { sink, appends } = sinkWithAppends();
    await vi.advanceTimersByTimeAsync(0);
    expect(appends).toEqual([]);
    sink.start();
    expect(appends.map((a) => a.lines)).toEqual([[]]);
  });

  it('under a flood against a slow, failing Redis: what is kept and what the marks say add up to exactly what was written, each mark where its lines were', async () => {
    const { sink, appends, kept } = sinkWithAppends({ maxUnsentBytes: 20_000, batchLines: 50 });
    const next = random(7);
    // What the session wrote, in order: its lines, and what the runtime dropped over the rate (a gap).
    const written: Array<{ line: string } | { gap: number }> = [];
    let n = 0;
    sink.start();
    for (let round = 0; round < 400; round++) {
      const lines = Array.from({ length: Math.floor(next() * 40) }, () => `line ${n++} ${'x'.repeat(next() * 300)}`);
      const gap = next() < 0.1 ? 1 + Math.floor(next() * 5000) : 0;
      if (gap > 0) written.push({ gap });
      for (const line of lines) written.push({ line });
      sink.push(next() < 0.5 ? 'stdout' : 'stderr', gap > 0 ? [droppedLine(gap), ...lines] : lines, gap);
      // Now and then Redis answers the append in flight (now and then with an outage), or time passes.
      const waiting = appends.find((a) => !a.answered);
      if (waiting !== undefined && next() < 0.3)
        waiting.answer(next() < 0.2 ? new UnavailableError('down') : undefined);
      await vi.advanceTimersByTimeAsync(next() < 0.1 ? 150 : 0);
    }
    const closing = sink.close();
    // Redis is back: every append is taken, until the sink has sent all it holds.
    for (let i = 0; i < 1000; i++) {
      for (const a of appends.filter((x) => !x.answered)) a.answer();
      await vi.advanceTimersByTimeAsync(10);
    }
    await closing;

    const received = kept.flatMap((a) => a.lines.map((l) => l.line));
    const marked = received.reduce((sum, line) => sum + Number(MARK.exec(line)?.[1] ?? 0), 0);
    const keptBytes = received.filter((line) => !MARK.test(line)).reduce((sum, line) => sum + bytesOf(line), 0);
    const writtenBytes = written.reduce((sum, w) => sum + ('gap' in w ? w.gap : bytesOf(w.line)), 0);
    // Some of the flood was dropped here, and not all of it.
    expect(marked).toBeGreaterThan(written.filter((w) => 'gap' in w).reduce((sum, w) => sum + w.gap, 0));
    expect(keptBytes).toBeGreaterThan(0);
    expect(keptBytes + marked).toBe(writtenBytes);
    expect(sink.droppedBytes).toBe(marked);
    expect(kept.at(-1)!.droppedBytes).toBe(marked);
    // Read back in order: each line is the next one written, each mark stands for exactly the lines
    // (and runtime gaps) missing where it is.
    let at = 0;
    for (const line of received) {
      const mark = MARK.exec(line);
      if (mark === null) {
        expect(written[at++]).toEqual({ line });
        continue;
      }
      let left = Number(mark[1]);
      while (left > 0) {
        const w = written[at++]!;
        left -= 'gap' in w ? w.gap : bytesOf(w.line);
      }
      expect(left).toBe(0);
    }
    expect(at).toBe(written.length);
  });
});
