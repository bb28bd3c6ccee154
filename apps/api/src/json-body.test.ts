import { describe, expect, it } from 'vitest';
import { HttpError } from './http-errors.js';
import { DepthScanner, forbiddenKeyIn, parseJsonBody } from './json-body.js';

const bytes = (text: string): Buffer => Buffer.from(text, 'utf8');

describe('DepthScanner', () => {
  it('allows nesting up to the limit and refuses one level more, objects and arrays alike', () => {
    expect(new DepthScanner(3).push(bytes('[{"a":[1]}]'))).toBe(true);
    expect(new DepthScanner(3).push(bytes('[{"a":[[1]]}]'))).toBe(false);
    expect(new DepthScanner(3).push(bytes('{"a":{"b":{"c":{}}}}'))).toBe(false);
    // Siblings do not add up: only the nesting counts.
    expect(new DepthScanner(2).push(bytes('[[1],[2],{"a":1},[[]]]'))).toBe(false);
    expect(new DepthScanner(2).push(bytes('[[1],[2],{"a":1},[]]'))).toBe(true);
  });

  it('ignores brackets inside strings, escaped quotes included, and keeps its place across chunks', () => {
    expect(new DepthScanner(1).push(bytes('["[[[{{{", "\\"[[[", "\\\\"]'))).toBe(true);
    const scanner = new DepthScanner(2);
    // A string that opens in one chunk, an escape split from its quote, and a nesting split across chunks.
    for (const part of ['[{"k": "a[[\\', '"[[[', '"}', ', ["x"]', ']']) expect(scanner.push(bytes(part))).toBe(true);
    const deep = new DepthScanner(2);
    expect(deep.push(bytes('[['))).toBe(true);
    expect(deep.push(bytes('['))).toBe(false);
  });

  it('scans 100,000 levels in constant stack', () => {
    expect(new DepthScanner(64).push(bytes('['.repeat(100_000) + ']'.repeat(100_000)))).toBe(false);
    expect(new DepthScanner(200_000).push(bytes('{"a":'.repeat(100_000) + '1' + '}'.repeat(100_000)))).toBe(true);
  });

  it('treats multi-byte characters as string content', () => {
    expect(new DepthScanner(1).push(bytes('["😀[é{", "𝕏"]'))).toBe(true);
  });
});

describe('parseJsonBody', () => {
  it('refuses __proto__ and constructor keys at any depth, naming the key', () => {
    for (const [text, key] of [
      ['{"__proto__": {"polluted": true}}', '__proto__'],
      ['{"userId": "a", "metadata": {"x": [{"constructor": {"prototype": {}}}]}}', 'constructor'],
      ['[{"a": {"__proto__": 1}}]', '__proto__'],
    ] as const) {
      const thrown = (() => {
        try {
          parseJsonBody(text);
        } catch (err) {
          return err;
        }
        return undefined;
      })();
      expect(thrown, text).toBeInstanceOf(HttpError);
      expect((thrown as HttpError).code).toBe('invalid_request');
      expect((thrown as HttpError).message).toContain(`"${key}"`);
    }
    expect(forbiddenKeyIn({ a: [{ b: 'constructor' }], proto: '__proto__' })).toBeUndefined();
    expect(parseJsonBody('{"a": ["__proto__"]}')).toEqual({ a: ['__proto__'] });
  });

  it("says where JSON is broken without repeating the body's text", () => {
    for (const text of ['{"token": secret-value}', 'secret-value', '{"a": "secret-value"']) {
      let message = '';
      try {
        parseJsonBody(text);
      } catch (err) {
        expect((err as HttpError).code).toBe('invalid_json');
        message = (err as Error).message;
      }
      expect(message).toMatch(/^The body is not valid JSON/);
      expect(message).not.toContain('secret');
    }
  });
});
