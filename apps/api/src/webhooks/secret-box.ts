import { createCipheriv, createDecipheriv, hkdfSync, randomBytes } from 'node:crypto';

/**
 * Seals webhook secrets for Redis: AES-256-GCM under a key derived (HKDF-SHA256) from the API's
 * WEBHOOK_SECRET_KEY, else from its first service key, so a Redis dump alone does not reveal a secret. The
 * secret itself must stay recoverable: every delivery signs with it.
 */
export class SecretBox {
  /** The key secrets are sealed with, then the others any of them may have been sealed with. */
  readonly #keys: readonly Buffer[];

  /**
   * `materials`: [WEBHOOK_SECRET_KEY], else the service keys in API_KEYS order. Secrets are sealed
   * under the first and opened under any, so a service key can be added, made first, and the old one
   * removed once the webhooks sealed under it were created again.
   */
  constructor(materials: readonly string[]) {
    if (materials.length === 0) throw new Error('a secret box needs at least one key');
    this.#keys = materials.map((material) =>
      Buffer.from(hkdfSync('sha256', material, 'cq-webhooks', 'webhook secret sealing v1', 32)),
    );
  }

  /** `v1.<iv>.<tag>.<ciphertext>`, base64url parts. */
  seal(secret: string): string {
    const iv = randomBytes(12);
    const cipher = createCipheriv('aes-256-gcm', this.#keys[0]!, iv);
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
    for (const key of this.#keys) {
      try {
        const decipher = createDecipheriv('aes-256-gcm', key, Buffer.from(iv, 'base64url'));
        decipher.setAuthTag(Buffer.from(tag, 'base64url'));
        return Buffer.concat([decipher.update(Buffer.from(data, 'base64url')), decipher.final()]).toString('utf8');
      } catch {
        // not this key: the next one
      }
    }
    throw new Error(
      'the webhook secret was sealed under a key this API no longer has (WEBHOOK_SECRET_KEY, or the API_KEYS ' +
        'key it was sealed under, changed); delete the webhook and create it again',
    );
  }
}
