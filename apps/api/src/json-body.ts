import type { FastifyRequest } from 'fastify';
import { MAX_BODY_DEPTH } from '@cq/contract';
import { HttpError } from './http-errors.js';

const QUOTE = 0x22;
const BACKSLASH = 0x5c;
const OPEN_BRACE = 0x7b;
const CLOSE_BRACE = 0x7d;
const OPEN_BRACKET = 0x5b;
const CLOSE_BRACKET = 0x5d;

/**
 * Counts the nesting of a JSON text as its bytes arrive: `{` and `[` outside strings open a level, `}`
 * and `]` close one. Linear in the bytes, constant in stack and memory, whatever the nesting. Works on
 * UTF-8 bytes split anywhere: the bytes it looks at are ASCII, which never occur inside a multi-byte
 * character.
 */
export class DepthScanner {
  private depth = 0;
  private inString = false;
  private escaped = false;

  /** @param limit - the deepest nesting allowed (a bare `[]` or `{}` is 1) */
  constructor(private readonly limit: number) {}

  /** Reads the next bytes; false as soon as the nesting goes beyond the limit. */
  push(chunk: Uint8Array): boolean {
    let { depth, inString, escaped } = this;
    const limit = this.limit;
    for (let i = 0; i < chunk.length; i++) {
      const byte = chunk[i]!;
      if (inString) {
        if (escaped) escaped = false;
        else if (byte === BACKSLASH) escaped = true;
        else if (byte === QUOTE) inString = false;
      } else if (byte === QUOTE) inString = true;
      else if (byte === OPEN_BRACE || byte === OPEN_BRACKET) {
        if (++depth > limit) {
          this.depth = depth;
          return false;
        }
      } else if (byte === CLOSE_BRACE || byte === CLOSE_BRACKET) depth--;
    }
    this.depth = depth;
    this.inString = inString;
    this.escaped = escaped;
    return true;
  }
}

/** Keys that reach an object's prototype when code copies or merges a parsed body. */
const FORBIDDEN_KEYS = ['__proto__', 'constructor'] as const;

/** The first forbidden key anywhere in a parsed body, or undefined. Iterative: no recursion. */
export function forbiddenKeyIn(value: unknown): string | undefined {
  const stack: unknown[] = [value];
  while (stack.length > 0) {
    const node = stack.pop();
    if (node === null || typeof node !== 'object') continue;
    if (!Array.isArray(node)) for (const key of FORBIDDEN_KEYS) if (Object.hasOwn(node, key)) return key;
    for (const child of Object.values(node)) if (child !== null && typeof child === 'object') stack.push(child);
  }
  return undefined;
}

/**
 * Parses a JSON text into a body, or throws the API's 400: no message repeats the body's text (the
 * runtime's own parse errors quote it), only where the fault is.
 */
export function parseJsonBody(text: string): unknown {
  let body: unknown;
  try {
    body = JSON.parse(text);
  } catch (err) {
    const position = /at position (\d+)/.exec((err as Error).message)?.[1];
    throw new HttpError(
      'invalid_json',
      position === undefined ? 'The body is not valid JSON.' : `The body is not valid JSON (at character ${position}).`,
    );
  }
  const key = forbiddenKeyIn(body);
  if (key !== undefined)
    throw new HttpError('invalid_request', `The body may not have a key "${key}", at any depth: rename it.`);
  return body;
}

/** Options of {@link jsonBodyParser}. */
export interface JsonBodyOptions {
  /** Largest body, bytes; larger ones are refused (413) as soon as they are. */
  bodyLimit: number;
  /** Deepest nesting of objects and arrays. @defaultValue {@link MAX_BODY_DEPTH} */
  maxDepth?: number;
}

type Done = (err: Error | null, body?: unknown) => void;

/**
 * The API's `application/json` body parser. It reads the body as it arrives and refuses it (400) as soon
 * as its nesting goes beyond `maxDepth`, before anything parses it, so no nesting reaches a recursive
 * parser, validator or serialiser; refuses bodies over `bodyLimit` (413) and bodies shorter or longer
 * than their `Content-Length`; then parses it ({@link parseJsonBody}). An empty body is no body at all
 * (routes that need one then say which field is missing).
 */
export function jsonBodyParser(options: JsonBodyOptions) {
  const maxDepth = options.maxDepth ?? MAX_BODY_DEPTH;
  const limit = options.bodyLimit;
  return (request: FastifyRequest, payload: NodeJS.ReadableStream, done: Done): void => {
    const declared = Number(request.headers['content-length']);
    if (declared > limit) {
      done(new HttpError('payload_too_large'));
      return;
    }
    const scanner = new DepthScanner(maxDepth);
    const chunks: Buffer[] = [];
    let received = 0;
    const stop = (err: Error | null, body?: unknown): void => {
      payload.removeListener('data', onData);
      payload.removeListener('end', onEnd);
      payload.removeListener('error', onError);
      done(err, body);
    };
    const onData = (data: Buffer | string): void => {
      const chunk = typeof data === 'string' ? Buffer.from(data) : data;
      received += chunk.length;
      if (received > limit) stop(new HttpError('payload_too_large'));
      else if (!scanner.push(chunk))
        stop(
          new HttpError(
            'invalid_request',
            `The body is nested more than ${maxDepth} levels deep (objects and arrays); flatten it.`,
          ),
        );
      else chunks.push(chunk);
    };
    const onEnd = (): void => {
      if (!Number.isNaN(declared) && received !== declared) {
        stop(new HttpError('invalid_request', 'The body is not as long as its Content-Length says.'));
        return;
      }
      const text = Buffer.concat(chunks, received).toString('utf8');
      if (text === '') {
        stop(null, undefined);
        return;
      }
      try {
        stop(null, parseJsonBody(text));
      } catch (err) {
        stop(err as Error);
      }
    };
    // The client went away or the stream broke: nobody waits for this answer, but it is a client's fault.
    const onError = (): void => stop(new HttpError('invalid_request', 'The body could not be read.'));
    payload.on('data', onData);
    payload.on('end', onEnd);
    payload.on('error', onError);
    payload.resume();
  };
}
