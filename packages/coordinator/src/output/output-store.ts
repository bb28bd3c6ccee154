import type { Context } from '../context.js';
import { InvalidArgumentError, ScriptCode, replyCode, unexpectedReply } from '../errors.js';
import { assertInteger } from '../validate.js';

/** Which descriptor a line came from. */
export type OutputStream = 'stdout' | 'stderr';

/** A line of a session's output, as kept. */
export interface OutputLine {
  /** Its id: `<ms>-<seq>`, increasing within the session (the SSE id of the line). */
  readonly id: string;
  /** When it reached Redis, epoch ms (Redis clock; the id's first part). */
  readonly at: number;
  readonly stream: OutputStream;
  readonly line: string;
}

/** A page of a session's kept output. */
export interface OutputPage {
  /** Oldest first. */
  readonly lines: readonly OutputLine[];
  /** Bytes of output the session's host dropped so far (over the rate, or unsent when Redis was away). */
  readonly droppedBytes: number;
  /** True when lines after the page's last one are kept. */
  readonly more: boolean;
  /** True while the session has not ended: more lines may come. */
  readonly live: boolean;
}

/** How long and how much of a session's output is kept (the host's LOG_KEEP_LINES and retention). */
export interface OutputKeeping {
  /** Newest lines kept. */
  readonly keepLines: number;
  /** How long the output is kept from now (the longest the session may still run, plus the retention), ms. */
  readonly keepForMs: number;
  /** Bytes dropped so far by the host. */
  readonly droppedBytes: number;
}

/** Most lines one read answers. */
export const MAX_OUTPUT_PAGE = 1000;

const LINE_ID = /^\d{1,16}-\d{1,16}$/;
const streamCodes = { stdout: 'o', stderr: 'e' } as const satisfies Record<OutputStream, string>;

/** True when `id` is a line id (`<ms>-<seq>`). */
export function isLineId(id: string): boolean {
  return LINE_ID.test(id);
}

/** Orders two line ids. */
export function compareLineIds(a: string, b: string): number {
  const [am = 0, as = 0] = a.split('-').map(Number);
  const [bm = 0, bs = 0] = b.split('-').map(Number);
  return am - bm || as - bs;
}

/** Turns the flat `id, stream, line, …` triples of a script or XRANGE reply into lines. */
export function toLines(flat: readonly unknown[], from: number): OutputLine[] {
  const lines: OutputLine[] = [];
  for (let i = from; i + 2 < flat.length; i += 3) {
    const id = String(flat[i]);
    lines.push({
      id,
      at: Number(id.slice(0, id.indexOf('-'))),
      stream: flat[i + 1] === 'e' ? 'stderr' : 'stdout',
      line: String(flat[i + 2]),
    });
  }
  return lines;
}

/**
 * Sessions' output in Redis, beside the session (the user's hash tag): a stream of lines per session,
 * capped to the newest lines at each append, and a record of the bytes dropped. Worker hosts append;
 * the API reads. Each call is one script: one round trip.
 */
export class OutputStore {
  readonly #context: Context;

  constructor(context: Context) {
    this.#context = context;
  }

  /**
   * Appends lines (none: only records the dropped bytes and the keeping time, as at a session's start
   * and end) and tells the session's followers. Answers the last line's id, undefined when none was added.
   */
  async append(
    userId: string,
    sessionId: string,
    lines: ReadonlyArray<{ readonly stream: OutputStream; readonly line: string }>,
    keeping: OutputKeeping,
  ): Promise<string | undefined> {
    assertInteger(keeping.keepLines, 'keepLines', 1);
    assertInteger(keeping.keepForMs, 'keepForMs', 1);
    assertInteger(keeping.droppedBytes, 'droppedBytes', 0);
    const keys = this.#context.keys.output(userId, sessionId);
    const args: Array<string | number> = [keeping.keepLines, keeping.keepForMs, keeping.droppedBytes, keys.channel];
    for (const { stream, line } of lines) args.push(streamCodes[stream], line);
    const reply = await this.#context.scripts.run('appendOutput', [keys.lines, keys.record], args);
    if (replyCode(reply) !== ScriptCode.Ok) throw unexpectedReply('appendOutput', reply);
    const last = String(reply[1]);
    return last === '' ? undefined : last;
  }

  /**
   * A page of the session's kept output after the line `after` (from the oldest kept without it), at
   * most `limit` lines. Undefined when neither the output nor a live session of that id is kept.
   */
  async read(
    userId: string,
    sessionId: string,
    options: { after?: string | undefined; limit?: number } = {},
  ): Promise<OutputPage | undefined> {
    const limit = options.limit ?? MAX_OUTPUT_PAGE;
    assertInteger(limit, 'limit', 1);
    if (limit > MAX_OUTPUT_PAGE) throw new InvalidArgumentError(`limit must be at most ${MAX_OUTPUT_PAGE}`);
    if (options.after !== undefined && !isLineId(options.after))
      throw new InvalidArgumentError(`after must be a line id (<ms>-<seq>), got "${options.after.slice(0, 40)}"`);
    const keys = this.#context.keys.output(userId, sessionId);
    const user = this.#context.keys.user(userId);
    const reply = await this.#context.scripts.run(
      'readOutput',
      [keys.lines, keys.record, user.session],
      [sessionId, options.after ?? '', limit],
    );
    if (replyCode(reply) === ScriptCode.NoSession) return undefined;
    if (replyCode(reply) !== ScriptCode.Ok) throw unexpectedReply('readOutput', reply);
    return {
      live: Number(reply[1]) === 1,
      droppedBytes: Number(reply[2]),
      more: Number(reply[3]) === 1,
      lines: toLines(reply, 4),
    };
  }
}
