import { EventSourceParserStream } from 'eventsource-parser/stream';
import { ApiError, UnavailableError, toApiError } from './errors.js';
import type { EventsOptions, ResolvedOptions } from './options.js';

// The client's server-sent event reader: one stream that survives its connections. A connection ends
// (the API restarted, a proxy cut it), or goes silent (its peer vanished without closing it: a half-open
// connection, seen only as no heartbeat); either way the stream reconnects with the last id it got as
// `Last-Event-ID`, backing off. It gives up with `stream_closed` when no connection opens for
// `reconnectForMs`, and when the server keeps answering and closing at once: that does not heal by waiting.

/** An SSE message as the parser gives it. */
export interface SseMessage {
  event?: string | undefined;
  id?: string | undefined;
  data: string;
}

/** What a stream is asked for: where to resume, when to stop, whom to tell that it is open. */
export type StreamOptions = Pick<EventsOptions, 'lastEventId' | 'signal' | 'onOpen'>;

/** The first wait before a reconnection, ms; it doubles with each attempt that brings nothing. */
export const FIRST_RETRY_MS = 100;
/** The longest wait before a reconnection, ms. */
export const LAST_RETRY_MS = 2000;
/** Connections in a row that open and close without sending anything, after which a stream gives up. */
export const EMPTY_CLOSES_LIMIT = 5;
/** Heartbeat intervals without a byte after which a connection is taken for dead. */
export const SILENT_HEARTBEATS = 2;

/** How one connection of a stream went. */
export interface Attempt {
  /** The server answered 2xx: the stream was open. */
  opened: boolean;
  /** Something came: an event or a heartbeat (a connection that stayed open a heartbeat interval sends one). */
  delivered: boolean;
}

/**
 * When a broken stream tries again, and when it gives up. Pure: it reads no clock and sets no timer.
 *
 * The backoff and the count of empty closes start again only when a connection delivered something: a
 * server that answers and closes at once is tried {@link EMPTY_CLOSES_LIMIT} times, ever further apart,
 * then given up. A connection that does not open (refused, reset, a 5xx) is tried again until
 * `reconnectForMs` passed since the last one that opened: that is what an API restart looks like.
 */
export class Reconnection {
  readonly #reconnectForMs: number;
  #delayMs = FIRST_RETRY_MS;
  #brokenSince: number | undefined;
  #emptyCloses = 0;

  constructor(reconnectForMs: number) {
    this.#reconnectForMs = reconnectForMs;
  }

  /** The connection `attempt` broke at `now` (ms): the wait before the next one, or why to give up. */
  broke(now: number, attempt: Attempt): { retryInMs: number } | { giveUp: string } {
    if (attempt.delivered) {
      this.#delayMs = FIRST_RETRY_MS;
      this.#emptyCloses = 0;
    } else if (attempt.opened) this.#emptyCloses++;
    if (attempt.opened) this.#brokenSince = now;
    else this.#brokenSince ??= now;
    if (this.#emptyCloses >= EMPTY_CLOSES_LIMIT)
      return { giveUp: `closed ${this.#emptyCloses} times in a row before sending anything` };
    if (now - this.#brokenSince > this.#reconnectForMs)
      return { giveUp: `could not be reopened within ${this.#reconnectForMs} ms` };
    const retryInMs = this.#delayMs;
    this.#delayMs = Math.min(LAST_RETRY_MS, this.#delayMs * 2);
    return { retryInMs };
  }
}

/**
 * A stream that survives its connections: opens `path`, yields its messages, and reconnects with the last
 * id it got as `Last-Event-ID` whenever a connection breaks, goes silent, or ends before `isEnd` says so,
 * until `signal` aborts. Gives up with {@link UnavailableError} `stream_closed` as {@link Reconnection}
 * decides. An error answer of the API that a retry cannot change (4xx) is thrown at once.
 */
export async function* follow(
  settings: ResolvedOptions,
  path: string,
  options: StreamOptions,
  isEnd: (message: SseMessage) => boolean,
): AsyncGenerator<SseMessage> {
  const reconnection = new Reconnection(settings.reconnectForMs);
  let lastEventId = options.lastEventId;
  let opened = false;
  for (;;) {
    const attempt: Attempt = { opened: false, delivered: false };
    let why = 'it ended before its end was sent';
    try {
      const connection = connect(settings, path, lastEventId, options.signal, {
        opened: () => {
          attempt.opened = true;
          if (!opened) options.onOpen?.();
          opened = true;
        },
        delivered: () => (attempt.delivered = true),
      });
      for await (const message of connection) {
        if (message.id !== undefined && message.id !== '') lastEventId = message.id;
        yield message;
        if (isEnd(message)) return;
      }
    } catch (err) {
      if (options.signal?.aborted === true) return;
      if (err instanceof ApiError && err.status >= 400 && err.status < 500) throw err;
      why = err instanceof Error ? err.message : String(err);
    }
    if (options.signal?.aborted === true) return;
    const next = reconnection.broke(performance.now(), attempt);
    if ('giveUp' in next)
      throw new UnavailableError(
        0,
        'stream_closed',
        `The stream ${path} broke (${why}) and ${next.giveUp}` +
          `${lastEventId === undefined ? '' : `; resume with lastEventId ${lastEventId}`}.`,
        undefined,
      );
    await pause(next.retryInMs, options.signal);
  }
}

/**
 * One connection: yields its messages until it ends, `signal` aborts, or nothing (no byte) arrives for
 * {@link SILENT_HEARTBEATS} heartbeat intervals while the reader waits for a message (then it throws).
 * The silence is not counted while the reader holds a message: a slow reader is not a dead connection.
 */
async function* connect(
  settings: ResolvedOptions,
  path: string,
  lastEventId: string | undefined,
  signal: AbortSignal | undefined,
  watch: { opened: () => void; delivered: () => void },
): AsyncGenerator<SseMessage> {
  const headers: Record<string, string> = { accept: 'text/event-stream' };
  if (settings.apiKey !== undefined) headers['authorization'] = `Bearer ${settings.apiKey}`;
  if (lastEventId !== undefined) headers['last-event-id'] = lastEventId;
  const controller = new AbortController();
  const abort = (): void => controller.abort(signal?.reason);
  signal?.addEventListener('abort', abort, { once: true });
  const opening = setTimeout(() => controller.abort(new Error('the stream did not open in time')), settings.timeoutMs);
  const silentMs = SILENT_HEARTBEATS * settings.heartbeatMs;
  const silence = new SilenceWatch(silentMs, () =>
    controller.abort(new Error(`nothing came, not even a heartbeat, for ${silentMs} ms`)),
  );
  let response: Response;
  try {
    response = await fetch(`${settings.baseUrl}${path}`, { headers, signal: controller.signal });
  } catch (err) {
    signal?.removeEventListener('abort', abort);
    if (signal?.aborted) return;
    throw new UnavailableError(
      0,
      'unreachable',
      `The API at ${settings.baseUrl} could not be reached: ${(err as Error).message}`,
      undefined,
    );
  } finally {
    clearTimeout(opening);
  }
  try {
    if (!response.ok || response.body === null) {
      const text = await response.text();
      let parsed: unknown = text;
      try {
        parsed = JSON.parse(text);
      } catch {
        // not JSON: passed on as text
      }
      throw toApiError(response.status, parsed, response.headers);
    }
    watch.opened();
    const messages = response.body
      .pipeThrough(
        new TransformStream<Uint8Array, Uint8Array>({
          transform(bytes, out) {
            silence.heard();
            out.enqueue(bytes);
          },
        }),
      )
      .pipeThrough(new TextDecoderStream())
      .pipeThrough(new EventSourceParserStream({ onComment: () => watch.delivered() }));
    silence.waiting();
    for await (const message of messages) {
      silence.holding();
      watch.delivered();
      yield message;
      silence.waiting();
    }
  } catch (err) {
    if (!signal?.aborted) throw err;
  } finally {
    silence.holding();
    signal?.removeEventListener('abort', abort);
    controller.abort();
  }
}

/** Calls `onSilent` when nothing is heard for `ms` while the reader is waiting; sleeps while it is not. */
class SilenceWatch {
  readonly #ms: number;
  readonly #onSilent: () => void;
  #timer: ReturnType<typeof setTimeout> | undefined;
  #waiting = false;

  constructor(ms: number, onSilent: () => void) {
    this.#ms = ms;
    this.#onSilent = onSilent;
  }

  /** The reader waits for its next message: the silence is counted from now. */
  waiting(): void {
    this.#waiting = true;
    this.heard();
  }

  /** Bytes arrived: the silence starts again (while the reader waits). */
  heard(): void {
    if (!this.#waiting) return;
    clearTimeout(this.#timer);
    this.#timer = setTimeout(this.#onSilent, this.#ms);
  }

  /** The reader holds a message (or is gone): no silence is counted. */
  holding(): void {
    this.#waiting = false;
    clearTimeout(this.#timer);
  }
}

/** Waits `ms`, or less when `signal` aborts. */
function pause(ms: number, signal: AbortSignal | undefined): Promise<void> {
  return new Promise((resolve) => {
    const timer = setTimeout(done, ms);
    signal?.addEventListener('abort', done, { once: true });
    function done(): void {
      clearTimeout(timer);
      signal?.removeEventListener('abort', done);
      resolve();
    }
  });
}
