import type { EventFeedOptions } from '@cq/coordinator';
import type { FastifyInstance } from 'fastify';
import fp from 'fastify-plugin';
import type { ApiConfig } from '../../config.js';
import type { Resolver } from '../../webhooks/address-guard.js';
import { coordinatorPlugin } from './coordinator.js';
import { eventFeedPlugin } from './event-feed.js';
import { outputFeedPlugin } from './output-feed.js';
import { webhooksPlugin } from './webhooks.js';
import { redisPlugin } from './redis.js';
import { spawnQueuesPlugin } from './spawn-queues.js';
import { spawnsPlugin } from './spawns.js';
import { statsPlugin } from './stats.js';
import { sweeperPlugin } from './sweeper.js';

export { HOLD_MARGIN_MS } from './spawns.js';

declare module 'fastify' {
  interface FastifyInstance {
    config: ApiConfig;
  }
}

/** Options of the services plugin. */
export interface ServicesOptions {
  config: ApiConfig;
  /** Start the sweeper (ends overdue sessions as `lost`). @defaultValue true */
  sweep?: boolean;
  /** Options of the event feed. */
  eventFeed?: EventFeedOptions;
  /** Name resolution of webhook hosts. @defaultValue the system resolver */
  webhookResolve?: Resolver;
}

/** The API's configuration, as `app.config`. */
const configPlugin = fp(
  async (app: FastifyInstance, options: { config: ApiConfig }) => {
    app.decorate('config', options.config);
  },
  { name: 'config', fastify: '5.x' },
);

/**
 * The API's resources, one plugin each with its dependencies declared: the Redis request connection,
 * the coordinator, the spawn queue's shards (a connection of their own), the spawn saga, the sweeper,
 * the stats (a connection of their own), the event feed, the output feed and the webhooks (delivery
 * queue, worker, dispatcher). Each closes its own in `onClose`, and Fastify runs those in reverse order
 * of registration, so a resource closes before what it uses.
 */
export const servicesPlugin = fp(
  async (app: FastifyInstance, options: ServicesOptions) => {
    await app.register(configPlugin, { config: options.config });
    await app.register(redisPlugin);
    await app.register(coordinatorPlugin);
    await app.register(spawnQueuesPlugin);
    await app.register(spawnsPlugin);
    await app.register(sweeperPlugin, { sweep: options.sweep ?? true });
    await app.register(statsPlugin);
    await app.register(eventFeedPlugin, options.eventFeed === undefined ? {} : { eventFeed: options.eventFeed });
    await app.register(outputFeedPlugin);
    await app.register(webhooksPlugin, options.webhookResolve === undefined ? {} : { resolve: options.webhookResolve });
  },
  { name: 'services', fastify: '5.x', dependencies: ['metrics'] },
);
