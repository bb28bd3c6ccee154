import { createCipheriv, createDecipheriv, hkdfSync, randomBytes } from 'node:crypto';

/**
 * Seals webhook secrets for Redis: AES-256-GCM under a key derived (HKDF-SHA256) from the API's
 * WEBHOOK_SECRET_KEY, else from its service keys, so a Redis dump alone does not reveal a secret. The
 * secret itself must stay recoverable: every delivery signs with it.
 */
export class SecretBox {
  readonly #key: Buffer;

  /** `material`: WEBHOOK_SECRET_KEY, else the service keys (sorted, so their order does not matter). */
  constructor(material: string | readonly string[]) {
    const input = typeof material === 'string' ? material : [...material].sort().join('\n');
    this.#key = Buffer.from(hkdfSync('sha256', input, 'cq-webhooks', 'webhook secret sealing v1', 32));
  }

  /** `v1.<iv>.<tag>.<ciphertext>`, base64url parts. */
  seal(secret: string): string {
    const iv = randomBytes(12);
    const cipher = createCipheriv('aes-256-gcm', this.#key, iv);
    const sealed = Buffer.concat([cipher.update(secret, 'utf8'), cipher.final()]);
    return ['v1', iv, cipher.getAuthTag(), sealed]
      .map((p) => (typeof p === 'string' ? p : p.toString('base64url')))
      .join('.');
  }

  /** The secret; throws when it was sealed under another key (WEBHOOK_SECRET_KEY or API_KEYS changed). */
  open(sealed: string): string {
    const [version, iv, tag, data] = sealed.split('.');
    if (version !== 'v1' || iv === undefined || tag === undefined || data === undefined)
      throw new Error('the webhook secret is not sealed in a form this API reads');
    try {
      const decipher = createDecipheriv('aes-256-gcm', this.#key, Buffer.from(iv, 'base64url'));
      decipher.setAuthTag(Buffer.from(tag, 'base64url'));
      return Buffer.concat([decipher.update(Buffer.from(data, 'base64url')), decipher.final()]).toString('utf8');
    } catch {
      throw new Error(
        'the webhook secret was sealed under another key (WEBHOOK_SECRET_KEY, or API_KEYS without it, changed); ' +
          'delete the webhook and create it again',
      );
    }
  }
}
