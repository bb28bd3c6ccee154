import swagger from '@fastify/swagger';
import Fastify from 'fastify';
import { jsonSchemaTransform, serializerCompiler, validatorCompiler, type ZodTypeProvider } from 'fastify-type-provider-zod';
import type { Logger } from 'pino';
import type { ApiConfig } from './config.js';
import { errorsPlugin } from './plugins/errors.js';
import { metricsPlugin } from './plugins/metrics.js';
import { servicesPlugin } from './plugins/services.js';
import { operationRoutes } from './routes/operations.js';
import { sessionRoutes } from './routes/sessions.js';
import { spawnRoutes } from './routes/spawn.js';
import { tokenRoutes } from './routes/tokens.js';

/** Largest request body accepted, bytes; larger ones get 413. */
export const BODY_LIMIT = 64 * 1024;

/** Options of {@link buildApp}. */
export interface BuildAppOptions {
  config: ApiConfig;
  logger: Logger;
  /** Run the sweeper. @defaultValue true */
  sweep?: boolean;
  /** Collect Node's default process metrics. @defaultValue true */
  defaultMetrics?: boolean;
}

/** Builds the API (not yet listening). Close it with `app.close()`: that also closes its Redis clients. */
export async function buildApp(options: BuildAppOptions) {
  const app = Fastify({
    loggerInstance: options.logger,
    bodyLimit: BODY_LIMIT,
    disableRequestLogging: false,
    return503OnClosing: true,
    forceCloseConnections: 'idle',
    routerOptions: { maxParamLength: 256 },
  }).withTypeProvider<ZodTypeProvider>();
  app.setValidatorCompiler(validatorCompiler);
  app.setSerializerCompiler(serializerCompiler);

  await app.register(metricsPlugin, { defaultMetrics: options.defaultMetrics ?? true });
  await app.register(errorsPlugin);
  await app.register(servicesPlugin, { config: options.config, sweep: options.sweep ?? true });
  await app.register(swagger, {
    openapi: {
      info: { title: 'worker-coordinator API', version: '1.0.0', description: 'Hands out worker sessions to users, one at a time per user.' },
      components: { securitySchemes: { serviceKey: { type: 'http', scheme: 'bearer' } } },
    },
    transform: jsonSchemaTransform,
  });
  await app.register(operationRoutes);
  await app.register(tokenRoutes);
  await app.register(spawnRoutes);
  await app.register(sessionRoutes);
  return app;
}

/** The built API. */
export type ApiApp = Awaited<ReturnType<typeof buildApp>>;
