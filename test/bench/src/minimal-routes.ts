// Child process of the HTTP benchmark: the limit, a process of its own beside the API's. A bare Fastify
// route answering {}, and minimal Fastify + ioredis routes doing the same work as our spawn and token
// paths: one EVALSHA of the same Lua script per request. The API's configuration (its defaults, with
// the environment's REDIS_URL and API_KEYS) gives the key prefix and the policy. Prints one JSON line
// {"url"} once it listens.
import { createHash, randomBytes, randomUUID, timingSafeEqual } from 'node:crypto';
import { loadApiConfig } from '@cq/api';
import { DEFAULT_POOL, Keys, loadScripts, lossGuardArgs } from '@cq/coordinator';
import Fastify from 'fastify';
import { Redis } from 'ioredis';

const config = loadApiConfig(process.env);
const redisUrl = config.redisUrl;
const apiKey = config.apiKeys[0]!;

const bare = Fastify({ logger: false, bodyLimit: 64 * 1024 });
bare.post('/bare', async () => ({}));

// The limit: the same work as our paths, done minimally. Spawn: parse the JSON body, check the token's
// form, SHA-256 its secret, build the user's keys, one EVALSHA of our admit script, answer its JSON.
// Tokens: parse the body, check the user id, 32 random bytes, SHA-256, one EVALSHA of issueToken, 201.
// The arguments are the scripts' own (see their headers in lua/): a script that takes one more answers an error.
const scriptRedis = new Redis(redisUrl);
const scripts = loadScripts();
const shaOf = async (name: string): Promise<string> =>
  (await scriptRedis.script('LOAD', scripts.get(name as never)!.lua)) as string;
const admitSha = await shaOf('admit');
const issueSha = await shaOf('issueToken');
const keys = new Keys(config.keyPrefix);
const TOKEN = /^v1\.([A-Za-z0-9_-]{1,172})\.([A-Za-z0-9_-]{43})$/;
const USER = /^[A-Za-z0-9._:@-]{1,128}$/;
const { policy } = config;
bare.post('/minimal/spawn', async (request, reply) => {
  const match = TOKEN.exec(String((request.body as { token?: unknown } | undefined)?.token));
  const userId = match === null ? '' : Buffer.from(match[1]!, 'base64url').toString('utf8');
  if (match === null || !USER.test(userId))
    return reply.code(403).send({ error: { code: 'token_invalid', message: 'The token is unknown.' } });
  const digest = createHash('sha256').update(match[2]!).digest('hex');
  const user = keys.user(userId);
  const sessionId = randomUUID();
  const answer = (await scriptRedis.evalsha(
    admitSha,
    13,
    keys.token(userId, digest),
    user.session,
    user.fence,
    user.spawnThrottle,
    user.lease,
    user.history,
    user.liveIndex,
    user.ended,
    keys.cancelledAdmission(userId, sessionId),
    user.events,
    user.guard,
    user.ids,
    user.listed,
    sessionId,
    userId,
    policy.spawnIntervalMs,
    policy.spawnBurst,
    policy.maxLifetimeMs,
    policy.pendingTimeoutMs,
    policy.historyLength,
    ...lossGuardArgs,
    keys.eventChannel(),
  )) as unknown[];
  // (An admission in a slot not yet in the session list's directory answers -19, here a 403: our route enters
  // the slot and asks again. The benchmark's spawn paths are refusals, answered before that check.)
  switch (Number(answer[0])) {
    case -2:
      return reply.code(409).send({ error: { code: 'session_exists', message: 'Live.', sessionId: answer[1] } });
    case -3:
      return reply
        .code(429)
        .header('Retry-After', String(Math.ceil(Number(answer[3]) / 1000)))
        .send({ error: { code: 'throttled', message: 'Later.', retryAfterMs: answer[3] } });
    case 1:
      return reply.code(202).send({ sessionId, userId, fence: answer[1], state: 'pending', lifetimeMs: answer[2] });
    default:
      return reply.code(403).send({ error: { code: 'token_invalid', message: 'The token is unknown.' } });
  }
});
const keyDigest = createHash('sha256').update(apiKey).digest();
bare.post('/minimal/tokens', async (request, reply) => {
  // The service key, checked as ours is: SHA-256, then a constant-time comparison.
  const presented = /^Bearer (\S+)$/.exec(request.headers.authorization ?? '')?.[1] ?? '';
  if (!timingSafeEqual(createHash('sha256').update(presented).digest(), keyDigest))
    return reply.code(401).send({ error: { code: 'unauthorized', message: 'key' } });
  const userId = String((request.body as { userId?: unknown } | undefined)?.userId);
  if (!USER.test(userId)) return reply.code(400).send({ error: { code: 'invalid_request', message: 'userId' } });
  const secret = randomBytes(32).toString('base64url');
  const digest = createHash('sha256').update(secret).digest('hex');
  const user = keys.user(userId);
  const answer = (await scriptRedis.evalsha(
    issueSha,
    3,
    keys.token(userId, digest),
    user.tokenRate,
    user.guard,
    policy.tokenTtlMs,
    '',
    '{}',
    policy.tokenLimit,
    policy.tokenWindowMs,
    policy.idleTimeoutMs,
    '{}',
    DEFAULT_POOL,
    ...lossGuardArgs,
  )) as unknown[];
  if (Number(answer[0]) !== 1) return reply.code(429).send({ error: { code: 'throttled', message: 'Later.' } });
  return reply.code(201).send({
    token: `v1.${Buffer.from(userId).toString('base64url')}.${secret}`,
    userId,
    expiresAt: new Date(Number(answer[1])).toISOString(),
  });
});
await bare.listen({ host: '127.0.0.1', port: 0 });

const { port } = bare.server.address() as { port: number };
process.stdout.write(`${JSON.stringify({ url: `http://127.0.0.1:${port}` })}\n`);
process.on('SIGTERM', () => {
  void bare.close().then(() => {
    scriptRedis.disconnect();
    process.exit(0);
  });
});
