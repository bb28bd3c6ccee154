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

interface Pending {
  readonly stream: OutputStream;
  readonly line: string;
}

/** Bytes a line takes on the host (its UTF-16 length is near enough, and cheap). */
const sizeOf = (p: Pending): number => p.line.length + 16;

/**
 * A session's output on its way to Redis: lines are appended in batches, one append in flight at a
 * time (while it is, the next batch gathers), so a line reaches Redis within one round trip of being
 * printed when output is light, and a flood costs one script call per batch. While Redis cannot be
 * reached the host holds at most `maxUnsentBytes`; older lines are dropped, counted in the session's
 * dropped bytes and marked by one `[output dropped: <n> bytes]` line where they were, and the host's
 * log says how much.
 */
export class OutputSink {
  readonly #options: Required<Omit<OutputSinkOptions, 'log'>> & Pick<OutputSinkOptions, 'log'>;
  #pending: Pending[] = [];
  #pendingBytes = 0;
  /** Bytes the session's host dropped so far: over its rate (told by the runtime) and unsent here. */
  #droppedBytes = 0;
  /** Bytes dropped here since the last marker (their marker goes first in the next batch). */
  #unsentDropped = 0;
  #flushing: Promise<void> | undefined;
  #retryTimer: NodeJS.Timeout | undefined;
  #retryDelay = 100;
  #closed = false;
  /** An append with no line, to make the output exist (empty) at once. */
  #announce = true;
  /** The last append kept the output for the retention from then (the session had ended). */
  #keptForRetention = false;

  constructor(options: OutputSinkOptions) {
    this.#options = { maxUnsentBytes: 1_048_576, batchLines: 1000, closeWithinMs: 2000, ...options };
    this.#flush();
  }

  /** Bytes dropped so far (over the rate, and unsent). */
  get droppedBytes(): number {
    return this.#droppedBytes;
  }

  /** Lines the session printed; `droppedBytes`: what the `[output dropped]` lines among them account for. */
  push(stream: OutputStream, lines: readonly string[], droppedBytes = 0): void {
    if (this.#closed) return;
    this.#droppedBytes += droppedBytes;
    for (const line of lines) {
      const pending = { stream, line };
      this.#pending.push(pending);
      this.#pendingBytes += sizeOf(pending);
    }
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

  /** Keeps what is unsent within its bound, dropping the oldest lines. */
  #bound(): void {
    let dropped = 0;
    let count = 0;
    while (this.#pendingBytes > this.#options.maxUnsentBytes && count < this.#pending.length) {
      const size = sizeOf(this.#pending[count]!);
      this.#pendingBytes -= size;
      dropped += Buffer.byteLength(this.#pending[count]!.line) + 1;
      count++;
    }
    if (count === 0) return;
    this.#pending.splice(0, count);
    if (this.#unsentDropped === 0)
      this.#options.log.warn(
        { maxUnsentBytes: this.#options.maxUnsentBytes },
        'session output piles up unsent (Redis is slow or unreachable); dropping the oldest lines',
      );
    this.#unsentDropped += dropped;
    this.#droppedBytes += dropped;
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

  /** One append: the next batch (a marker for what was dropped unsent first). */
  async #send(final: boolean): Promise<void> {
    const { batchLines, keepLines, retentionMs, store, userId, sessionId } = this.#options;
    const batch = this.#pending.slice(0, batchLines);
    const marker = this.#unsentDropped;
    const lines = marker > 0 ? [{ stream: 'stdout' as const, line: droppedLine(marker) }, ...batch] : batch;
    const keepForMs = final ? retentionMs : Math.max(0, Math.ceil(this.#options.endsBy() - Date.now())) + retentionMs;
    await store.append(userId, sessionId, lines, { keepLines, keepForMs, droppedBytes: this.#droppedBytes });
    this.#keptForRetention = final;
    if (marker > 0) {
      this.#options.log.warn({ droppedBytes: marker }, 'session output dropped while Redis was unreachable');
      this.#unsentDropped -= marker;
    }
    this.#announce = false;
    // Only what was sent leaves: lines pushed meanwhile, or dropped by the bound, are accounted apart.
    const sent = new Set(batch);
    let removed = 0;
    while (removed < this.#pending.length && sent.has(this.#pending[removed]!)) removed++;
    for (let i = 0; i < removed; i++) this.#pendingBytes -= sizeOf(this.#pending[i]!);
    this.#pending.splice(0, removed);
  }
}
