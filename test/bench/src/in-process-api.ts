// Child process of the HTTP benchmark: the API as the benchmark built it before it measured main.js
// (the secondary row): `buildApp` with the sweep and Node's default metrics off and a silent logger,
// the rest of its configuration the defaults (with the environment's REDIS_URL and API_KEYS).
// Prints one JSON line {"url"} once it listens.
import { buildApp, loadApiConfig } from '@cq/api';
import { createLogger } from '@cq/service-kit';

const config = loadApiConfig({ ...process.env, LOG_LEVEL: 'silent', PORT: '0' });
const api = await buildApp({
  config,
  logger: createLogger({ level: 'silent', name: 'bench-api' }),
  sweep: false,
  defaultMetrics: false,
});
await api.listen({ host: '127.0.0.1', port: 0 });
const { port } = api.server.address() as { port: number };
process.stdout.write(`${JSON.stringify({ url: `http://127.0.0.1:${port}` })}\n`);
process.on('SIGTERM', () => {
  void api.close().then(() => process.exit(0));
});
