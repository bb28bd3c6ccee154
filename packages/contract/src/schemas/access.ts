// Access: the scopes a key may hold, and `GET /v1/whoami`.
import { z } from 'zod';

/** The scopes a key may hold (docs/http-api.md, "Access: named, scoped keys"). */
export const SCOPES = [
  'tokens:write',
  'sessions:read',
  'sessions:write',
  'sessions:connect',
  'sessions:exec',
  'hosts:read',
  'hosts:write',
  'webhooks:read',
  'webhooks:write',
  'dashboard',
  'dashboard:act',
  'admin',
] as const;

export const whoamiView = z
  .object({
    name: z.string().describe("The key's name (API_KEYS_FILE's, or key-<n> for API_KEYS' n-th key)"),
    scopes: z.array(z.enum(SCOPES)).describe('What the key may do; admin: everything'),
  })
  .meta({ id: 'Whoami' });
