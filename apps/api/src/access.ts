import { createHash, timingSafeEqual } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { ConfigError } from '@cq/service-kit';
import { z } from 'zod';
import { SCOPES } from '@cq/contract';

/**
 * What a key may do (the contract's list). `admin` is every scope; `dashboard:act` lets the dashboard act,
 * each action also needing the scope of the API route it goes through.
 */
export { SCOPES };

export type Scope = (typeof SCOPES)[number];

/** Who called: a key's name and scopes (never the key). */
export interface Caller {
  readonly name: string;
  readonly scopes: readonly Scope[];
}

/** Whether `caller` holds `scope` (`admin` holds every one). */
export function holds(caller: Caller, scope: Scope): boolean {
  return caller.scopes.includes(scope) || caller.scopes.includes('admin');
}

/** One configured key: its name, scopes and the SHA-256 of the key (the key itself is not kept). */
export interface KeyEntry extends Caller {
  readonly sha256: Buffer;
}

function sha256(value: string): Buffer {
  return createHash('sha256').update(value).digest();
}

/**
 * The API's keys. {@link identify} compares a presented key with every configured one in constant time:
 * as SHA-256 digests (equal length), all of them whatever matched.
 */
export class KeyRing {
  readonly #entries: readonly KeyEntry[];

  constructor(entries: readonly KeyEntry[]) {
    this.#entries = entries;
  }

  /** The keys of `API_KEYS`, each named `key-<n>` (1-based, in order) with every scope. */
  static fromServiceKeys(keys: readonly string[]): KeyEntry[] {
    return keys.map((key, i) => ({ name: `key-${i + 1}`, scopes: ['admin'], sha256: sha256(key) }));
  }

  /** The caller a presented key belongs to, or undefined. */
  identify(presented: string): Caller | undefined {
    const candidate = sha256(presented);
    let found: KeyEntry | undefined;
    for (const entry of this.#entries)
      if (timingSafeEqual(entry.sha256, candidate) && found === undefined) found = entry;
    return found === undefined ? undefined : { name: found.name, scopes: found.scopes };
  }

  /** Every key's name and scopes, in configuration order. */
  get callers(): Caller[] {
    return this.#entries.map(({ name, scopes }) => ({ name, scopes }));
  }
}

const NAME = /^[A-Za-z0-9][A-Za-z0-9._:@-]{0,63}$/;

const fileEntry = z
  .object({
    name: z
      .string({ error: 'needs a "name"' })
      .regex(NAME, 'name must be 1 to 64 letters, digits, ".", "_", ":", "@" or "-", starting with a letter or digit'),
    key: z
      .string({ error: '"key" must be a string' })
      .min(16, 'key is shorter than 16 characters: use long random keys (e.g. openssl rand -hex 24)')
      .regex(/^\S+$/, 'key holds white space')
      .optional(),
    keySha256: z
      .string({ error: '"keySha256" must be a string' })
      .regex(/^[0-9a-fA-F]{64}$/, 'keySha256 must be 64 hex digits (printf %s "$KEY" | sha256sum)')
      .optional(),
    scopes: z
      .array(z.string(), { error: 'needs "scopes", an array of scope names' })
      .min(1, 'scopes is empty: give at least one')
      .superRefine((scopes, ctx) => {
        const unknown = scopes.find((s) => !(SCOPES as readonly string[]).includes(s));
        if (unknown !== undefined)
          ctx.addIssue({ code: 'custom', message: `"${unknown}" is not a scope (one of ${SCOPES.join(', ')})` });
      }),
  })
  .strict()
  .refine((entry) => (entry.key === undefined) !== (entry.keySha256 === undefined), {
    message: 'give exactly one of "key" and "keySha256"',
  });

/**
 * Parses the text of an `API_KEYS_FILE` into key entries. Throws one {@link ConfigError} naming the file,
 * the entry (index and name) and what is wrong with it.
 */
export function parseKeysFile(text: string, path: string, serviceKeys: readonly KeyEntry[] = []): KeyEntry[] {
  const where = `API_KEYS_FILE ${path}`;
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch (err) {
    throw new ConfigError(`${where} is not JSON (${(err as Error).message})`);
  }
  if (!Array.isArray(json))
    throw new ConfigError(`${where} must hold a JSON array of {"name", "key" or "keySha256", "scopes"}`);
  const entries: KeyEntry[] = [];
  const seen = new Map<string, string>(serviceKeys.map((k) => [k.sha256.toString('hex'), k.name]));
  json.forEach((raw: unknown, index) => {
    const label =
      raw !== null && typeof raw === 'object' && typeof (raw as { name?: unknown }).name === 'string'
        ? `entry ${index} ("${(raw as { name: string }).name.slice(0, 64)}")`
        : `entry ${index}`;
    const parsed = fileEntry.safeParse(raw);
    if (!parsed.success) {
      const issue = parsed.error.issues[0]!;
      // Unknown fields are named (a misspelt "scope" would otherwise pass unnoticed); values never are.
      const message =
        issue.code === 'unrecognized_keys' ? `has unknown field(s) ${issue.keys.join(', ')}` : issue.message;
      throw new ConfigError(`${where}: ${label} ${message}`);
    }
    const { name, key, keySha256, scopes } = parsed.data;
    const digest = key === undefined ? Buffer.from(keySha256!, 'hex') : sha256(key);
    const twin = seen.get(digest.toString('hex'));
    if (twin !== undefined)
      throw new ConfigError(`${where}: ${label} has the same key as ${twin}: every key must be different`);
    seen.set(digest.toString('hex'), `entry ${index} ("${name}")`);
    entries.push({ name, scopes: [...new Set(scopes as Scope[])], sha256: digest });
  });
  if (entries.length === 0 && serviceKeys.length === 0)
    throw new ConfigError(`${where} holds no key: give at least one (or set API_KEYS)`);
  return entries;
}

/** Reads and parses an `API_KEYS_FILE` (once, at start: see docs/http-api.md on rotating keys). */
export function readKeysFile(path: string, serviceKeys: readonly KeyEntry[] = []): KeyEntry[] {
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (err) {
    throw new ConfigError(`API_KEYS_FILE ${path} cannot be read (${(err as NodeJS.ErrnoException).code ?? 'error'})`);
  }
  return parseKeysFile(text, path, serviceKeys);
}
