import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type IncomingHttpHeaders } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { createConfig, lintFromString } from '@redocly/openapi-core';
import { sessionEventTypes } from '@cq/contract';
import { cleanUp, until } from '@cq/test-harness';
import openapiTS, { astToString } from 'openapi-typescript';
import ts from 'typescript';
import { describe, expect, it } from 'vitest';
import { openapiOperations } from './openapi.js';
import { TEST_API_KEY, jsonHeaders, send, startTestApi } from './test-support/app.js';

// eslint-disable-next-line @typescript-eslint/no-explicit-any -- the OpenAPI document, read field by field
type Json = any;

const METHODS = ['get', 'put', 'post', 'delete', 'options', 'head', 'patch', 'trace'];

/** Every operation of a `paths` (or `webhooks`) object, as `METHOD path`. */
function operationsOf(paths: Record<string, Json>): Array<{ where: string; operation: Json }> {
  return Object.entries(paths).flatMap(([path, item]) =>
    METHODS.filter((method) => item[method] !== undefined).map((method) => ({
      where: `${method.toUpperCase()} ${path}`,
      operation: item[method],
    })),
  );
}

/** The component schema names `value` refers to. */
function refsIn(value: unknown, found = new Set<string>()): Set<string> {
  if (Array.isArray(value)) for (const item of value) refsIn(item, found);
  else if (value !== null && typeof value === 'object')
    for (const [key, child] of Object.entries(value))
      if (key === '$ref' && typeof child === 'string') found.add(child.replace('#/components/schemas/', ''));
      else refsIn(child, found);
  return found;
}

/** Checks a JSON value against an object schema of the document: its required fields, no others, enums kept. */
function expectConforms(value: Record<string, unknown>, schema: Json, what: string): void {
  const properties = schema.properties as Record<string, Json>;
  expect(
    Object.keys(value).filter((key) => properties[key] === undefined),
    what,
  ).toEqual([]);
  for (const key of schema.required as string[]) expect(value, what).toHaveProperty(key);
  for (const [key, field] of Object.entries(value))
    if (properties[key].enum !== undefined) expect(properties[key].enum, `${what}.${key}`).toContain(field);
}

/**
 * The calls a generated client makes: every operation of the document through openapi-fetch, typed by
 * openapi-typescript's `paths`. Compiled against them (any type error fails the test), then run against
 * the API. `refusedByTheTypes` is never run: each of its calls must be a type error.
 */
const CALLS = `import createClient from 'openapi-fetch';
import type { paths } from './api.js';

type Client = ReturnType<typeof createClient<paths>>;

/** The status of an answer, and its error code when it is an error. */
function outcome(result: { response: Response; error?: { error: { code: string } } }): string {
  return result.error === undefined ? String(result.response.status) : \`\${result.response.status} \${result.error.error.code}\`;
}

export async function callEveryOperation(baseUrl: string, apiKey: string, workerId: string, webhookUrl: string): Promise<Record<string, string>> {
  const client: Client = createClient<paths>({ baseUrl, headers: { authorization: \`Bearer \${apiKey}\` } });
  const out: Record<string, string> = {};
  const userId = 'openapi-fetch';
  const user = { path: { userId } };

  out.getRoot = outcome(await client.GET('/'));
  out.getHealth = outcome(await client.GET('/healthz'));
  out.getReadiness = outcome(await client.GET('/readyz'));
  const me = await client.GET('/v1/whoami');
  out.whoami = outcome(me);
  const scopes: string[] | undefined = me.data?.scopes;

  const issued = await client.POST('/v1/tokens', { body: { userId, lifetimeMs: 60_000, labels: { stage: 'a' } } });
  out.issueToken = outcome(issued);
  if (issued.data === undefined) throw new Error('no token issued');
  const admitted = await client.POST('/v1/spawn', { body: { token: issued.data.token } });
  out.spawn = outcome(admitted);
  if (admitted.data === undefined) throw new Error('not admitted');
  const sessionId: string = admitted.data.sessionId;

  const live = await client.GET('/v1/users/{userId}/session', { params: user });
  out.getUserSession = outcome(live);
  const state: 'pending' | 'running' | 'stopping' | undefined = live.data?.state;
  const changed = await client.PATCH('/v1/users/{userId}/session', { params: { ...user, query: { sessionId } }, body: { labels: { stage: 'b', gone: null } } });
  out.updateUserSession = outcome(changed);
  out.recordActivity = outcome(await client.POST('/v1/users/{userId}/session/activity', { params: { ...user, query: { sessionId } } }));
  const page = await client.GET('/v1/sessions', { params: { query: { userId, label: 'stage=b', limit: 10 } } });
  out.listSessions = outcome(page);
  const listed: string[] = (page.data?.sessions ?? []).map((session) => session.sessionId);
  out.getSessionById = outcome(await client.GET('/v1/sessions/{sessionId}', { params: { path: { sessionId } } }));
  const connected = await client.POST('/v1/sessions/{sessionId}/connect', { params: { path: { sessionId } }, body: { port: 8080 } });
  out.connectSession = outcome(connected);
  const connectUrl: string | undefined = connected.data?.url;
  const ran = await client.POST('/v1/sessions/{sessionId}/commands', { params: { path: { sessionId } }, body: { argv: ['true'], stdin: '', timeoutMs: 1000 } });
  out.runCommand = outcome(ran);
  const exitCode: number | undefined = ran.data?.exitCode;
  if (exitCode !== undefined) throw new Error('a command ran without a session proxy');
  out.readFile = outcome(await client.GET('/v1/sessions/{sessionId}/files', { params: { path: { sessionId }, query: { path: '/tmp/x' } }, parseAs: 'stream' }));
  out.openTerminal = outcome(await client.GET('/v1/sessions/{sessionId}/exec', { params: { path: { sessionId }, query: { argv: '["sh"]', tty: 'true', cols: 80, rows: 24 } } }));
  out.writeFile = outcome(await client.PUT('/v1/sessions/{sessionId}/files', { params: { path: { sessionId }, query: { path: '/tmp/x' } } }));
  out.getLogs = outcome(await client.GET('/v1/users/{userId}/sessions/{sessionId}/logs', { params: { path: { userId, sessionId }, query: { limit: 10 } } }));
  const userEvents = await client.GET('/v1/users/{userId}/session/events', { params: user, parseAs: 'stream' });
  out.streamUserEvents = outcome(userEvents);
  await userEvents.data?.cancel();
  const events = await client.GET('/v1/events', { parseAs: 'stream' });
  out.streamEvents = outcome(events);
  await events.data?.cancel();

  // The bodyless calls, without a body.
  const stopped = await client.DELETE('/v1/users/{userId}/session', { params: user });
  out.stopUserSession = outcome(stopped);
  const ended: 'stopping' | 'stopped' | undefined = stopped.data?.state;
  const history = await client.GET('/v1/users/{userId}/history', { params: user });
  out.getHistory = outcome(history);
  out.stopSessions = outcome(await client.POST('/v1/sessions/stop', { body: { userId } }));

  out.listHosts = outcome(await client.GET('/v1/hosts', { params: { query: { pool: 'default' } } }));
  out.listPools = outcome(await client.GET('/v1/pools'));
  const drained = await client.POST('/v1/hosts/{workerId}/drain', { params: { path: { workerId } } });
  out.drainHost = outcome(drained);
  const containment: 'namespace' | 'group' | undefined = drained.data?.containment;
  const network: 'none' | 'egress' | 'host' | undefined = drained.data?.isolation.network;
  const cpus: number | null | undefined = drained.data?.isolation.cpus;

  const hook = await client.POST('/v1/webhooks', { body: { url: webhookUrl, events: ['withdrawn'] } });
  out.createWebhook = outcome(hook);
  if (hook.data === undefined) throw new Error('no webhook created');
  const { id, secret } = hook.data;
  out.listWebhooks = outcome(await client.GET('/v1/webhooks'));
  out.listDeliveries = outcome(await client.GET('/v1/webhooks/{id}/deliveries', { params: { path: { id } } }));
  out.deleteWebhook = outcome(await client.DELETE('/v1/webhooks/{id}', { params: { path: { id } } }));

  void [scopes, state, listed, ended, containment, network, cpus, secret, connectUrl];
  return out;
}

export function refusedByTheTypes(client: Client): void {
  // @ts-expect-error -- DELETE session takes no body
  void client.DELETE('/v1/users/{userId}/session', { params: { path: { userId: 'u' } }, body: {} });
  // @ts-expect-error -- activity takes no body, not even null
  void client.POST('/v1/users/{userId}/session/activity', { params: { path: { userId: 'u' } }, body: null });
  // @ts-expect-error -- drain takes no body
  void client.POST('/v1/hosts/{workerId}/drain', { params: { path: { workerId: 'w' } }, body: {} });
  // @ts-expect-error -- DELETE webhook takes no body
  void client.DELETE('/v1/webhooks/{id}', { params: { path: { id: 'wh_0' } }, body: {} });
  // @ts-expect-error -- a token needs its userId
  void client.POST('/v1/tokens', { body: { ttlMs: 1000 } });
  // @ts-expect-error -- a token is a string
  void client.POST('/v1/spawn', { body: { token: 5 } });
  // @ts-expect-error -- the path needs its userId
  void client.GET('/v1/users/{userId}/session', {});
  // @ts-expect-error -- no such route
  void client.GET('/v1/nowhere');
}
`;

describe('the OpenAPI document, as a code generator reads it', async () => {
  const api = await startTestApi({
    WEBHOOK_ALLOW_PRIVATE: 'true',
    TOKEN_LIMIT: '1000',
    SPAWN_INTERVAL_MS: '1',
    SPAWN_BURST: '100',
  });
  const doc: Json = (await send(api.baseUrl, 'GET', '/openapi.json')).body;
  const operations = operationsOf(doc.paths);
  const operation = (where: string): Json => operations.find((o) => o.where === where)?.operation;
  const component = (ref: string): Json => doc.components.schemas[ref.replace('#/components/schemas/', '')];
  const sseEvents = (path: string): Record<string, Json> =>
    doc.paths[path].get.responses['200'].content['text/event-stream']['x-sse-events'];

  it('every operation has a unique operationId and a tag the document defines; the hidden routes stay out', () => {
    expect(doc.openapi).toBe('3.1.0');
    const all = [...operations, ...operationsOf(doc.webhooks)];
    const tags = (doc.tags as Array<{ name: string }>).map((tag) => tag.name);
    for (const { where, operation } of all) {
      expect(operation.operationId, where).toMatch(/^[a-z][A-Za-z]*$/);
      expect(operation.tags, where).toHaveLength(1);
      expect(tags, where).toContain(operation.tags[0]);
    }
    const ids = all.map((o) => o.operation.operationId as string);
    expect(new Set(ids).size).toBe(ids.length);
    // The table of ids names exactly the documented routes.
    expect(operations.map((o) => o.operation.operationId).sort()).toEqual(
      Object.values(openapiOperations)
        .map((o) => o.operationId)
        .sort(),
    );
    // Documented: every /v1 route, /, /healthz and /readyz; nothing else (/metrics, /openapi.json, the dashboard,
    // and the session proxy's /ports/ pass-through, whose query and body are the session's: docs/http-api.md).
    const documented = (url: string) =>
      (url.startsWith('/v1/') && !url.includes('/ports/')) || ['/', '/healthz', '/readyz'].includes(url);
    const routes = api.app.routeTable.filter((r) => r.method !== 'HEAD');
    expect(operations.map((o) => o.where).sort()).toEqual(
      routes
        .filter((r) => documented(r.url))
        .map((r) => `${r.method} ${r.url.replace(/:(\w+)/g, '{$1}')}`)
        .sort(),
    );
    expect(routes.filter((r) => !documented(r.url)).map((r) => r.url)).toEqual(
      expect.arrayContaining(['/metrics', '/openapi.json', '/dashboard']),
    );
  });

  it('request bodies and JSON answers are named component schemas; every reference resolves, every component is used', () => {
    for (const { where, operation } of operations.filter((o) => o.where.includes(' /v1/'))) {
      const body = operation.requestBody?.content['application/json'].schema;
      if (body !== undefined) expect(body, where).toEqual({ $ref: expect.stringMatching(/^#\/components\/schemas\//) });
      for (const [status, answer] of Object.entries(operation.responses as Record<string, Json>)) {
        const schema = answer.content?.['application/json']?.schema;
        if (schema !== undefined)
          expect(schema, `${where} ${status}`).toEqual({ $ref: expect.stringMatching(/^#\/components\/schemas\//) });
      }
    }
    expect(operation('POST /v1/tokens').requestBody.content['application/json'].schema.$ref).toBe(
      '#/components/schemas/IssueTokenRequest',
    );
    expect(operation('POST /v1/tokens').responses['201'].content['application/json'].schema.$ref).toBe(
      '#/components/schemas/IssuedToken',
    );
    expect(operation('GET /v1/sessions').responses['400'].content['application/json'].schema.$ref).toBe(
      '#/components/schemas/ErrorBody',
    );

    const names = Object.keys(doc.components.schemas);
    for (const name of refsIn(doc)) expect(names, `$ref ${name}`).toContain(name);
    // Used: referred to from outside components.schemas, or by a schema that is.
    const used = refsIn({ ...doc, components: {} });
    for (const name of [...used]) for (const inner of refsIn(doc.components.schemas[name])) used.add(inner);
    expect(names.sort()).toEqual([...used].sort());
    expect(names.filter((name) => name.endsWith('Input'))).toEqual([]);
  });

  it('the four routes that take no body declare none, the 204s have no content, and a body with a field is still refused', async () => {
    const bodyless = [
      'DELETE /v1/users/{userId}/session',
      'POST /v1/users/{userId}/session/activity',
      'POST /v1/hosts/{workerId}/drain',
      'DELETE /v1/webhooks/{id}',
    ];
    for (const where of bodyless) {
      expect(operation(where), where).toBeDefined();
      expect(operation(where).requestBody, where).toBeUndefined();
    }
    const noContent = operations.filter((o) => o.operation.responses['204'] !== undefined);
    expect(noContent.map((o) => o.where).sort()).toEqual([
      'DELETE /v1/webhooks/{id}',
      'POST /v1/users/{userId}/session/activity',
      'PUT /v1/sessions/{sessionId}/files',
    ]);
    for (const { where, operation } of noContent) expect(operation.responses['204'].content, where).toBeUndefined();

    for (const where of bodyless) {
      const [method, path] = where.split(' ') as [string, string];
      const concrete = path
        .replace('{userId}', 'nobody')
        .replace('{workerId}', 'no-host')
        .replace('{id}', 'wh_000000000000000000000000');
      const refused = await send(api.baseUrl, method, concrete, { body: '{"extra": 1}', headers: jsonHeaders() });
      expect(refused.status, where).toBe(400);
      expect(refused.body.error.message, where).toBe('Unknown field "extra" in body.');
    }
  });

  it('the event streams name each event and the schema of its data, as the streams send them', async () => {
    for (const { where, operation } of operations) {
      const stream = operation.responses['200']?.content?.['text/event-stream'];
      if (stream === undefined) continue;
      const events = Object.values(stream['x-sse-events'] as Record<string, Json>);
      expect(events.length, where).toBeGreaterThan(0);
      for (const event of events) expect(component(event.data.$ref), where).toBeDefined();
    }
    expect(Object.keys(sseEvents('/v1/events'))).toEqual([...sessionEventTypes, 'error']);
    expect(sseEvents('/v1/events').error.data.$ref).toBe('#/components/schemas/StreamErrorData');
    expect(Object.keys(sseEvents('/v1/users/{userId}/session/events'))).toEqual([...sessionEventTypes]);
    for (const type of sessionEventTypes)
      expect(sseEvents('/v1/users/{userId}/session/events')[type].data.$ref).toBe(
        '#/components/schemas/SessionEventData',
      );
    const logs = sseEvents('/v1/users/{userId}/sessions/{sessionId}/logs');
    expect([logs.line.data.$ref, logs.end.data.$ref]).toEqual([
      '#/components/schemas/OutputLineData',
      '#/components/schemas/OutputEndData',
    ]);

    // What the streams send fits: the event's name, its id when the document says it has one, its data.
    const everyone = await openStream('/v1/events');
    await api.client.spawn((await api.client.issueToken({ userId: 'sse-doc' })).token);
    const users = await openStream('/v1/users/sse-doc/session/events');
    for (const [path, stream] of [
      ['/v1/events', everyone],
      ['/v1/users/{userId}/session/events', users],
    ] as const) {
      const event = await stream.next();
      const described = sseEvents(path)[event.event];
      expect(described, `${path}: ${event.event}`).toBeDefined();
      expect(event.id !== undefined, `${path}: the event has an id`).toBe(described.id !== undefined);
      expectConforms(JSON.parse(event.data), component(described.data.$ref), path);
    }
  });

  it('a webhook receives what the document says: its Standard Webhooks headers, and a body of SessionEventData', async () => {
    const webhook = doc.webhooks.sessionEvent.post;
    expect(webhook.requestBody.content['application/json'].schema.$ref).toBe('#/components/schemas/SessionEventData');
    const headers = (webhook.parameters as Json[]).filter((p) => p.in === 'header');
    expect(headers.map((p) => [p.name, p.required])).toEqual([
      ['webhook-id', true],
      ['webhook-timestamp', true],
      ['webhook-signature', true],
    ]);

    const received: Array<{ headers: IncomingHttpHeaders; body: string }> = [];
    const server = createServer((request, response) => {
      let body = '';
      request.setEncoding('utf8');
      request.on('data', (chunk: string) => (body += chunk));
      request.on('end', () => {
        received.push({ headers: request.headers, body });
        response.end();
      });
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    cleanUp(() => new Promise<void>((resolve) => server.close(() => resolve())));
    const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/hook`;
    const hook = await send(api.baseUrl, 'POST', '/v1/webhooks', {
      body: JSON.stringify({ url, events: ['pending'] }),
      headers: jsonHeaders(),
    });
    expect(hook.status).toBe(201);
    await api.client.spawn((await api.client.issueToken({ userId: 'hook-doc' })).token);
    await until(() => received.length > 0, 15_000, 'the delivery');
    expect((await send(api.baseUrl, 'DELETE', `/v1/webhooks/${hook.body.id}`, { headers: jsonHeaders() })).status).toBe(
      204,
    );
    const [delivery] = received;
    for (const header of headers) expect(delivery!.headers, header.name).toHaveProperty(header.name);
    expect(delivery!.headers['webhook-timestamp']).toMatch(new RegExp(headers[1].schema.pattern));
    expectConforms(
      JSON.parse(delivery!.body),
      component(webhook.requestBody.content['application/json'].schema.$ref),
      'body',
    );
  });

  it("is valid OpenAPI 3.1 (Redocly's structural rules, references, operationIds, tags and path parameters)", async () => {
    const config = await createConfig({
      extends: [],
      rules: {
        struct: 'error',
        'no-unresolved-refs': 'error',
        'operation-operationId': 'error',
        'operation-operationId-unique': 'error',
        'operation-operationId-url-safe': 'error',
        'operation-tag-defined': 'error',
        'operation-parameters-unique': 'error',
        'path-parameters-defined': 'error',
        'no-identical-paths': 'error',
        'operation-2xx-response': 'error',
      },
    });
    const problems = await lintFromString({ source: JSON.stringify(doc), absoluteRef: 'openapi.json', config });
    // A WebSocket's answer is 101 Switching Protocols: the one operation with no 2XX, and rightly so.
    const webSocket = '#/paths/~1v1~1sessions~1{sessionId}~1exec/get/responses';
    expect(doc.paths['/v1/sessions/{sessionId}/exec'].get.responses['101']).toBeDefined();
    expect(
      problems
        .map((p) => `${p.ruleId}: ${p.message} (${p.location[0]?.pointer})`)
        .filter((p) => !(p.startsWith('operation-2xx-response') && p.endsWith(`(${webSocket})`))),
    ).toEqual([]);
  });

  it('openapi-typescript makes types under which openapi-fetch calls every operation, compiling cleanly, and the calls work', async () => {
    // Inside node_modules, so the generated file resolves openapi-fetch as any package of the repo would.
    const cache = fileURLToPath(new URL('../node_modules/.cache', import.meta.url));
    mkdirSync(cache, { recursive: true });
    const dir = mkdtempSync(join(cache, 'openapi-client-'));
    cleanUp(() => rmSync(dir, { recursive: true, force: true }));
    writeFileSync(join(dir, 'package.json'), JSON.stringify({ type: 'module' }));
    writeFileSync(join(dir, 'api.ts'), astToString(await openapiTS(structuredClone(doc))));
    writeFileSync(join(dir, 'calls.ts'), CALLS);

    const program = ts.createProgram([join(dir, 'api.ts'), join(dir, 'calls.ts')], {
      strict: true,
      noUncheckedIndexedAccess: true,
      exactOptionalPropertyTypes: true,
      noUnusedLocals: true,
      target: ts.ScriptTarget.ES2022,
      module: ts.ModuleKind.NodeNext,
      moduleResolution: ts.ModuleResolutionKind.NodeNext,
      lib: ['lib.es2023.d.ts', 'lib.dom.d.ts'],
      types: [],
      skipLibCheck: true,
      noEmit: true,
    });
    const diagnostics = ts.getPreEmitDiagnostics(program).map((d) => {
      const where =
        d.file === undefined
          ? ''
          : `${d.file.fileName}:${d.file.getLineAndCharacterOfPosition(d.start ?? 0).line + 1}: `;
      return `${where}${ts.flattenDiagnosticMessageText(d.messageText, '\n')}`;
    });
    expect(diagnostics).toEqual([]);

    const js = ts.transpileModule(CALLS, {
      compilerOptions: { module: ts.ModuleKind.ESNext, target: ts.ScriptTarget.ES2022 },
    }).outputText;
    writeFileSync(join(dir, 'calls.js'), js);
    const workerId = 'openapi-host';
    await api.coordinator.workers.heartbeat({ workerId, slots: 1, busy: 0, startedAt: Date.now() }, 60_000);
    const { callEveryOperation } = (await import(pathToFileURL(join(dir, 'calls.js')).href)) as {
      callEveryOperation: (
        baseUrl: string,
        key: string,
        workerId: string,
        url: string,
      ) => Promise<Record<string, string>>;
    };
    const outcomes = await callEveryOperation(api.baseUrl, TEST_API_KEY, workerId, 'http://127.0.0.1:9/never');
    expect(Object.keys(outcomes).sort()).toEqual(operations.map((o) => o.operation.operationId).sort());
    expect(outcomes).toEqual({
      getRoot: '200',
      getHealth: '200',
      getReadiness: '200',
      whoami: '200',
      issueToken: '201',
      spawn: '202',
      getUserSession: '200',
      updateUserSession: '200',
      recordActivity: '204',
      listSessions: '200',
      getSessionById: '200',
      // The test API runs without PROXY_SECRET.
      connectSession: '503 proxy_not_configured',
      runCommand: '503 proxy_not_configured',
      readFile: '503 proxy_not_configured',
      // Without an upgrade, as openapi-fetch asks: told to open it as a WebSocket.
      openTerminal: '400 invalid_request',
      writeFile: '503 proxy_not_configured',
      getLogs: '200',
      streamUserEvents: '200',
      streamEvents: '200',
      stopUserSession: '202',
      getHistory: '200',
      stopSessions: '202',
      listHosts: '200',
      listPools: '200',
      drainHost: '202',
      createWebhook: '201',
      listWebhooks: '200',
      listDeliveries: '200',
      deleteWebhook: '204',
    });
  }, 60_000);

  /** Opens an SSE stream of the API; `next()` is its next event (heartbeats skipped). */
  async function openStream(path: string): Promise<{ next(): Promise<{ id?: string; event: string; data: string }> }> {
    const abort = new AbortController();
    cleanUp(() => abort.abort());
    const response = await fetch(`${api.baseUrl}${path}`, {
      headers: { authorization: `Bearer ${TEST_API_KEY}`, accept: 'text/event-stream' },
      signal: abort.signal,
    });
    expect(response.status, path).toBe(200);
    const reader = response.body!.pipeThrough(new TextDecoderStream()).getReader();
    let text = '';
    return {
      async next() {
        for (;;) {
          const end = text.indexOf('\n\n');
          if (end >= 0) {
            const block = text.slice(0, end);
            text = text.slice(end + 2);
            const fields = new Map(
              block
                .split('\n')
                .filter((line) => !line.startsWith(':'))
                .map((line) => [line.slice(0, line.indexOf(':')), line.slice(line.indexOf(':') + 1).replace(/^ /, '')]),
            );
            const event = fields.get('event');
            if (event !== undefined)
              return { event, data: fields.get('data') ?? '', ...(fields.has('id') ? { id: fields.get('id')! } : {}) };
            continue;
          }
          const { value, done } = await reader.read();
          if (done) throw new Error(`${path} ended before an event`);
          text += value;
        }
      },
    };
  }
});
