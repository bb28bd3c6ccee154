import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { errorSchema, noQuery, whoamiView } from '@cq/contract';

/** `GET /v1/whoami`: the calling key's name and scopes (any valid key). */
export const accessRoutes: FastifyPluginAsyncZod = async (app) => {
  app.get(
    '/v1/whoami',
    {
      config: { scope: 'key' },
      schema: {
        summary: "The calling key's name and scopes (never the key)",
        security: [{ serviceKey: [] }],
        querystring: noQuery,
        response: { 200: whoamiView, 401: errorSchema },
      },
    },
    async (request) => ({ name: request.caller!.name, scopes: [...request.caller!.scopes] }),
  );
};
