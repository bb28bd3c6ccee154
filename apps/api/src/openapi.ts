import type { SwaggerOptions, SwaggerTransform, SwaggerTransformObject } from '@fastify/swagger';
import { createJsonSchemaTransform, createJsonSchemaTransformObject } from 'fastify-type-provider-zod';
import { emptyBody, sessionEventTypes } from '@cq/contract';

/** The tags of the document, in the order a reader meets them. */
const openapiTags = [
  { name: 'tokens', description: 'One-time spawn tokens' },
  { name: 'sessions', description: "Spawning, reading, changing and stopping users' sessions" },
  { name: 'hosts', description: 'Worker hosts and their pools' },
  { name: 'events', description: 'Session events as server-sent events' },
  { name: 'output', description: "Sessions' output, as pages or server-sent events" },
  { name: 'webhooks', description: 'Session events POSTed to webhooks (Standard Webhooks)' },
  { name: 'session proxy', description: "A session's ports, reached through the API" },
  { name: 'inside a session', description: 'Commands, terminals and files inside a live session' },
  { name: 'access', description: 'The calling key' },
  { name: 'operations', description: 'Health and pointers, without a key' },
] as const;

type Tag = (typeof openapiTags)[number]['name'];

/**
 * Each documented route's operationId (stable: generated clients name their calls after it) and tag,
 * by `METHOD url` as Fastify has the route. A route missing here has neither (the OpenAPI test fails).
 */
export const openapiOperations: Readonly<Record<string, { operationId: string; tag: Tag }>> = {
  'GET /': { operationId: 'getRoot', tag: 'operations' },
  'GET /healthz': { operationId: 'getHealth', tag: 'operations' },
  'GET /readyz': { operationId: 'getReadiness', tag: 'operations' },
  'POST /v1/tokens': { operationId: 'issueToken', tag: 'tokens' },
  'POST /v1/spawn': { operationId: 'spawn', tag: 'sessions' },
  'GET /v1/sessions': { operationId: 'listSessions', tag: 'sessions' },
  'GET /v1/sessions/:sessionId': { operationId: 'getSessionById', tag: 'sessions' },
  'POST /v1/sessions/stop': { operationId: 'stopSessions', tag: 'sessions' },
  'GET /v1/users/:userId/session': { operationId: 'getUserSession', tag: 'sessions' },
  'PATCH /v1/users/:userId/session': { operationId: 'updateUserSession', tag: 'sessions' },
  'DELETE /v1/users/:userId/session': { operationId: 'stopUserSession', tag: 'sessions' },
  'POST /v1/users/:userId/session/activity': { operationId: 'recordActivity', tag: 'sessions' },
  'GET /v1/users/:userId/history': { operationId: 'getHistory', tag: 'sessions' },
  'GET /v1/hosts': { operationId: 'listHosts', tag: 'hosts' },
  'GET /v1/pools': { operationId: 'listPools', tag: 'hosts' },
  'POST /v1/hosts/:workerId/drain': { operationId: 'drainHost', tag: 'hosts' },
  'GET /v1/events': { operationId: 'streamEvents', tag: 'events' },
  'GET /v1/users/:userId/session/events': { operationId: 'streamUserEvents', tag: 'events' },
  'GET /v1/users/:userId/sessions/:sessionId/logs': { operationId: 'getLogs', tag: 'output' },
  'POST /v1/webhooks': { operationId: 'createWebhook', tag: 'webhooks' },
  'GET /v1/webhooks': { operationId: 'listWebhooks', tag: 'webhooks' },
  'DELETE /v1/webhooks/:id': { operationId: 'deleteWebhook', tag: 'webhooks' },
  'GET /v1/webhooks/:id/deliveries': { operationId: 'listDeliveries', tag: 'webhooks' },
  'POST /v1/sessions/:sessionId/connect': { operationId: 'connectSession', tag: 'session proxy' },
  'POST /v1/sessions/:sessionId/commands': { operationId: 'runCommand', tag: 'inside a session' },
  'GET /v1/sessions/:sessionId/exec': { operationId: 'openTerminal', tag: 'inside a session' },
  'GET /v1/sessions/:sessionId/files': { operationId: 'readFile', tag: 'inside a session' },
  'PUT /v1/sessions/:sessionId/files': { operationId: 'writeFile', tag: 'inside a session' },
  'GET /v1/whoami': { operationId: 'whoami', tag: 'access' },
};

type Json = Record<string, unknown>;

const ref = (id: string) => ({ $ref: `#/components/schemas/${id}` });

/** One event of an SSE answer: its `data` (one line of JSON) and, when it has one, what its `id` is. */
interface SseEvent {
  description: string;
  id?: string;
  data: { $ref: string };
}

const sessionEvents = (id?: string): Record<string, SseEvent> =>
  Object.fromEntries(
    sessionEventTypes.map((type) => [
      type,
      {
        description: `The session entered ${type}`,
        ...(id === undefined ? {} : { id }),
        data: ref('SessionEventData'),
      },
    ]),
  );

/**
 * The events of each `text/event-stream` answer, by operationId: documented as `x-sse-events` on that
 * media type (OpenAPI has no word for a stream's items before 3.2). Heartbeats are comments, not events.
 */
const sseEvents: Readonly<Record<string, Record<string, SseEvent>>> = {
  streamEvents: {
    ...sessionEvents('<ms>-<seq>-<slot>: send it back as Last-Event-ID to resume after it'),
    error: {
      description: 'events_expired: events after Last-Event-ID are no longer all kept; the stream goes on from now',
      data: ref('StreamErrorData'),
    },
  },
  streamUserEvents: sessionEvents('<ms>-<seq>-<slot>: send it back as Last-Event-ID to resume after it'),
  getLogs: {
    line: {
      description: 'A line of output, oldest first',
      id: 'The line id (<ms>-<seq>): send it back as Last-Event-ID to resume after it',
      data: ref('OutputLineData'),
    },
    end: {
      description: 'The session ended and every kept line was sent; the stream closes',
      data: ref('OutputEndData'),
    },
  },
};

/** What a webhook receives: every session event of its types, signed per Standard Webhooks. */
const webhooks = {
  sessionEvent: {
    post: {
      operationId: 'receiveSessionEvent',
      tags: ['webhooks'],
      summary: 'A session event, POSTed to each webhook subscribed to its type',
      description:
        "The body is the event's `data` as GET /v1/events sends it, byte for byte. webhook-signature is " +
        "`v1,<base64 of HMAC-SHA256 over '<webhook-id>.<webhook-timestamp>.<body>'>` keyed with the " +
        "webhook's secret (Standard Webhooks). Delivery is at least once, in no set order: deduplicate by webhook-id.",
      parameters: [
        {
          in: 'header',
          name: 'webhook-id',
          required: true,
          description: "The event's id in GET /v1/events (<ms>-<seq>-<slot>), the same on every attempt",
          schema: { type: 'string' },
        },
        {
          in: 'header',
          name: 'webhook-timestamp',
          required: true,
          description: 'When this attempt was made, epoch seconds',
          schema: { type: 'string', pattern: '^[0-9]+$' },
        },
        {
          in: 'header',
          name: 'webhook-signature',
          required: true,
          description: 'v1,<base64>: the signature of this attempt',
          schema: { type: 'string' },
        },
      ],
      requestBody: { required: true, content: { 'application/json': { schema: ref('SessionEventData') } } },
      responses: {
        '2XX': { description: 'Delivered: its headers came within 10 s (the body is ignored)' },
        default: {
          description: 'Any other status, or none within 10 s: the attempt failed and is retried (16 attempts)',
        },
      },
    },
  },
};

// @fastify/swagger's types describe the route's method loosely.
const methodsOf = (method: string | string[]): string[] => (Array.isArray(method) ? method : [method]);

const zodTransform = createJsonSchemaTransform({});

/**
 * The route's schema as the document shows it: zod made JSON Schema, with its operationId and tag. A
 * route that takes no body keeps refusing one with fields (its `emptyBody` still validates), but the
 * document declares none, so a generated client sends nothing.
 */
const transform: SwaggerTransform = (input) => {
  const schema = input.schema as (typeof input.schema & { body?: unknown }) | undefined;
  const documented =
    schema?.body === emptyBody
      ? { ...input, schema: Object.fromEntries(Object.entries(schema).filter(([key]) => key !== 'body')) }
      : input;
  const out = zodTransform(documented);
  if ((out.schema as { hide?: boolean } | undefined)?.hide === true) return out;
  const operation = methodsOf(input.route.method)
    .map((method) => openapiOperations[`${method} ${input.url}`])
    .find((found) => found !== undefined);
  if (operation === undefined) return out;
  return { ...out, schema: { ...out.schema, operationId: operation.operationId, tags: [operation.tag] } };
};

const zodTransformObject = createJsonSchemaTransformObject({});

/** Every `$ref` to a component schema in `value`, by name. */
function refsIn(value: unknown, found = new Set<string>()): Set<string> {
  if (Array.isArray(value)) for (const item of value) refsIn(item, found);
  else if (value !== null && typeof value === 'object')
    for (const [key, child] of Object.entries(value)) {
      if (key === '$ref' && typeof child === 'string' && child.startsWith('#/components/schemas/'))
        found.add(child.slice('#/components/schemas/'.length));
      else refsIn(child, found);
    }
  return found;
}

/** `value` with every component `$ref` renamed by `names`. */
function renameRefs(value: unknown, names: ReadonlyMap<string, string>): unknown {
  if (Array.isArray(value)) return value.map((item) => renameRefs(item, names));
  if (value === null || typeof value !== 'object') return value;
  return Object.fromEntries(
    Object.entries(value).map(([key, child]) => {
      if (key === '$ref' && typeof child === 'string' && child.startsWith('#/components/schemas/')) {
        const name = child.slice('#/components/schemas/'.length);
        return [key, `#/components/schemas/${names.get(name) ?? name}`];
      }
      return [key, renameRefs(child, names)];
    }),
  );
}

/**
 * Keeps the component schemas the document uses, under their contract names: the zod transform emits
 * every registered schema twice, as read (`<Name>Input`) and as written (`<Name>`), and a request body
 * refers to the first. Where only one of the two is used it is called `<Name>`.
 */
function tidyComponents(doc: Json): Json {
  const components = (doc.components ?? {}) as Json;
  const schemas = (components.schemas ?? {}) as Record<string, unknown>;
  const used = refsIn({ ...doc, components: { ...components, schemas: {} } });
  for (const pending = [...used]; pending.length > 0;)
    for (const name of refsIn(schemas[pending.pop()!]))
      if (!used.has(name)) {
        used.add(name);
        pending.push(name);
      }
  const names = new Map<string, string>();
  for (const name of used)
    if (
      name.endsWith('Input') &&
      !used.has(name.slice(0, -'Input'.length)) &&
      schemas[name.slice(0, -'Input'.length)] !== undefined
    )
      names.set(name, name.slice(0, -'Input'.length));
  const kept = Object.fromEntries(
    Object.keys(schemas)
      .filter((name) => used.has(name))
      .map((name) => [names.get(name) ?? name, schemas[name]] as const)
      .sort(([a], [b]) => a.localeCompare(b)),
  );
  return renameRefs({ ...doc, components: { ...components, schemas: kept } }, names) as Json;
}

/** The document as a whole: component schemas, the SSE answers' events, the webhooks, the tags. */
const transformObject: SwaggerTransformObject = (documentObject) => {
  const doc = structuredClone(zodTransformObject(documentObject)) as Json;
  for (const methods of Object.values((doc.paths ?? {}) as Record<string, Record<string, Json>>))
    for (const operation of Object.values(methods)) {
      const events = sseEvents[operation.operationId as string];
      const responses = operation.responses as Record<string, { content?: Record<string, Json> }> | undefined;
      const stream = responses?.['200']?.content?.['text/event-stream'];
      if (events !== undefined && stream !== undefined) stream['x-sse-events'] = events;
    }
  return tidyComponents({ ...doc, tags: openapiTags, webhooks }) as ReturnType<SwaggerTransformObject>;
};

/** The options of @fastify/swagger: the document served at `/openapi.json`. */
export const openapiOptions: SwaggerOptions = {
  openapi: {
    openapi: '3.1.0',
    info: {
      title: 'worker-coordinator API',
      version: '1.0.0',
      description: 'Hands out worker sessions to users, one at a time per user.',
    },
    components: { securitySchemes: { serviceKey: { type: 'http', scheme: 'bearer' } } },
  },
  transform,
  transformObject,
};
