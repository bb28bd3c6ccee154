// Request and response schemas of the HTTP API (zod): the API validates with them and generates its
// OpenAPI document from them; the client's types are inferred from them (types.ts). A schema with a
// `.meta({ id })` is a named component of that document (`components.schemas`, named as its type in
// types.ts where there is one), so code generators give it a name too.
import { WEBHOOK_ID_PATTERN } from './vocabulary.js';
import { z } from 'zod';
import { sessionEventTypes } from './events.js';
import { sessionIdSchema, userIdSchema } from './schemas/common.js';

export {
  MAX_BODY_DEPTH,
  MAX_METADATA_DEPTH,
  emptyBody,
  errorSchema,
  labelsPatchSchema,
  labelsSchema,
  noQuery,
  poolSchema,
  sessionIdSchema,
  sessionMatchQuery,
  userIdSchema,
  userParams,
} from './schemas/common.js';
export * from './schemas/tokens.js';
export * from './schemas/sessions.js';
export * from './schemas/events.js';
export * from './schemas/hosts.js';
export * from './schemas/access.js';

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

export const createWebhookBody = z
  .object({
    url: z.string().min(1).max(2048).describe('Where events are POSTed: an http(s) URL of a public address'),
    events: z
      .array(z.enum(sessionEventTypes))
      .min(1, 'must name at least one event type (leave it out for every type)')
      .max(sessionEventTypes.length)
      .refine((types) => new Set(types).size === types.length, 'must not name a type twice')
      .optional()
      .describe('The event types to receive; every type when absent'),
  })
  .strict()
  .meta({ id: 'CreateWebhookRequest' });

export const webhookView = z
  .object({
    id: z.string(),
    url: z.string(),
    events: z
      .array(z.enum(sessionEventTypes))
      .describe('The event types it receives (every type when it was created without)'),
    createdAt: z.string(),
  })
  .meta({ id: 'WebhookData' });

export const webhookCreated = webhookView
  .extend({
    secret: z.string().describe('whsec_<base64>: the signing secret (Standard Webhooks); shown only in this answer'),
  })
  .meta({ id: 'CreatedWebhook' });

export const webhooksView = z.object({ webhooks: z.array(webhookView) }).meta({ id: 'Webhooks' });

export const webhookParams = z
  .object({
    id: z
      .string()
      .regex(WEBHOOK_ID_PATTERN, 'must be a webhook id (wh_ and 24 hex digits, as POST /v1/webhooks answered it)')
      .describe('A webhook id: wh_ and 24 hex digits'),
  })
  .strict();

export const deliveriesView = z
  .object({
    deliveries: z
      .array(
        z
          .object({
            eventId: z.string().describe('The event id: the webhook-id header of every attempt'),
            type: z.string(),
            attempt: z.number().int().describe('1 for the first attempt'),
            status: z.number().int().optional().describe("The receiver's HTTP status, when it answered"),
            error: z.string().optional().describe('Why the attempt failed without an answer'),
            at: z.string(),
            nextAttemptAt: z
              .string()
              .optional()
              .describe('When the next attempt is due (absent once delivered or given up)'),
          })
          .meta({ id: 'Delivery' }),
      )
      .describe('Newest first, at least the last 100 attempts'),
  })
  .meta({ id: 'DeliveryLog' });
