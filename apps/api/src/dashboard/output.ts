import { sessionIdSchema, userIdSchema } from '@cq/contract';
import type { FastifyInstance } from 'fastify';
import { z } from 'zod';
import { errorBody } from '../http-errors.js';
import { forward } from './actions.js';

/** Lines of a session's output a page shows. */
export const OUTPUT_TAIL = 100;
/** Most lines one page of the logs route gives (its `limit`'s upper bound). */
const PAGE_LINES = 1000;
/** Pages read for one answer: a page catching up on a long output asks again for the rest. */
const MAX_PAGES = 20;

/** What the page asks for: the newest `tail` lines of a session's output after `after`. */
export const outputQuery = z
  .object({
    userId: userIdSchema,
    sessionId: sessionIdSchema,
    after: z.string().min(1).max(128).optional(),
    tail: z.coerce.number().int().min(1).max(PAGE_LINES).default(OUTPUT_TAIL),
  })
  .strict();

/** The logs route's JSON answer (CONTRACT.md, `GET /v1/users/{userId}/sessions/{sessionId}/logs`). */
const logsPage = z.object({
  lines: z.array(z.object({ id: z.string(), at: z.string(), stream: z.enum(['stdout', 'stderr']), line: z.string() })),
  droppedBytes: z.number(),
  more: z.boolean(),
});

/** One page of the logs route. */
export type LogsPage = z.infer<typeof logsPage>;

/** One line of output as the page shows it. */
export type OutputLine = LogsPage['lines'][number];

/** What `GET /dashboard/api/output` answers with 200. */
export interface OutputTail {
  /** The newest lines after `after`, oldest first, at most `tail`. */
  lines: OutputLine[];
  /** Lines after `after` left out because newer ones fill the tail. */
  skipped: number;
  /** Bytes of this session's output dropped by the rate bound so far. */
  droppedBytes: number;
  /** Where the next ask goes on from (the last line read); `after` again when there was nothing new. */
  next: string | undefined;
  /** More lines are kept after `next` than one answer reads: ask again at once. */
  more: boolean;
}

/** An answer to pass on: the tail, or the logs route's own error (404 `no_session`: no output kept). */
export type OutputAnswer = { status: 200; body: OutputTail } | { status: number; body: unknown };

/**
 * The newest `tail` lines of the pages read so far, in order, with the count of those left out and
 * where the next page starts. Pure: {@link readOutputTail} feeds it the logs route's pages.
 */
export class OutputTailCollector {
  readonly #tail: number;
  readonly #lines: OutputLine[] = [];
  #skipped = 0;
  #droppedBytes = 0;
  #next: string | undefined;
  #more = true;

  constructor(tail: number, after: string | undefined) {
    this.#tail = tail;
    this.#next = after;
  }

  /** Where the next page starts (`after`), undefined for the oldest kept line. */
  get next(): string | undefined {
    return this.#next;
  }

  /** True while the route said more lines follow the last page. */
  get more(): boolean {
    return this.#more;
  }

  add(page: LogsPage): void {
    this.#lines.push(...page.lines);
    const over = this.#lines.length - this.#tail;
    if (over > 0) this.#skipped += this.#lines.splice(0, over).length;
    this.#droppedBytes = page.droppedBytes;
    // A page with no line cannot move on: whatever `more` says, asking again would read it again.
    this.#more = page.more && page.lines.length > 0;
    this.#next = page.lines.at(-1)?.id ?? this.#next;
  }

  result(): OutputTail {
    return {
      lines: [...this.#lines],
      skipped: this.#skipped,
      droppedBytes: this.#droppedBytes,
      next: this.#next,
      more: this.#more,
    };
  }
}

/**
 * Reads the newest lines of a session's output through the API's own logs route, with the operator's
 * service key: the route's checks, bounds and errors are the dashboard's too, and the page never holds
 * a key. The route gives the oldest lines first, so this reads its pages from `after` on (up to
 * {@link MAX_PAGES} of them) and keeps the newest `tail`.
 */
export async function readOutputTail(
  app: FastifyInstance,
  serviceKey: string,
  query: z.infer<typeof outputQuery>,
): Promise<OutputAnswer> {
  const path = `/v1/users/${encodeURIComponent(query.userId)}/sessions/${encodeURIComponent(query.sessionId)}/logs`;
  const collector = new OutputTailCollector(query.tail, query.after);
  for (let page = 0; page < MAX_PAGES && collector.more; page++) {
    const after = collector.next;
    const search = new URLSearchParams({ limit: String(PAGE_LINES), ...(after === undefined ? {} : { after }) });
    const answer = await forward(app, serviceKey, 'GET', `${path}?${search}`);
    if (answer.status !== 200) {
      const passed = z.object({ error: z.object({ code: z.string(), message: z.string() }) }).safeParse(answer.body);
      return {
        status: answer.status,
        body: passed.success
          ? passed.data
          : errorBody('internal', `The logs route answered HTTP ${answer.status} without an error body.`),
      };
    }
    const parsed = logsPage.safeParse(answer.body);
    if (!parsed.success) {
      app.log.error({ issues: parsed.error.issues }, 'dashboard: the logs route answered an unexpected body');
      return {
        status: 500,
        body: errorBody('internal', 'The logs route answered a body the dashboard does not understand.'),
      };
    }
    collector.add(parsed.data);
  }
  return { status: 200, body: collector.result() };
}
