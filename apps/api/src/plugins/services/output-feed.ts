import type { OutputFeed, OutputFeedOptions } from '@cq/coordinator';
import type { FastifyInstance } from 'fastify';
import fp from 'fastify-plugin';

declare module 'fastify' {
  interface FastifyInstance {
    /** Sessions' output as it comes, for the logs route's streams: one subscription for all of this process's readers. */
    output: OutputFeed;
  }
}

/** Options of the output feed plugin. */
export interface OutputFeedPluginOptions {
  /** Options of the output feed. */
  outputFeed?: OutputFeedOptions;
}

/** The output feed behind the logs route's streams; it closes in `preClose`, so its streams end before Fastify waits for them. */
export const outputFeedPlugin = fp(
  async (app: FastifyInstance, options: OutputFeedPluginOptions) => {
    const output = app.coordinator.outputFeed(app.events, {
      ...options.outputFeed,
      onError: (err) => app.log.warn({ err }, 'output feed: recovering'),
    });
    app.decorate('output', output);
    app.addHook('preClose', async () => output.close());
  },
  { name: 'output-feed', fastify: '5.x', dependencies: ['coordinator', 'event-feed'] },
);
