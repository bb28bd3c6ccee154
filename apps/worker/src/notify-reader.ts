// What a session writes on SESSION_NOTIFY_FD, read into the messages the runtime sends its host: bytes
// in, messages out. JSON lines: `{"ready": true, "endpoint"?: "...", "port"?: <1-65535>}` marks the
// session ready (the host hears of it again only when the endpoint or the port changes); `{"active": true}` and every readiness line are
// activity (the host hears of it at once, then at most every ACTIVE_REPORT_MS, with the instant of the
// latest); anything else is reported as a bad line (the first few) and ignored. At most one line of
// MAX_NOTIFY_LINE bytes is held. It sends nothing and sets no timer: every call is given its instant
// (monotonic ms); `reportDueAt` says when an activity report is due (`tick` then), and `push` says until
// when to read no more.
import { LineSplitter, TokenBucket, type Line } from './output.js';
import { ACTIVE_REPORT_MS, type FromRuntime } from './runtime-protocol.js';

export type NotifyMessage = Extract<FromRuntime, { t: 'ready' | 'active' | 'notify_bad' }>;

/** Longest line read on `SESSION_NOTIFY_FD`; a longer one is skipped whole, never buffered. */
export const MAX_NOTIFY_LINE = 1024;
/** Longest endpoint a session may announce (the contract's). */
export const MAX_ENDPOINT = 512;
/** Most lines read on `SESSION_NOTIFY_FD` a second, per session (a session says it is ready once or twice). */
export const NOTIFY_LINES_PER_SECOND = 1000;
/** Bad notification lines reported to the host per session; the rest are only counted. */
export const BAD_REPORTED = 5;

export class NotifyReader {
  readonly #id: string;
  readonly #splitter = new LineSplitter(MAX_NOTIFY_LINE);
  /**
   * At most NOTIFY_LINES_PER_SECOND lines are read a second: a session that writes more waits on its
   * writes (nothing it says there is lost, and a flood of lines to parse cannot take the runtime's time
   * from other sessions). Skipping an overlong line costs next to nothing, so bytes are not counted.
   */
  readonly #bucket: TokenBucket;
  #bad = 0;
  /** The port and endpoint last announced; null: not ready yet. */
  #announced: string | null = null;
  #reportedAt = Number.NEGATIVE_INFINITY;
  /** The latest activity not reported yet (monotonic ms). */
  #latest: number | undefined;
  #dueAt: number | undefined;

  constructor(id: string, now: number) {
    this.#id = id;
    this.#bucket = new TokenBucket(NOTIFY_LINES_PER_SECOND, NOTIFY_LINES_PER_SECOND, now);
  }

  /** A chunk read at `now`: its messages, and until when to read no more (undefined: read on). */
  push(chunk: Buffer, now: number): { messages: NotifyMessage[]; pauseUntil: number | undefined } {
    const found = this.#splitter.push(chunk).lines;
    const messages = this.#lines(found, now);
    const waitMs = this.#bucket.spend(found.length, now);
    return { messages, pauseUntil: waitMs === 0 ? undefined : now + waitMs };
  }

  /** The fd ended at `now`: what is left of it, as a last line. */
  end(now: number): NotifyMessage[] {
    return this.#lines(this.#splitter.end(), now);
  }

  /** When `tick` has an activity report to make (monotonic ms); undefined: none is waiting. */
  get reportDueAt(): number | undefined {
    return this.#dueAt;
  }

  /** The activity report waiting for its slot, once the slot has come. */
  tick(now: number): NotifyMessage[] {
    if (this.#dueAt === undefined || now < this.#dueAt) return [];
    this.#dueAt = undefined;
    return this.#report(now);
  }

  #lines(found: Line[], now: number): NotifyMessage[] {
    const messages: NotifyMessage[] = [];
    for (const { text, cut } of found) {
      if (cut) this.#reject(`a line longer than ${MAX_NOTIFY_LINE} characters`, messages);
      else this.#handle(text, now, messages);
    }
    return messages;
  }

  #handle(text: string, now: number, messages: NotifyMessage[]): void {
    if (text.trim() === '') return;
    let message: unknown;
    try {
      message = JSON.parse(text);
    } catch {
      this.#reject('not JSON', messages);
      return;
    }
    const { ready, endpoint, active, port } = (message ?? {}) as {
      ready?: unknown;
      endpoint?: unknown;
      active?: unknown;
      port?: unknown;
    };
    if (ready !== true) {
      if (active === true) this.#active(now, messages);
      else this.#reject('not {"ready": true, ...} or {"active": true}', messages);
      return;
    }
    if (
      endpoint !== undefined &&
      (typeof endpoint !== 'string' || endpoint.length < 1 || endpoint.length > MAX_ENDPOINT)
    ) {
      this.#reject(`endpoint must be a string of 1 to ${MAX_ENDPOINT} characters`, messages);
      return;
    }
    if (port !== undefined && (typeof port !== 'number' || !Number.isInteger(port) || port < 1 || port > 65_535)) {
      this.#reject('port must be an integer from 1 to 65535', messages);
      return;
    }
    this.#active(now, messages);
    const announced = `${port ?? ''} ${endpoint ?? ''}`;
    if (this.#announced === announced) return;
    this.#announced = announced;
    messages.push({
      t: 'ready',
      id: this.#id,
      ...(endpoint === undefined ? {} : { endpoint }),
      ...(port === undefined ? {} : { port }),
    });
  }

  #reject(reason: string, messages: NotifyMessage[]): void {
    this.#bad++;
    if (this.#bad <= BAD_REPORTED) messages.push({ t: 'notify_bad', id: this.#id, reason, count: this.#bad });
  }

  /** Activity at `now`: reported at once if its slot is free, else when the slot comes (the latest instant then). */
  #active(now: number, messages: NotifyMessage[]): void {
    this.#latest = now;
    if (this.#dueAt !== undefined) return;
    const slot = this.#reportedAt + ACTIVE_REPORT_MS;
    if (now >= slot) messages.push(...this.#report(now));
    else this.#dueAt = slot;
  }

  #report(now: number): NotifyMessage[] {
    if (this.#latest === undefined) return [];
    const at = this.#latest;
    this.#latest = undefined;
    this.#reportedAt = now;
    return [{ t: 'active', id: this.#id, at }];
  }
}
