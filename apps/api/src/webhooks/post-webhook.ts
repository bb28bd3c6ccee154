import type { LookupAddress } from 'node:dns';
import { request as httpRequest, type ClientRequest, type IncomingMessage } from 'node:http';
import { request as httpsRequest } from 'node:https';
import { isIP, type LookupFunction } from 'node:net';
import { checkUrlForm, whyForbidden, type Resolver } from './address-guard.js';
import { resolveHost } from './host-resolver.js';

/**
 * One webhook delivery attempt: a POST whose outcome is the receiver's status or why there is none.
 * Retrying, signing and logging are the caller's; this only makes one bounded, SSRF-checked request.
 */

/** The `User-Agent` of every delivery. */
export const WEBHOOK_USER_AGENT = 'cq-webhooks/1';

/** Bytes of a response body read before the connection is dropped. */
export const RESPONSE_BODY_CAP_BYTES = 64 * 1024;

/** Options of {@link postWebhook}. */
export interface PostWebhookOptions {
  /** The webhook's URL, `http:` or `https:`. */
  url: string | URL;
  /** The request body, sent as is (a string as UTF-8): the bytes that were signed. */
  body: Buffer | string;
  /**
   * Extra headers (the `webhook-*` ones). `Content-Type` and `Content-Length` are always ours; a
   * `User-Agent` here replaces {@link WEBHOOK_USER_AGENT}.
   */
  headers?: Record<string, string>;
  /**
   * The bound on the whole attempt, in milliseconds: resolution, connection, sending, the response's
   * headers and the reading of its body.
   * @defaultValue 10000
   */
  timeoutMs?: number;
  /** `WEBHOOK_ALLOW_PRIVATE`: connect to any address. */
  allowPrivate: boolean;
  /**
   * Name resolution for the connection; every address it gives is checked before any is used.
   * @defaultValue {@link resolveHost}
   */
  resolve?: Resolver;
}

/**
 * What became of the attempt: the receiver's HTTP status (any, a 3xx included: redirects are not
 * followed), or an error message when there was no answer (refused address, connection error, timeout).
 */
export type PostWebhookResult = { status: number } | { error: string };

const DEFAULT_TIMEOUT_MS = 10_000;

/**
 * A `lookup` for `http.request` that resolves with `resolve` and fails, before any connection, when one
 * of the addresses is forbidden: the name is checked again at every attempt (DNS rebinding), on the very
 * addresses the socket will be given. Answers in both of Node's forms (`all`, as happy eyeballs asks, or
 * one address).
 */
function checkedLookup(resolve: Resolver, allowPrivate: boolean): LookupFunction {
  return (hostname, options, callback) => {
    resolve(hostname).then(
      (addresses) => {
        const refusal = allowPrivate ? undefined : whyForbidden(hostname, addresses);
        if (refusal !== undefined) {
          callback(Object.assign(new Error(refusal), { code: 'EWEBHOOKFORBIDDEN' }), '', 0);
          return;
        }
        const wanted = options.family === 'IPv4' ? 4 : options.family === 'IPv6' ? 6 : (options.family ?? 0);
        const usable: LookupAddress[] = addresses
          .map((address) => ({ address, family: isIP(address) }))
          .filter(({ family }) => family !== 0 && (wanted === 0 || family === wanted));
        const [first] = usable;
        if (first === undefined) {
          callback(Object.assign(new Error(`${hostname} has no usable address`), { code: 'ENOTFOUND' }), '', 0);
        } else if (options.all === true) {
          callback(null, usable);
        } else {
          callback(null, first.address, first.family);
        }
      },
      (err: NodeJS.ErrnoException) => callback(err, '', 0),
    );
  };
}

/**
 * Make one delivery attempt: POST `body` to `url` as `application/json`, on a fresh connection (no
 * pooled socket, so the address check runs every time), without following redirects.
 *
 * Outcomes:
 * - `{ status }` once the response's headers have come: after its body has ended, or has passed
 *   {@link RESPONSE_BODY_CAP_BYTES} (then the connection is dropped), or has not ended by the deadline
 *   (the receiver has answered; the rest of the body does not matter).
 * - `{ error: 'timed out after <timeoutMs> ms' }` when no response headers came within `timeoutMs`.
 * - `{ error }` with the reason when the URL or an address it resolves to is forbidden (nothing is
 *   connected), and with the system's message for a connection or protocol error.
 *
 * Never throws.
 */
export function postWebhook(options: PostWebhookOptions): Promise<PostWebhookResult> {
  const timeoutMs = options.timeoutMs ?? DEFAULT_TIMEOUT_MS;
  // The URL's form, and an IP literal's address (connected to without a lookup); a name's addresses are
  // checked by the lookup, on the very addresses the socket is given.
  const form = checkUrlForm(options.url, options.allowPrivate);
  if (!form.ok) return Promise.resolve({ error: form.reason });
  const { url } = form;

  const body = typeof options.body === 'string' ? Buffer.from(options.body, 'utf8') : options.body;
  const headers: Record<string, string> = { 'user-agent': WEBHOOK_USER_AGENT };
  for (const [name, value] of Object.entries(options.headers ?? {})) headers[name.toLowerCase()] = value;
  headers['content-type'] = 'application/json';
  headers['content-length'] = String(body.length);

  return new Promise((resolvePromise) => {
    let settled = false;
    let status: number | undefined;
    const finish = (result: PostWebhookResult): void => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      req?.destroy();
      resolvePromise(result);
    };
    const onResponse = (res: IncomingMessage): void => {
      status = res.statusCode ?? 0;
      const answered = { status };
      let received = 0;
      res.on('data', (chunk: Buffer) => {
        received += chunk.length;
        if (received > RESPONSE_BODY_CAP_BYTES) finish(answered);
      });
      res.on('end', () => finish(answered));
      res.on('error', () => finish(answered));
    };

    const timer = setTimeout(
      () => finish(status === undefined ? { error: `timed out after ${timeoutMs} ms` } : { status }),
      timeoutMs,
    );
    let req: ClientRequest | undefined;
    try {
      req = (url.protocol === 'https:' ? httpsRequest : httpRequest)(
        url,
        {
          method: 'POST',
          headers,
          agent: false,
          lookup: checkedLookup(options.resolve ?? resolveHost, options.allowPrivate),
        },
        onResponse,
      );
    } catch (err) {
      // Thrown synchronously for a header value Node refuses (a line break, say).
      finish({ error: (err as Error).message });
      return;
    }
    req.on('error', (err) => finish(status === undefined ? { error: err.message } : { status }));
    req.end(body);
  });
}
