// A session's output, read in bounded pieces: whatever a session writes (any amount, with or without
// newlines), the reader holds at most one line's worth of it.

/** A line of output, and whether it was cut. */
export interface Line {
  readonly text: string;
  /** The line was longer than the limit: `text` is its beginning, the rest was dropped. */
  readonly cut: boolean;
}

/**
 * Splits a byte stream into lines of at most `maxBytes` bytes (the newline not counted). A longer line
 * is passed on as soon as its first `maxBytes` have arrived, marked as cut, and the rest of it up to
 * the next newline is skipped without being held. Memory: at most `maxBytes` bytes per splitter.
 */
export class LineSplitter {
  readonly #maxBytes: number;
  #parts: Buffer[] = [];
  #length = 0;
  /** Inside the part of an overlong line that is skipped. */
  #skipping = false;

  constructor(maxBytes: number) {
    this.#maxBytes = maxBytes;
  }

  /**
   * Feeds a chunk; returns the lines it completes (or cuts). `admit(bytes)` is asked before each line is
   * made into a string (its bytes, the newline counted): a line it refuses is dropped without being copied,
   * and its bytes are counted in `dropped`.
   */
  push(chunk: Buffer, admit: (bytes: number) => boolean = () => true): { lines: Line[]; dropped: number } {
    const lines: Line[] = [];
    let dropped = 0;
    let from = 0;
    while (from < chunk.length) {
      const newline = chunk.indexOf(10, from);
      const end = newline === -1 ? chunk.length : newline;
      if (!this.#skipping) {
        const room = this.#maxBytes - this.#length;
        if (end - from > room) {
          // Cut here: the line is passed on (or dropped) now, and the rest of it skipped.
          if (admit(this.#maxBytes)) {
            this.#take(chunk.subarray(from, from + room));
            lines.push({ text: this.#flush(), cut: true });
          } else {
            dropped += this.#maxBytes;
            this.#clear();
          }
          this.#skipping = true;
        } else if (newline === -1) {
          this.#take(chunk.subarray(from, end));
        } else if (admit(this.#length + (end - from) + 1)) {
          this.#take(chunk.subarray(from, end));
          lines.push({ text: this.#flush(), cut: false });
        } else {
          dropped += this.#length + (end - from) + 1;
          this.#clear();
        }
      }
      if (newline === -1) break;
      this.#skipping = false;
      from = newline + 1;
    }
    return { lines, dropped };
  }

  /** The stream ended: what is left, as a last line without a newline. */
  end(): Line[] {
    this.#skipping = false;
    return this.#length === 0 ? [] : [{ text: this.#flush(), cut: false }];
  }

  #take(piece: Buffer): void {
    if (piece.length === 0) return;
    // A copy: the chunk's memory is not kept alive by a small piece of it.
    this.#parts.push(Buffer.from(piece));
    this.#length += piece.length;
  }

  #flush(): string {
    const text = Buffer.concat(this.#parts, this.#length).toString('utf8');
    this.#clear();
    return text;
  }

  #clear(): void {
    this.#parts = [];
    this.#length = 0;
  }
}

/**
 * A token bucket: `ratePerSecond` tokens a second on average, at most `burst` at once. It reads no clock:
 * each call is given the instant it happens at, in milliseconds (monotonic).
 */
export class TokenBucket {
  readonly #rate: number;
  readonly #burst: number;
  #tokens: number;
  #at: number;

  constructor(ratePerSecond: number, burst: number, now: number) {
    this.#rate = ratePerSecond;
    this.#burst = burst;
    this.#tokens = burst;
    this.#at = now;
  }

  /** Takes `n` tokens if there are that many; false (and nothing taken) otherwise. */
  take(n: number, now: number): boolean {
    this.#refill(now);
    if (n > this.#tokens) return false;
    this.#tokens -= n;
    return true;
  }

  /**
   * Takes `n` tokens even when there are fewer (the bucket goes into debt); answers how long to wait, ms,
   * until it is out of debt again (0 when it is not in debt). For readers that slow their writer down
   * instead of dropping what it writes.
   */
  spend(n: number, now: number): number {
    this.#refill(now);
    this.#tokens -= n;
    return this.#tokens >= 0 ? 0 : Math.ceil((-this.#tokens * 1000) / this.#rate);
  }

  #refill(now: number): void {
    this.#tokens = Math.min(this.#burst, this.#tokens + ((now - this.#at) * this.#rate) / 1000);
    this.#at = now;
  }
}

/** The line that marks where output was dropped. */
export function droppedLine(bytes: number): string {
  return `[output dropped: ${bytes} bytes]`;
}

/** What marks a cut line, after its kept beginning. */
export const CUT_MARK = ' [line cut]';
