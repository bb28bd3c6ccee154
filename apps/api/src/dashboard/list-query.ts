// What the page asks of the session list, parsed as `GET /v1/sessions` parses its query (the contract's
// `listSessionsQuery`), so a filter the dashboard takes is one the API takes, and means the same.
import { listSessionsQuery } from '@cq/contract';
import { z } from 'zod';

/**
 * The page's inputs as it sends them (apps/api/static/dashboard/app.js sends every filter input): an empty
 * one is no filter, an empty cursor the first page. Its page size is never empty: an empty one stays, and
 * is refused.
 */
function givenInputs(query: unknown): unknown {
  if (typeof query !== 'object' || query === null || Array.isArray(query)) return query;
  return Object.fromEntries(Object.entries(query).filter(([key, value]) => value !== '' || key === 'limit'));
}

/** The live table's query (`/dashboard/api/state`): the list's filters and cursor, a page of 1 to 200 (default 50). */
export const stateQuery = z.preprocess(
  givenInputs,
  listSessionsQuery.extend({ limit: z.coerce.number().int().min(1).max(200).default(50) }),
);

/** The list's filters alone: what a bulk stop's confirmation counts (`/dashboard/api/matching`) and stops. */
export const filterQuery = z.preprocess(givenInputs, listSessionsQuery.omit({ limit: true, cursor: true }));
