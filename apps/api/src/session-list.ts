// The session list as the API reads it, for `GET /v1/sessions` and the dashboard alike: the filter of a
// query the contract's `listSessionsQuery` parsed (or of a bulk stop's body), a page of the coordinator's
// walk with its signed cursors (session-cursor.ts), and each live session as the contract shows it. One
// path, so a filter, a cursor or a session cannot mean one thing to the API and another to the dashboard.
import type { LiveSession, listSessionsQuery } from '@cq/contract';
import type { SessionFilter, SessionStore, SessionView } from '@cq/coordinator';
import type { z } from 'zod';
import { HttpError } from './http-errors.js';
import { isoField } from './iso.js';
import { CursorCodec, CursorError } from './session-cursor.js';

/** The filters of the list's query (`label` repeatable, `key=value`) or of a bulk stop's body (`labels`). */
export interface FilterFields {
  state?: 'pending' | 'running' | 'stopping' | undefined;
  pool?: string | undefined;
  workerId?: string | undefined;
  userId?: string | undefined;
  label?: string | string[] | undefined;
  labels?: Readonly<Record<string, string>> | undefined;
}

/** The filter of a parsed query or body: the filters given, `label` pairs and `labels` as one set of labels. */
export function filterOf(fields: FilterFields): SessionFilter {
  const labels: Record<string, string> = { ...fields.labels };
  for (const pair of fields.label === undefined ? [] : [fields.label].flat()) {
    const at = pair.indexOf('=');
    labels[pair.slice(0, at)] = pair.slice(at + 1);
  }
  return {
    ...(fields.state === undefined ? {} : { state: fields.state }),
    ...(fields.pool === undefined ? {} : { pool: fields.pool }),
    ...(fields.workerId === undefined ? {} : { workerId: fields.workerId }),
    ...(fields.userId === undefined ? {} : { userId: fields.userId }),
    ...(Object.keys(labels).length === 0 ? {} : { labels }),
  };
}

/** A query of the list as `listSessionsQuery` parsed it: its filters, a page size and the previous page's cursor. */
export type ListQuery = z.output<typeof listSessionsQuery>;

/** One page of the list: the filter it was read with, its sessions, and the cursor of the next (absent: the last). */
export interface ListPage {
  filter: SessionFilter;
  sessions: SessionView[];
  next?: string;
}

/**
 * Reads pages of the session list: decodes the query's cursor for its filter (a bad one is
 * `400 invalid_request` naming `cursor`), reads the page, and signs the next page's cursor.
 */
export class SessionListReader {
  readonly #sessions: Pick<SessionStore, 'list'>;
  readonly #cursors: CursorCodec;

  constructor(sessions: Pick<SessionStore, 'list' | 'listCursorSecret'>) {
    this.#sessions = sessions;
    this.#cursors = new CursorCodec(() => sessions.listCursorSecret());
  }

  async page(query: ListQuery): Promise<ListPage> {
    const filter = filterOf(query);
    let from;
    try {
      from = query.cursor === undefined ? undefined : await this.#cursors.decode(query.cursor, filter);
    } catch (err) {
      if (err instanceof CursorError) throw new HttpError('invalid_request', err.message, { field: 'cursor' });
      throw err;
    }
    const page = await this.#sessions.list(filter, { limit: query.limit, ...(from === undefined ? {} : { from }) });
    return {
      filter,
      sessions: page.sessions,
      ...(page.next === undefined ? {} : { next: await this.#cursors.encode(page.next, filter) }),
    };
  }
}

/** What every view of a live session shows as it is: who and what it is, where it runs, whether it is ready. */
export type SessionFields = Pick<
  LiveSession,
  'sessionId' | 'userId' | 'fence' | 'state' | 'pool' | 'labels' | 'ready' | 'endpoint' | 'port' | 'workerId'
>;

/** The fields of a live session every view shows as they are (the times each view shows in its own way). */
export function sessionFields(session: SessionView): SessionFields {
  return {
    sessionId: session.sessionId,
    userId: session.userId,
    fence: session.fence,
    state: session.state,
    pool: session.pool,
    labels: { ...session.labels },
    ready: session.ready,
    ...(session.endpoint === undefined ? {} : { endpoint: session.endpoint }),
    ...(session.port === undefined ? {} : { port: session.port }),
    ...(session.workerId === undefined ? {} : { workerId: session.workerId }),
  };
}

/** A live session as the contract shows it (`GET`, `PATCH`, the list, by id): its times as ISO-8601. */
export function liveSession(session: SessionView): LiveSession {
  return {
    ...sessionFields(session),
    ...isoField('startedAt', session.startedAt),
    ...isoField('leaseExpiresAt', session.leaseExpiresAt),
    ...isoField('deadline', session.deadline),
    ...(session.idleTimeoutMs === undefined ? {} : { idleTimeoutMs: session.idleTimeoutMs }),
    ...isoField('lastActivityAt', session.lastActivityAt),
  };
}
