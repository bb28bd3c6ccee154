import { describe, expect, it } from 'vitest';
import { SecretBox } from './secret-box.js';

describe('sealing webhook secrets', () => {
  it('opens what it sealed; the sealed form does not contain the secret', () => {
    const box = new SecretBox(['key-a', 'key-b']);
    const sealed = box.seal('whsec_c2VjcmV0');
    expect(sealed).not.toContain('c2VjcmV0');
    expect(box.seal('whsec_c2VjcmV0')).not.toBe(sealed);
    expect(box.open(sealed)).toBe('whsec_c2VjcmV0');
    // Sealed under the first key: opened while that key is among them, in any place.
    expect(new SecretBox(['key-new', 'key-b', 'key-a']).open(sealed)).toBe('whsec_c2VjcmV0');
    expect(() => new SecretBox(['key-b']).open(sealed)).toThrow(/delete the webhook and create it again/);
  });

  it('refuses to open under another key or a tampered form, naming the fix', () => {
    const sealed = new SecretBox(['a key of sixteen chars']).seal('whsec_x');
    expect(() => new SecretBox(['another key entirely']).open(sealed)).toThrow(
      /delete the webhook and create it again/,
    );
    const [v, iv, tag, data] = sealed.split('.');
    expect(() =>
      new SecretBox(['a key of sixteen chars']).open(
        [v, iv, tag, `${data![0] === 'A' ? 'B' : 'A'}${data!.slice(1)}`].join('.'),
      ),
    ).toThrow();
    expect(() => new SecretBox(['x']).open('plain')).toThrow(/not sealed/);
  });
});
