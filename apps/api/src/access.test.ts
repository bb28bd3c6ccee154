import { createHash } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { KeyRing, holds, parseKeysFile } from './access.js';

const sha = (key: string): string => createHash('sha256').update(key).digest('hex');
const parse = (entries: unknown): ReturnType<typeof parseKeysFile> =>
  parseKeysFile(JSON.stringify(entries), '/etc/cq/keys.json');

describe('API_KEYS_FILE', () => {
  it('takes keys by value or by SHA-256, each with its name and scopes; identifies each and no other', () => {
    const entries = parse([
      { name: 'issuer', key: 'issuer-key-0123456789', scopes: ['tokens:write'] },
      { name: 'culler', keySha256: sha('culler-key-0123456789'), scopes: ['sessions:read', 'sessions:write'] },
      { name: 'culler', key: 'culler-key-NEXT-0123456789', scopes: ['sessions:read', 'sessions:write'] },
    ]);
    const ring = new KeyRing([...KeyRing.fromServiceKeys(['service-key-0123456789']), ...entries]);
    expect(ring.identify('issuer-key-0123456789')).toEqual({ name: 'issuer', scopes: ['tokens:write'] });
    expect(ring.identify('culler-key-0123456789')?.name).toBe('culler');
    // Two keys of one name: the old and the new while a key is rotated.
    expect(ring.identify('culler-key-NEXT-0123456789')?.name).toBe('culler');
    expect(ring.identify('service-key-0123456789')).toEqual({ name: 'key-1', scopes: ['admin'] });
    expect(ring.identify('issuer-key-012345678')).toBeUndefined();
    expect(ring.identify(sha('culler-key-0123456789'))).toBeUndefined();
  });

  it('admin holds every scope; any other scope only itself', () => {
    expect(holds({ name: 'a', scopes: ['admin'] }, 'hosts:write')).toBe(true);
    expect(holds({ name: 'b', scopes: ['sessions:read'] }, 'sessions:read')).toBe(true);
    expect(holds({ name: 'b', scopes: ['sessions:read'] }, 'sessions:write')).toBe(false);
    expect(holds({ name: 'c', scopes: ['dashboard'] }, 'dashboard:act')).toBe(false);
  });

  it.each([
    ['{', /^API_KEYS_FILE \/etc\/cq\/keys\.json is not JSON/],
    ['{"name": "x"}', /^API_KEYS_FILE \/etc\/cq\/keys\.json must hold a JSON array/],
    ['[]', /holds no key: give at least one \(or set API_KEYS\)$/],
    [
      JSON.stringify([
        { name: 'ok', key: 'ok-key-0123456789abc', scopes: ['admin'] },
        { name: 'ci', key: 'short', scopes: ['admin'] },
      ]),
      /^API_KEYS_FILE \/etc\/cq\/keys\.json: entry 1 \("ci"\) key is shorter than 16 characters/,
    ],
    [
      JSON.stringify([{ name: 'ci', key: 'ci-key-0123456789abc', scopes: ['sessions:wrte'] }]),
      /: entry 0 \("ci"\) "sessions:wrte" is not a scope \(one of tokens:write, sessions:read, /,
    ],
    [JSON.stringify([{ name: 'ci', key: 'ci-key-0123456789abc', scopes: [] }]), /entry 0 \("ci"\) scopes is empty/],
    [JSON.stringify([{ name: 'ci', key: 'ci-key-0123456789abc' }]), /entry 0 \("ci"\) needs "scopes"/],
    [
      JSON.stringify([{ name: 'ci', key: 'ci-key-0123456789abc', keySha256: sha('x'), scopes: ['admin'] }]),
      /entry 0 \("ci"\) give exactly one of "key" and "keySha256"/,
    ],
    [JSON.stringify([{ name: 'ci', scopes: ['admin'] }]), /entry 0 \("ci"\) give exactly one of "key" and "keySha256"/],
    [
      JSON.stringify([{ name: 'ci', keySha256: 'abc', scopes: ['admin'] }]),
      /entry 0 \("ci"\) keySha256 must be 64 hex digits/,
    ],
    [
      JSON.stringify([{ key: 'ci-key-0123456789abc', scopes: ['admin'] }]),
      /^API_KEYS_FILE \S+: entry 0 needs a "name"$/,
    ],
    [
      JSON.stringify([{ name: 'a b', key: 'ci-key-0123456789abc', scopes: ['admin'] }]),
      /entry 0 \("a b"\) name must be/,
    ],
    [
      JSON.stringify([{ name: 'ci', key: 'ci-key-0123456789abc', scope: ['admin'], scopes: ['admin'] }]),
      /entry 0 \("ci"\) has unknown field\(s\) scope$/,
    ],
    [
      JSON.stringify([
        { name: 'one', key: 'same-key-0123456789', scopes: ['admin'] },
        { name: 'two', keySha256: sha('same-key-0123456789'), scopes: ['dashboard'] },
      ]),
      /entry 1 \("two"\) has the same key as entry 0 \("one"\): every key must be different$/,
    ],
    ['[null]', /entry 0 /],
  ])('refuses %s with one line naming the entry and what is wrong', (text, message) => {
    expect(() => parseKeysFile(text, '/etc/cq/keys.json')).toThrow(message);
    try {
      parseKeysFile(text, '/etc/cq/keys.json');
    } catch (err) {
      expect((err as Error).message).not.toContain('\n');
      // Never the key itself.
      expect((err as Error).message).not.toMatch(/0123456789abc|same-key/);
    }
  });

  it("refuses a file key that is one of API_KEYS'", () => {
    expect(() =>
      parseKeysFile(
        JSON.stringify([{ name: 'dup', key: 'service-key-0123456789', scopes: ['dashboard'] }]),
        'k.json',
        KeyRing.fromServiceKeys(['service-key-0123456789']),
      ),
    ).toThrow(/entry 0 \("dup"\) has the same key as key-1/);
  });
});
