// A session's output: a page of its kept lines (`GET .../sessions/{sessionId}/logs`), and the data of the
// SSE events that follow it.
import { z } from 'zod';
import { sessionIdSchema, userIdSchema } from './common.js';

export const sessionLogParams = z
  .object({
    userId: userIdSchema,
    sessionId: sessionIdSchema.describe('A session id of that user (current or ended): a UUID'),
  })
  .strict();

/** A line id: `<ms>-<seq>`, increasing within a session. */
export const LINE_ID_PATTERN = /^\d{1,16}-\d{1,16}$/;

export const sessionLogQuery = z
  .object({
    after: z
      .string()
      .regex(LINE_ID_PATTERN, 'must be a line id (<ms>-<seq>) from an earlier answer')
      .optional()
      .describe('Only the lines after this one'),
    limit: z.coerce
      .number()
      .int('must be an integer')
      .min(1, 'must be at least 1')
      .max(1000, 'must be at most 1000')
      .default(1000)
      .describe('Most lines in the answer (1 to 1000)'),
  })
  .strict();

export const outputLine = z
  .object({
    id: z.string().describe('The line id (<ms>-<seq>): the SSE id of the line, and the `after` of the next page'),
    at: z.string().describe('When the line reached Redis (Redis time), ISO-8601'),
    stream: z.enum(['stdout', 'stderr']),
    line: z
      .string()
      .describe('The line without its newline; a line over 16 KiB is cut there and ends in " [line cut]"'),
  })
  .meta({ id: 'OutputLineData' });

/** The `data` of the SSE `end` event of a session's output: the session ended and every kept line was sent. */
export const outputEndData = z.object({ sessionId: z.string() }).meta({ id: 'OutputEndData' });

export const sessionLogs = z
  .object({
    lines: z.array(outputLine).describe('Oldest first'),
    droppedBytes: z
      .number()
      .int()
      .describe('Output the host dropped so far: over LOG_RATE_BYTES, or unsent while Redis was unreachable'),
    more: z.boolean().describe('True when lines after the last one of this page are kept: ask again with `after`'),
  })
  .meta({ id: 'SessionLogs' });
