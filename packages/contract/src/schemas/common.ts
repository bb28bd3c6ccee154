// What the schemas of several resources share: the ids of users and sessions, labels, pools, the
// depth limits, the error body, and the shapes of a route that takes no query or no body.
import { labelsProblem } from '../labels.js';
import { MAX_LABELS, POOL_PATTERN, USER_ID_PATTERN } from '../vocabulary.js';
import { z } from 'zod';

/** Deepest nesting accepted in metadata; checked before anything serialises it. */
export const MAX_METADATA_DEPTH = 32;

/**
 * Deepest nesting of objects and arrays accepted in any request body (`[]` is 1): the API counts it as
 * the body arrives, before parsing, and refuses a deeper body with 400. Room for metadata's own
 * {@link MAX_METADATA_DEPTH} inside a body.
 */
export const MAX_BODY_DEPTH = 64;

export const userIdSchema = z
  .string()
  .regex(USER_ID_PATTERN, 'userId must be 1 to 128 characters of A-Z a-z 0-9 . _ : @ -')
  .describe('The user: 1 to 128 characters of A-Z a-z 0-9 . _ : @ -');

/** A session id: a UUID, as `POST /v1/spawn` answers it (read in any case, compared in lowercase). */
export const sessionIdSchema = z
  .uuid('must be a session id (a UUID, as POST /v1/spawn answered it)')
  .toLowerCase()
  .describe('A session id (a UUID)');

export const positiveMs = z.number().int().positive();

/** A session's labels: at most 16, each key 1 to 63 of `A-Z a-z 0-9 . _ - /`, value up to 128 characters. */
export const labelsSchema = z
  .record(z.string(), z.string())
  .superRefine((labels, ctx) => {
    const problem = labelsProblem(labels);
    if (problem !== undefined) ctx.addIssue({ code: 'custom', message: problem });
  })
  .describe(
    `Labels: at most ${MAX_LABELS} pairs; a key is 1 to 63 characters of A-Z a-z 0-9 . _ - /, ` +
      'a value 0 to 128 characters without control characters',
  );

/** A change to labels: as {@link labelsSchema}, and `null` removes a key. */
export const labelsPatchSchema = z
  .record(z.string(), z.string().nullable())
  .superRefine((labels, ctx) => {
    const problem = labelsProblem(labels, true);
    if (problem !== undefined) ctx.addIssue({ code: 'custom', message: problem });
  })
  .describe("Labels to merge into the session's: a key set to null is removed; the result keeps the label limits");

export const poolSchema = z
  .string()
  .regex(POOL_PATTERN, 'must be 1 to 64 characters of a-z 0-9 -')
  .describe('A pool of worker hosts: 1 to 64 characters of a-z 0-9 -');

export const userParams = z.object({ userId: userIdSchema }).strict();

/** The query of a route that takes none: any query parameter is refused (400 naming it). */
export const noQuery = z.object({}).strict().describe('No query parameters');

/**
 * The query of the routes that change the user's session (`DELETE`, `PATCH`, `POST .../activity`): an
 * optional precondition naming the session meant.
 */
export const sessionMatchQuery = z
  .object({
    sessionId: sessionIdSchema
      .optional()
      .describe(
        "Act only when the user's live session is this one: otherwise (another one, or none) 409 " +
          'session_mismatch and nothing changes',
      ),
  })
  .strict();

/** The body of a route that takes none: absent, empty, or `{}`; any field in it is refused (400). */
export const emptyBody = z.object({}).strict().nullish().describe('No body (an empty object is accepted)');

export const errorSchema = z
  .object({
    error: z.looseObject({ code: z.string(), message: z.string() }),
  })
  .meta({ id: 'ErrorBody', description: 'An error: its stable code, a message, and the fields its code has' });
