import type { Webhook } from '@cq/coordinator';
import {
  createWebhookBody,
  deliveriesView,
  emptyBody,
  errorSchema,
  noQuery,
  webhookCreated,
  webhookParams,
  webhooksView,
  type WebhookData,
} from '@cq/contract';
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { HttpError } from '../http-errors.js';
import { iso } from '../iso.js';
import { checkWebhookUrl } from '../webhooks/address-guard.js';
import { webhookSecret } from '../webhooks/signature.js';
import { audit } from '../plugins/auth.js';

/** A webhook as the API shows it: never its secret. */
function view(webhook: Webhook): WebhookData {
  return { id: webhook.id, url: webhook.url, events: [...webhook.events], createdAt: iso(webhook.createdAt) };
}

function noWebhook(id: string): HttpError {
  return new HttpError('no_webhook', `No webhook has the id ${id}.`);
}

/** Webhook endpoints (service key): create (the secret shown once), list, delete, and each one's deliveries. */
export const webhookRoutes: FastifyPluginAsyncZod = async (app) => {
  const { webhooks } = app.coordinator;

  app.post(
    '/v1/webhooks',
    {
      config: { scope: 'webhooks:write' },
      schema: {
        summary: 'Create a webhook: every session event of its types is POSTed to it, signed (Standard Webhooks)',
        security: [{ serviceKey: [] }],
        querystring: noQuery,
        body: createWebhookBody,
        response: { 201: webhookCreated, 400: errorSchema, 401: errorSchema, 503: errorSchema },
      },
    },
    async (request, reply) => {
      // The answer carries the signing secret: no cache (browser, proxy) may keep it.
      reply.header('Cache-Control', 'no-store');
      const { url, events } = request.body;
      const checked = await checkWebhookUrl(url, {
        allowPrivate: app.config.webhookAllowPrivate,
        resolve: app.webhooks.resolve,
      });
      if (!checked.ok) throw new HttpError('webhook_url_forbidden', `The webhook URL is refused: ${checked.reason}.`);
      const secret = webhookSecret();
      const webhook = await webhooks.create({
        url: checked.url.href,
        events: events ?? [],
        sealedSecret: app.webhooks.secrets.seal(secret),
      });
      app.webhooks.created();
      // The URL without its query or credentials, which may carry a receiver's secret.
      const where = new URL(webhook.url);
      audit(request, 'webhook.create', webhook.id, { webhookId: webhook.id, url: `${where.origin}${where.pathname}` });
      return reply.code(201).send({ ...view(webhook), secret });
    },
  );

  app.get(
    '/v1/webhooks',
    {
      config: { scope: 'webhooks:read' },
      schema: {
        summary: 'Every webhook (without secrets), oldest first',
        security: [{ serviceKey: [] }],
        querystring: noQuery,
        response: { 200: webhooksView, 401: errorSchema, 503: errorSchema },
      },
    },
    async () => ({ webhooks: (await webhooks.list()).map(view) }),
  );

  app.delete(
    '/v1/webhooks/:id',
    {
      config: { scope: 'webhooks:write' },
      schema: {
        summary: 'Delete a webhook: its deliveries stop, pending retries included',
        security: [{ serviceKey: [] }],
        params: webhookParams,
        querystring: noQuery,
        body: emptyBody,
        response: {
          204: z.null().describe('Deleted'),
          400: errorSchema,
          401: errorSchema,
          404: errorSchema,
          503: errorSchema,
        },
      },
    },
    async (request, reply) => {
      if (!(await webhooks.delete(request.params.id))) throw noWebhook(request.params.id);
      audit(request, 'webhook.delete', request.params.id, { webhookId: request.params.id });
      return reply.code(204).send(null);
    },
  );

  app.get(
    '/v1/webhooks/:id/deliveries',
    {
      config: { scope: 'webhooks:read' },
      schema: {
        summary: "A webhook's delivery attempts, newest first (the last 200)",
        security: [{ serviceKey: [] }],
        params: webhookParams,
        querystring: noQuery,
        response: { 200: deliveriesView, 400: errorSchema, 401: errorSchema, 404: errorSchema, 503: errorSchema },
      },
    },
    async (request) => {
      const attempts = await webhooks.deliveries(request.params.id);
      if (attempts === undefined) throw noWebhook(request.params.id);
      return {
        deliveries: attempts.map((a) => ({
          eventId: a.eventId,
          type: a.type,
          attempt: a.attempt,
          ...(a.status === undefined ? {} : { status: a.status }),
          ...(a.error === undefined ? {} : { error: a.error }),
          at: iso(a.at),
          ...(a.nextAttemptAt === undefined ? {} : { nextAttemptAt: iso(a.nextAttemptAt) }),
        })),
      };
    },
  );
};
