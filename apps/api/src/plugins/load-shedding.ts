import { monitorEventLoopDelay } from 'node:perf_hooks';
import type { FastifyInstance } from 'fastify';
import fp from 'fastify-plugin';
import { errorBody } from '../http-errors.js';

/** Options of {@link loadSheddingPlugin}. */
export interface LoadSheddingOptions {
  /** Shed while the event loop's mean delay over the last sample exceeds this, ms. */
  maxEventLoopDelayMs: number;
  /** How often the delay is sampled, ms. @defaultValue 1000 */
  sampleIntervalMs?: number;
}

/** Resolution of the event-loop delay histogram, ms (its timer's own period, taken off the mean). */
const RESOLUTION_MS = 10;

/** Paths never shed: a liveness probe that failed under load would have the process restarted under load. */
const NEVER_SHED = new Set(['/healthz']);

/**
 * Load shedding that looks at the process, not at who asks: while the event loop lags, every request
 * (but `/healthz`) is answered `503 unavailable` with `Retry-After: 1`, so junk from one address can
 * never make a valid token fail, however much of it there is.
 *
 * It reads nothing but an in-process histogram: no system call that needs a descriptor. (The
 * `@fastify/under-pressure` it replaces read `process.memoryUsage()` on its timer, which opens
 * `/proc/self/stat`; once a flood of connections had taken every descriptor it threw `EMFILE` uncaught
 * and the process exited.) The measure is the one that plugin used: the histogram's mean over the last
 * sample, less its resolution.
 */
export const loadSheddingPlugin = fp(
  async (app: FastifyInstance, options: LoadSheddingOptions) => {
    const histogram = monitorEventLoopDelay({ resolution: RESOLUTION_MS });
    histogram.enable();
    let lagMs = 0;
    const timer = setInterval(() => {
      const mean = histogram.mean / 1e6 - RESOLUTION_MS;
      // No sample in a whole interval: the loop did not turn at all, the worst lag there is.
      lagMs = Number.isNaN(mean) ? Infinity : Math.max(0, mean);
      histogram.reset();
    }, options.sampleIntervalMs ?? 1000);
    timer.unref();
    app.addHook('onClose', async () => {
      clearInterval(timer);
      histogram.disable();
    });
    app.addHook('onRequest', (request, reply, done) => {
      if (lagMs <= options.maxEventLoopDelayMs || NEVER_SHED.has(request.url)) return done();
      app.metrics.shed.inc();
      void reply
        .code(503)
        .header('Retry-After', '1')
        .send(errorBody('unavailable', 'The API is overloaded; retry shortly.'));
    });
  },
  { name: 'load-shedding', fastify: '5.x', dependencies: ['metrics'] },
);
