import { CoordinatorError, isUnavailable } from '@cq/coordinator';
import type { FastifyError, FastifyInstance } from 'fastify';
import fp from 'fastify-plugin';
import { hasZodFastifySchemaValidationErrors } from 'fastify-type-provider-zod';
import { HttpError, errorBody, httpErrors, statusOfCoordinatorCode, type HttpErrorCode } from '../http-errors.js';

interface ValidationIssue {
  keyword: string;
  instancePath: string;
  message: string;
  params: { keys?: string[] };
}

/** How a message names the fields of one part of the request (Fastify's validation context). */
interface RequestPart {
  /** The part as a whole. */
  whole: string;
  /** One of its fields, and several. */
  one: string;
  many: string;
  /** After the field's name: where it is, when the noun does not say. */
  where: string;
}

const requestParts: Readonly<Record<string, RequestPart>> = {
  body: { whole: 'body', one: 'field', many: 'fields', where: ' in body' },
  querystring: { whole: 'query string', one: 'query parameter', many: 'query parameters', where: '' },
  params: { whole: 'path', one: 'path parameter', many: 'path parameters', where: '' },
  headers: { whole: 'headers', one: 'header', many: 'headers', where: '' },
};

const wholeRequest: RequestPart = { whole: 'request', one: 'field', many: 'fields', where: ' in request' };

function capitalized(text: string): string {
  return text.charAt(0).toUpperCase() + text.slice(1);
}

/**
 * One sentence naming the field that is wrong and how: `Unknown field "x" in body.`, `Unknown query
 * parameter "x".`, `Path parameter "sessionId" is not valid: ...`.
 */
function describeValidation(issues: readonly ValidationIssue[], context: string | undefined): string {
  const issue = issues[0]!;
  const part = (context === undefined ? undefined : requestParts[context]) ?? wholeRequest;
  if (issue.keyword === 'unrecognized_keys') {
    const keys = issue.params.keys ?? [];
    // Named (the contract asks for it), but cut short: a message never carries much of what was sent.
    const named = keys.slice(0, 5).map((k) => JSON.stringify(k.length > 64 ? `${k.slice(0, 64)}…` : k));
    return `Unknown ${keys.length > 1 ? part.many : part.one} ${named.join(', ')}${keys.length > 5 ? ', …' : ''}${part.where}.`;
  }
  const field = issue.instancePath.replace(/^\//, '').replace(/\//g, '.');
  if (field === '') return `The ${part.whole} is not valid: ${issue.message}.`;
  return `${capitalized(part.one)} "${field}"${part.where} is not valid: ${issue.message}.`;
}

/** The methods each route template takes, and a matcher of concrete paths, built from the route table. */
interface PathMethods {
  pattern: RegExp;
  methods: Set<string>;
}

function pathMatchers(routes: ReadonlyArray<{ method: string; url: string }>): PathMethods[] {
  const byUrl = new Map<string, Set<string>>();
  for (const { method, url } of routes) byUrl.set(url, (byUrl.get(url) ?? new Set()).add(method));
  return [...byUrl].map(([url, methods]) => ({
    pattern: new RegExp(
      '^' +
        url
          .split(/(:\w+|\*)/)
          .map((part) =>
            part === '*' ? '.*' : part.startsWith(':') ? '[^/]+' : part.replace(/[.+?^${}()|[\]\\]/g, '\\$&'),
          )
          .join('') +
        '$',
    ),
    methods,
  }));
}

const fastifyCodes: Record<string, HttpErrorCode> = {
  FST_ERR_CTP_BODY_TOO_LARGE: 'payload_too_large',
  FST_ERR_CTP_INVALID_MEDIA_TYPE: 'unsupported_media_type',
  FST_ERR_CTP_INVALID_CONTENT_LENGTH: 'invalid_request',
  FST_ERR_CTP_EMPTY_JSON_BODY: 'invalid_json',
  FST_ERR_CTP_INVALID_JSON_BODY: 'invalid_json',
};

/**
 * Turns every error into `{"error": {"code", "message"}}` with its status: validation → 400 naming
 * the field, Redis outages → 503, coordinator errors by their code; a 500 only for our own bugs.
 */
export const errorsPlugin = fp(
  async (app: FastifyInstance) => {
    // 405 with Allow for a known path asked with another method, else 404; neither repeats the path.
    let matchers: PathMethods[] | undefined;
    app.addHook('onReady', async () => {
      matchers = pathMatchers(app.routeTable);
    });
    app.setNotFoundHandler(async (request, reply) => {
      const path = request.url.split('?')[0] ?? '';
      const allowed = new Set<string>();
      for (const { pattern, methods } of matchers ?? [])
        if (pattern.test(path)) for (const m of methods) allowed.add(m);
      if (allowed.size > 0 && !allowed.has(request.method))
        return reply
          .code(405)
          .header('Allow', [...allowed].sort().join(', '))
          .send(errorBody('method_not_allowed', httpErrors.method_not_allowed.message));
      return reply.code(404).send(errorBody('not_found', 'There is no route for this method and path.'));
    });
    app.setErrorHandler(async (err: FastifyError, request, reply) => {
      if (err instanceof HttpError) {
        return reply.code(err.status).send(errorBody(err.code, err.message, err.details));
      }
      if (hasZodFastifySchemaValidationErrors(err)) {
        const issues = err.validation as unknown as ValidationIssue[];
        return reply.code(400).send(errorBody('invalid_request', describeValidation(issues, err.validationContext)));
      }
      const mapped = fastifyCodes[err.code];
      if (mapped !== undefined) {
        return reply.code(httpErrors[mapped].status).send(errorBody(mapped, httpErrors[mapped].message));
      }
      if (err instanceof CoordinatorError && err.code !== 'unavailable') {
        if (err.code === 'invalid_argument') return reply.code(400).send(errorBody('invalid_request', err.message));
        const status = statusOfCoordinatorCode[err.code];
        if (status < 500) return reply.code(status).send(errorBody(err.code as HttpErrorCode, err.message));
      } else if (err.statusCode !== undefined && err.statusCode >= 400 && err.statusCode < 500) {
        // Other refusals of Fastify's: their messages may quote what was sent, so the reason goes to the log.
        request.log.info({ err }, 'request refused');
        return reply.code(err.statusCode).send(errorBody('invalid_request', httpErrors.invalid_request.message));
      } else if (isUnavailable(err)) {
        // Only the known outage errors (see isUnavailable); anything else is a bug of ours, below.
        app.metrics.redisErrors.inc({ operation: request.routeOptions.url ?? 'unknown' });
        request.log.warn({ err }, 'redis unavailable');
        return reply
          .code(503)
          .header('Retry-After', '1')
          .send(errorBody('unavailable', httpErrors.unavailable.message));
      }
      request.log.error({ err }, 'unexpected error');
      return reply.code(500).send(errorBody('internal', httpErrors.internal.message));
    });
  },
  { name: 'errors', fastify: '5.x', dependencies: ['metrics'] },
);
