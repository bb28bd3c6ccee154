import { parseRedisVersion, type RedisVersion } from './redis-version.js';

/** The `field:value` lines of an `INFO` reply, by field (section headers and blank lines left out). */
export function parseInfo(text: string): ReadonlyMap<string, string> {
  const fields = new Map<string, string>();
  for (const line of text.split(/\r?\n/)) {
    if (line === '' || line.startsWith('#')) continue;
    const colon = line.indexOf(':');
    if (colon > 0) fields.set(line.slice(0, colon), line.slice(colon + 1));
  }
  return fields;
}

/** What the setup checks read from `INFO` (the default sections: server, memory, persistence, ...). */
export interface InfoFacts {
  /** `redis_version`, parsed; undefined when absent or not `x.y.z`. */
  version: RedisVersion | undefined;
  /** `redis_version` as written, for messages (`unknown` when absent). */
  versionText: string;
  /** `valkey_version`, when the server is Valkey. */
  valkeyVersion: string | undefined;
  /** `aof_enabled:1`; undefined when the field is absent. */
  aofEnabled: boolean | undefined;
  /** `maxmemory_policy`; undefined when absent. */
  maxmemoryPolicy: string | undefined;
}

/** The fields of {@link InfoFacts} from an `INFO` reply. */
export function infoFacts(text: string): InfoFacts {
  const fields = parseInfo(text);
  const aof = fields.get('aof_enabled');
  return {
    version: parseRedisVersion(fields.get('redis_version')),
    versionText: fields.get('redis_version') ?? 'unknown',
    valkeyVersion: fields.get('valkey_version'),
    aofEnabled: aof === undefined ? undefined : aof === '1',
    maxmemoryPolicy: fields.get('maxmemory_policy'),
  };
}
