import { setTimeout as sleep } from 'node:timers/promises';
import { UnavailableError, type OutputStore, type OutputStream } from '@cq/coordinator';
import type { Logger } from 'pino';
import { droppedLine } from './output.js';

/** How a session's output is kept in Redis (LOG_KEEP_LINES, LOG_RETENTION_MS). */
export interface OutputKeepingConfig {
  /** Newest lines kept per session. */
  readonly keepLines: number;
  /** How long the output is kept after the session ends, ms. */
  readonly retentionMs: number;
}

/** What an {@link OutputSink} works with. */
export interface OutputSinkOptions extends OutputKeepingConfig {
  readonly store: OutputStore;
  readonly userId: string;
  readonly sessionId: string;
  /** The latest the session can still end, epoch ms (its lease's hard deadline): output is kept until then plus the retention. */
  readonly endsBy: () => number;
  /**
   * Output not yet in Redis this host holds at most, bytes; beyond it the oldest unsent lines are
   * dropped (counted, and marked where they were). @defaultValue 1 MiB
   */
  readonly maxUnsentBytes?: number;
  /** Most lines in one append. @defaultValue 1000 */
  readonly batchLines?: number;
  /** How long {@link OutputSink.close} waits for Redis to take what is left, ms. @defaultValue 2000 */
  readonly closeWithinMs?: number;
  readonly log: Logger;
}

/** A line on its way, or a mark `[output dropped: <marks> bytes]` where lines were dropped. */
type Pending =
  | { readonly stream: OutputStream; readonly line: string; readonly marks?: undefined }
  | {
      readonly stream: OutputStream;
      readonly line?: undefined;
      /** Bytes the mark accounts for: dropped here, and dropped by the runtime (their mark dropped here). */
      readonly marks: number;
      /** Of those, the bytes dropped here, unsent. */
      readonly unsent: number;
    };

/** Bytes a line takes on the host (its UTF-16 length is near enough, and cheap). */
const sizeOf = (p: Pending): number => (p.line === undefined ? 48 : p.line.length + 16);

/**
 * A session's output on its way to Redis: lines are appended in batches, one append in flight at a
 * time (while it is, the next batch gathers), so a line reaches Redis within one round trip of being
 * printed when output is light, and a flood costs one script call per batch. While Redis cannot be
 * reached the host holds at most `maxUnsentBytes` besides the batch in flight; the oldest lines not in
 * flight are dropped, counted in the session's dropped bytes and marked by one `[output dropped: <n>
 * bytes]` line where they were, and the host's log says how much. The lines of the batch in flight are
 * never dropped: once it is taken they are either in Redis or sent again, so what is counted as dropped
 * (and what the marks say) is exactly what Redis never got. {@link start} makes the output exist.
 */
export class OutputSink {
  readonly #options: Required<Omit<OutputSinkOptions, 'log'>> & Pick<OutputSinkOptions, 'log'>;
  /** What is not in Redis yet, oldest first; its first `#inFlight` entries are the append in flight. */
  #pending: Pending[] = [];
  #pendingBytes = 0;
  #inFlight = 0;
  /** Bytes the session's host dropped so far: over its rate (told by the runtime) and unsent here. */
  #droppedBytes = 0;
  /** Lines are being dropped unsent, and the mark of that has not reached Redis yet (the log says so once). */
  #dropping = false;
  #flushing: Promise<void> | undefined;
  #retryTimer: NodeJS.Timeout | undefined;
  #retryDelay = 100;
  #closed = false;
  /** An append with no line, to make the output exist (empty) at once. */
  #announce = false;
  /** The last append kept the output for the retention from then (the session had ended). */
  #keptForRetention = false;

  constructor(options: OutputSinkOptions) {
    this.#options = { maxUnsentBytes: 1_048_576, batchLines: 1000, closeWithinMs: 2000, ...options };
  }

  /** Makes the session's output exist in Redis (empty) at once, without waiting for its first line. */
  start(): void {
    if (this.#closed) return;
    this.#announce = true;
    this.#flush();
  }

  /** Bytes dropped so far (over the rate, and unsent). */
  get droppedBytes(): number {
    return this.#droppedBytes;
  }

  /**
   * Lines the session printed; `droppedBytes`: what the `[output dropped]` line among them accounts for
   * (the runtime sends it first; should it be dropped here, the mark made here carries its bytes on).
   */
  push(stream: OutputStream, lines: readonly string[], droppedBytes = 0): void {
    if (this.#closed) return;
    this.#droppedBytes += droppedBytes;
    lines.forEach((line, i) => {
      const pending: Pending =
        i === 0 && droppedBytes > 0 && line === droppedLine(droppedBytes)
          ? { stream, marks: droppedBytes, unsent: 0 }
          : { stream, line };
      this.#pending.push(pending);
      this.#pendingBytes += sizeOf(pending);
    });
    this.#bound();
    this.#flush();
  }

  /**
   * Sends what is left and keeps the output for the retention from now; gives up after
   * `closeWithinMs` (what was not sent is then dropped, and the log says how much).
   */
  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    const deadline = performance.now() + this.#options.closeWithinMs;
    for (;;) {
      clearTimeout(this.#retryTimer);
      this.#retryTimer = undefined;
      await this.#flushing;
      if (this.#pending.length === 0 && !this.#announce) break;
      if (performance.now() >= deadline) break;
      try {
        await this.#send(true);
      } catch {
        await sleep(Math.min(200, Math.max(0, deadline - performance.now())));
      }
    }
    try {
      // The retention counts from now, also when nothing was left to send.
      if (this.#pending.length === 0 && !this.#keptForRetention) await this.#send(true);
    } catch (err) {
      this.#options.log.debug({ err }, 'could not set how long the session output is kept');
    }
    if (this.#pending.length > 0) {
      const bytes = this.#pendingBytes;
      this.#options.log.warn(
        { unsentBytes: bytes, lines: this.#pending.length },
        'session output not sent: Redis did not take it in time',
      );
      this.#pending = [];
      this.#pendingBytes = 0;
    }
  }

  /**
   * Keeps what is unsent within its bound: drops the oldest lines after the batch in flight, and puts
   * one mark where they were (a mark among them is merged into it: its bytes are not counted again).
   */
  #bound(): void {
    const from = this.#inFlight;
    let to = from;
    let fresh = 0;
    let marks = 0;
    let unsent = 0;
    while (this.#pendingBytes > this.#options.maxUnsentBytes && to < this.#pending.length) {
      const p = this.#pending[to++]!;
      this.#pendingBytes -= sizeOf(p);
      if (p.line === undefined) {
        marks += p.marks;
        unsent += p.unsent;
      } else fresh += Buffer.byteLength(p.line) + 1;
    }
    if (to === from) return;
    const mark: Pending = { stream: 'stdout', marks: marks + fresh, unsent: unsent + fresh };
    this.#pending.splice(from, to - from, mark);
    this.#pendingBytes += sizeOf(mark);
    this.#droppedBytes += fresh;
    if (!this.#dropping && fresh > 0)
      this.#options.log.warn(
        { maxUnsentBytes: this.#options.maxUnsentBytes },
        'session output piles up unsent (Redis is slow or unreachable); dropping the oldest lines',
      );
    if (fresh > 0) this.#dropping = true;
  }

  #flush(): void {
    if (this.#flushing !== undefined || this.#retryTimer !== undefined) return;
    if (this.#pending.length === 0 && !this.#announce) return;
    this.#flushing = this.#send(false)
      .then(
        () => {
          this.#retryDelay = 100;
        },
        (err: unknown) => {
          if (!(err instanceof UnavailableError)) this.#options.log.error({ err }, 'could not append session output');
          if (this.#closed) return;
          this.#retryTimer = setTimeout(() => {
            this.#retryTimer = undefined;
            this.#flush();
          }, this.#retryDelay);
          this.#retryTimer.unref();
          this.#retryDelay = Math.min(2000, this.#retryDelay * 2);
        },
      )
      .finally(() => {
        this.#flushing = undefined;
        if (!this.#closed && this.#retryTimer === undefined) this.#flush();
      });
  }

  /** One append: the next batch (its marks made into lines). */
  async #send(final: boolean): Promise<void> {
    const { batchLines, keepLines, retentionMs, store, userId, sessionId } = this.#options;
    const batch = this.#pending.slice(0, batchLines);
    const lines = batch.map((p) => (p.line === undefined ? { stream: p.stream, line: droppedLine(p.marks) } : p));
    const keepForMs = final ? retentionMs : Math.max(0, Math.ceil(this.#options.endsBy() - Date.now())) + retentionMs;
    // Until it is answered the batch is in flight: the bound drops none of it.
    this.#inFlight = batch.length;
    try {
      await store.append(userId, sessionId, lines, { keepLines, keepForMs, droppedBytes: this.#droppedBytes });
    } finally {
      this.#inFlight = 0;
    }
    this.#keptForRetention = final;
    this.#announce = false;
    // Only the batch leaves: lines pushed meanwhile went after it, and the bound did not touch it.
    for (const p of batch) {
      this.#pendingBytes -= sizeOf(p);
      if (p.line !== undefined || p.unsent === 0) continue;
      this.#dropping = false;
      this.#options.log.warn(
        { droppedBytes: p.marks, unsentBytes: p.unsent },
        'session output dropped while Redis was unreachable',
      );
    }
    this.#pending.splice(0, batch.length);
  }
}
