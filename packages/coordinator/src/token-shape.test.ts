import { describe, expect, it } from 'vitest';
import { tokenParts } from '@cq/contract';
import { createToken, parseToken } from './tokens.js';

/** A token made as the coordinator makes one; for user ids it would refuse too (createToken does not check). */
const tokenOf = (userId: string): string => createToken(userId).token;

// tokenParts (@cq/contract) decides what can be a token, for parseToken here and for the CLI before any call.
describe('tokenParts and parseToken', () => {
  it.each(['a', 'alice', 'ann@example.com', 'a.b_c:d-e', 'x'.repeat(128)])(
    'takes a token the coordinator makes for %s',
    (userId) => {
      for (let i = 0; i < 20; i++) {
        const { token, parsed } = createToken(userId);
        expect(tokenParts(token)).toEqual({ userId, secret: token.split('.')[2] });
        expect(parseToken(token)).toEqual(parsed);
      }
    },
  );

  it.each([
    ['a user id', 'alice'],
    ['nothing', ''],
    ['the prefix alone', 'v1.'],
    ['a secret one character short', tokenOf('alice').slice(0, -1)],
    ['a secret one character long', `${tokenOf('alice')}A`],
    ['another version', tokenOf('alice').replace(/^v1/, 'v2')],
    ['spaces around it', ` ${tokenOf('alice')} `],
    ['a user id the coordinator refuses (a space)', tokenOf('a b')],
    ['a user id over 128 characters', tokenOf('x'.repeat(129))],
    // "a" is YQ; YR decodes to it too, but is not its base64url: the coordinator refuses it.
    ['a user part not in its one base64url form', `v1.YR.${'A'.repeat(43)}`],
  ])('refuses %s', (_, text) => {
    expect(tokenParts(text)).toBeUndefined();
    expect(parseToken(text)).toBeUndefined();
  });
});
