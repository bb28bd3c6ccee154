import type { EventFeed, EventFeedOptions } from '@cq/coordinator';
import type { FastifyInstance } from 'fastify';
import fp from 'fastify-plugin';

declare module 'fastify' {
  interface FastifyInstance {
    /** Every session event, for the SSE routes: one subscription for all of this process's readers. */
    events: EventFeed;
  }
}

/** Options of the event feed plugin. */
export interface EventFeedPluginOptions {
  /** Options of the event feed. */
  eventFeed?: EventFeedOptions;
}

/** The event feed behind the SSE routes; it closes in `preClose`, so its streams end before Fastify waits for them. */
export const eventFeedPlugin = fp(
  async (app: FastifyInstance, options: EventFeedPluginOptions) => {
    const events = app.coordinator.eventFeed({
      ...options.eventFeed,
      onError: (err) => app.log.warn({ err }, 'event feed: recovering'),
    });
    app.decorate('events', events);
    // Event streams never finish on their own: end them before Fastify waits for in-flight requests.
    app.addHook('preClose', async () => events.close());
  },
  { name: 'event-feed', fastify: '5.x', dependencies: ['coordinator'] },
);
