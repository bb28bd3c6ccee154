// Webhooks: a webhook's creation (its URL and event types), a webhook with and without its secret, the
// list, and its delivery attempts.
import { sessionEventTypes } from '../events.js';
import { WEBHOOK_ID_PATTERN } from '../vocabulary.js';
import { z } from 'zod';

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
