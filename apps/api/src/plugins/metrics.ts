import type { FastifyInstance } from 'fastify';
import fp from 'fastify-plugin';
import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';
import { RedisGauges } from '../redis-gauges.js';

/** The API's Prometheus metrics, on a registry of the app's own. */
export interface ApiMetrics {
  readonly registry: Registry;
  readonly admissions: Counter<'outcome' | 'pool'>;
  readonly tokensIssued: Counter;
  readonly throttled: Counter<'route'>;
  /** Requests answered 503 because the process was overloaded (event loop lag). */
  readonly shed: Counter;
  readonly redisErrors: Counter<'operation'>;
  readonly replicaWaitShortfalls: Counter<'script'>;
  readonly requestDuration: Histogram<'method' | 'route' | 'status'>;
  /**
   * The reads of Redis behind every Redis-backed gauge, run together at most once per interval however
   * often `/metrics` is scraped: a plugin whose gauge lives in Redis adds its read here.
   */
  readonly redisGauges: RedisGauges;
  /** Worker slots by pool: `free` (what admission may still hold), `total` and `held`; read through `redisGauges`. */
  readonly slots: Gauge<'pool' | 'kind'>;
  /** Live worker hosts by state; read through `redisGauges`. */
  readonly hosts: Gauge<'state'>;
  /** Readers of this process's event streams (SSE); set at each scrape. */
  readonly eventReaders: Gauge;
}

declare module 'fastify' {
  interface FastifyInstance {
    metrics: ApiMetrics;
  }
}

/** Options of {@link metricsPlugin}. */
export interface MetricsPluginOptions {
  /** Collect Node's default process metrics. @defaultValue true */
  defaultMetrics?: boolean;
  /** Least time between two reads of Redis for the gauges, ms. @defaultValue `METRICS_READ_EVERY_MS` (5000) */
  redisReadEveryMs?: number;
}

/** Registers the metrics and times every request by route template (never by raw URL). */
export const metricsPlugin = fp(
  async (app: FastifyInstance, options: MetricsPluginOptions) => {
    const registry = new Registry();
    if (options.defaultMetrics !== false) collectDefaultMetrics({ register: registry });
    const metrics: ApiMetrics = {
      registry,
      redisGauges: new RedisGauges({
        ...(options.redisReadEveryMs === undefined ? {} : { everyMs: options.redisReadEveryMs }),
        onError: (gauges, err) =>
          app.log.debug({ err, gauges }, 'a metrics read of Redis failed; its gauges keep their last values'),
      }),
      admissions: new Counter({
        name: 'cq_admissions_total',
        help: "Spawn admissions by outcome and pool (pool empty where the refusal came before the token's pool was known)",
        labelNames: ['outcome', 'pool'],
        registers: [registry],
      }),
      tokensIssued: new Counter({ name: 'cq_tokens_issued_total', help: 'Spawn tokens issued', registers: [registry] }),
      throttled: new Counter({
        name: 'cq_throttled_total',
        help: 'Requests answered 429, by route',
        labelNames: ['route'],
        registers: [registry],
      }),
      shed: new Counter({
        name: 'cq_shed_total',
        help: 'Requests answered 503 because the event loop lagged more than MAX_EVENT_LOOP_DELAY_MS',
        registers: [registry],
      }),
      redisErrors: new Counter({
        name: 'cq_redis_errors_total',
        help: 'Requests that failed because Redis was unavailable',
        labelNames: ['operation'],
        registers: [registry],
      }),
      replicaWaitShortfalls: new Counter({
        name: 'cq_replica_wait_shortfalls_total',
        help: 'Coordinator writes that fewer than REDIS_WAIT_REPLICAS replicas acknowledged in time',
        labelNames: ['script'],
        registers: [registry],
      }),
      requestDuration: new Histogram({
        name: 'cq_http_request_duration_seconds',
        help: 'HTTP request latency',
        labelNames: ['method', 'route', 'status'],
        buckets: [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5],
        registers: [registry],
      }),
      slots: new Gauge({
        name: 'cq_worker_slots',
        help: "Worker slots by pool: free (live, not draining hosts' SLOTS less the sessions admitted and not ended), total, held",
        labelNames: ['pool', 'kind'],
        registers: [registry],
      }),
      hosts: new Gauge({
        name: 'cq_worker_hosts',
        help: 'Live worker hosts by state',
        labelNames: ['state'],
        registers: [registry],
      }),
      eventReaders: new Gauge({
        name: 'cq_event_readers',
        help: "Readers of this API process's event streams (SSE); they share one subscription to Redis",
        registers: [registry],
        collect() {
          if (app.hasDecorator('events')) this.set(app.events.subscribers);
        },
      }),
    };
    app.decorate('metrics', metrics);
    // One labelled child per method, route and status, looked up by a string key: prom-client would
    // otherwise hash the label object on every request.
    const timers = new Map<string, { observe(seconds: number): void }>();
    app.addHook('onResponse', (request, reply, done) => {
      const route = request.routeOptions.url ?? 'unmatched';
      const key = `${request.method} ${reply.statusCode} ${route}`;
      let timer = timers.get(key);
      if (timer === undefined) {
        timer = metrics.requestDuration.labels(request.method, route, String(reply.statusCode));
        timers.set(key, timer);
      }
      timer.observe(reply.elapsedTime / 1000);
      done();
    });
  },
  { name: 'metrics', fastify: '5.x' },
);
