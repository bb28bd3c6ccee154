// Child process of the HTTP benchmark: the real API (buildApp) and a bare Fastify route answering {}
// side by side, in the same kind of process. Prints one JSON line with their URLs and test tokens.
import { buildApp, loadApiConfig } from '@cq/api';
import { Coordinator } from '@cq/coordinator';
import { createLogger } from '@cq/service-kit';
import Fastify from 'fastify';
import { Redis } from 'ioredis';

const redisUrl = process.env['REDIS_URL']!;
const keyPrefix = 'benchhttp';
const config = loadApiConfig({
  REDIS_URL: redisUrl,
  KEY_PREFIX: keyPrefix,
  API_KEYS: 'bench-key-0123456789abcdef',
  TOKEN_LIMIT: '1000000',
  SPAWN_INTERVAL_MS: '3600000',
  LOG_LEVEL: 'silent',
  PORT: '0',
  // The benchmark measures the Redis-backed 403 path, not the per-address guard that blocks a guesser.
  SPAWN_FAILURE_LIMIT: '1000000000',
});
const api = await buildApp({
  config,
  logger: createLogger({ level: 'silent', name: 'bench-api' }),
  sweep: false,
  defaultMetrics: false,
});
await api.listen({ host: '127.0.0.1', port: 0 });

const bare = Fastify({ logger: false, bodyLimit: 64 * 1024 });
bare.post('/bare', async () => ({}));
await bare.listen({ host: '127.0.0.1', port: 0 });

// A user whose spawn throttle is closed and who has no live session: every spawn with this token is 429.
const redis = new Redis(redisUrl);
const coordinator = new Coordinator({ redis, keyPrefix, policy: config.policy });
const first = await coordinator.tokens.issue('throttled-user');
const second = await coordinator.tokens.issue('throttled-user');
if (first.outcome !== 'issued' || second.outcome !== 'issued') throw new Error('could not issue bench tokens');
await coordinator.sessions.admit(first.token);
await coordinator.sessions.requestStop('throttled-user');
redis.disconnect();

const url = (server: { server: { address(): unknown } }): string =>
  `http://127.0.0.1:${(server.server.address() as { port: number }).port}`;
process.stdout.write(
  `${JSON.stringify({ apiUrl: url(api), bareUrl: url(bare), throttledToken: second.token, apiKey: 'bench-key-0123456789abcdef' })}\n`,
);
process.on('SIGTERM', () => {
  void Promise.all([api.close(), bare.close()]).then(() => process.exit(0));
});
