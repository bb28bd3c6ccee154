import { createHash, createHmac, timingSafeEqual } from 'node:crypto';
import type { ListPosition, SessionFilter } from '@cq/coordinator';

/** Why a cursor was refused: it names what is wrong, for the 400. */
export class CursorError extends Error {
  override name = 'CursorError';
}

/** A filter in one canonical text: labels in key order, absent filters left out. */
function filterText(filter: SessionFilter): string {
  const labels = Object.entries(filter.labels ?? {}).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
  return JSON.stringify([filter.state, filter.pool, filter.workerId, filter.userId, labels]);
}

/**
 * The session list's cursors: a position in the walk and the filter it was made for, signed with the
 * deployment's cursor secret, as base64url text (`<slot>.<after>.<filter>.<mac>`). Opaque to clients; a
 * cursor of another filter, an edited one or a made-up one is refused.
 */
export class CursorCodec {
  readonly #secret: () => Promise<Buffer>;
  #key: Promise<Buffer> | undefined;

  constructor(secret: () => Promise<Buffer>) {
    this.#secret = secret;
  }

  #keyOnce(): Promise<Buffer> {
    this.#key ??= this.#secret().catch((err: unknown) => {
      this.#key = undefined;
      throw err;
    });
    return this.#key;
  }

  async encode(position: ListPosition, filter: SessionFilter): Promise<string> {
    const body = `${position.slot}.${Buffer.from(position.after).toString('base64url')}.${this.#filterTag(filter)}`;
    return `${body}.${this.#mac(await this.#keyOnce(), body)}`;
  }

  async decode(cursor: string, filter: SessionFilter): Promise<ListPosition> {
    const parts = cursor.split('.');
    if (parts.length !== 4) throw new CursorError('cursor is not one this API gave: pass the `next` of a page');
    const [slot, after, tag, mac] = parts as [string, string, string, string];
    const body = `${slot}.${after}.${tag}`;
    const expected = Buffer.from(this.#mac(await this.#keyOnce(), body));
    const given = Buffer.from(mac);
    if (given.length !== expected.length || !timingSafeEqual(given, expected))
      throw new CursorError(
        'cursor is not one this API gave (its signature does not match): pass the `next` of a page',
      );
    if (tag !== this.#filterTag(filter))
      throw new CursorError('cursor belongs to a list with other filters: ask with the filters it was made for');
    return { slot: Number(slot), after: Buffer.from(after, 'base64url').toString() };
  }

  #filterTag(filter: SessionFilter): string {
    return createHash('sha256').update(filterText(filter)).digest('base64url').slice(0, 11);
  }

  #mac(key: Buffer, body: string): string {
    return createHmac('sha256', key).update(body).digest('base64url').slice(0, 22);
  }
}
