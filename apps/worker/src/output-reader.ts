// A session's stdout and stderr, read into the `out` messages the runtime sends its host: bytes in,
// messages out. Lines are cut at MAX_LINE_BYTES; a token bucket per session lets its rate through (and a
// burst), and what is over it is dropped before it is made into a string, counted, and marked by an
// `[output dropped: <n> bytes]` line at most once a second. It sends nothing and sets no timer: every call
// is given its instant (monotonic ms), and `markDueAt` says when a drop no line came to carry is due to be
// marked (`tick` then). Memory: one line per stream, by construction (see LineSplitter).
import { CUT_MARK, LineSplitter, TokenBucket, droppedLine, type Line } from './output.js';
import { MAX_LINE_BYTES, OUTPUT_BURST_BYTES, type FromRuntime } from './runtime-protocol.js';

/** An `out` message: the first of its lines is the `[output dropped]` line when it has `dropped`. */
export type OutMessage = Extract<FromRuntime, { t: 'out' }>;
export type OutputStreamName = OutMessage['stream'];

/** Most `[output dropped: <n> bytes]` lines per session: one a second (and one at its end), ms. */
export const MARK_EVERY_MS = 1000;

export class OutputReader {
  readonly #id: string;
  readonly #bucket: TokenBucket;
  readonly #splitters: Record<OutputStreamName, LineSplitter> = {
    stdout: new LineSplitter(MAX_LINE_BYTES),
    stderr: new LineSplitter(MAX_LINE_BYTES),
  };
  /** Bytes dropped and not yet marked. */
  #dropped = 0;
  /** The stream of the first of them: a mark that no line carries goes there. */
  #dropStream: OutputStreamName = 'stdout';
  /** When the last `[output dropped]` line was passed on (monotonic ms). */
  #markedAt = Number.NEGATIVE_INFINITY;

  /** `ratePerSecond`: bytes a second on average, bursts up to {@link OUTPUT_BURST_BYTES}. */
  constructor(id: string, ratePerSecond: number, now: number) {
    this.#id = id;
    this.#bucket = new TokenBucket(ratePerSecond, OUTPUT_BURST_BYTES, now);
  }

  /**
   * A chunk of `stream` read at `now`. `hostReads`: the host takes the runtime's messages (false: every
   * line of the chunk is dropped, as a line over the rate is).
   */
  push(stream: OutputStreamName, chunk: Buffer, now: number, hostReads = true): OutMessage[] {
    const admit = (bytes: number): boolean => hostReads && this.#bucket.take(bytes, now);
    const { lines, dropped } = this.#splitters[stream].push(chunk, admit);
    return this.#pass(stream, lines, dropped, now);
  }

  /** `stream` ended at `now`: what is left of it, as a last line. */
  end(stream: OutputStreamName, now: number): OutMessage[] {
    return this.#pass(stream, this.#splitters[stream].end(), 0, now);
  }

  /** When `tick` has a mark to pass on though no line came (monotonic ms); undefined: none is due. */
  get markDueAt(): number | undefined {
    return this.#dropped > 0 ? this.#markedAt + MARK_EVERY_MS : undefined;
  }

  /** The mark of what was dropped, once it is due. */
  tick(now: number): OutMessage[] {
    const due = this.markDueAt;
    if (due === undefined || now < due) return [];
    return [this.#mark(this.#dropStream, now)];
  }

  /** The session ended: the mark of what was dropped and not marked yet, whenever the last was. */
  finish(now: number): OutMessage[] {
    return this.#dropped > 0 ? [this.#mark('stdout', now)] : [];
  }

  #mark(stream: OutputStreamName, now: number): OutMessage {
    const bytes = this.#dropped;
    this.#dropped = 0;
    this.#markedAt = now;
    return { t: 'out', id: this.#id, stream, lines: [droppedLine(bytes)], dropped: bytes };
  }

  #pass(stream: OutputStreamName, lines: Line[], dropped: number, now: number): OutMessage[] {
    const out: string[] = [];
    let marked = 0;
    // What was dropped before this chunk is marked before its lines, when a mark is due; what this chunk
    // dropped, after them (within a chunk the lines that pass come first: once the bucket is empty, the
    // rest of it is dropped).
    if (this.#dropped > 0 && lines.length > 0 && now - this.#markedAt >= MARK_EVERY_MS) {
      out.push(droppedLine(this.#dropped));
      marked = this.#dropped;
      this.#dropped = 0;
      this.#markedAt = now;
    }
    for (const { text, cut } of lines) out.push(cut ? `${text}${CUT_MARK}` : text);
    if (dropped > 0 && this.#dropped === 0) this.#dropStream = stream;
    this.#dropped += dropped;
    const messages: OutMessage[] =
      out.length === 0
        ? []
        : [{ t: 'out', id: this.#id, stream, lines: out, ...(marked > 0 ? { dropped: marked } : {}) }];
    // A drop no line carries is marked as soon as its second is up: at once after a quiet second.
    messages.push(...this.tick(now));
    return messages;
  }
}
