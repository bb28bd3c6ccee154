// Request and response schemas of the HTTP API (zod), one file per resource in schemas/ (named as the
// API's route files; the spawn's in tokens.ts, what several resources share in common.ts), all exported
// from here: the API validates with them and generates its OpenAPI document from them; the client's types
// are inferred from them (types.ts). A schema with a `.meta({ id })` is a named component of that
// document (`components.schemas`, named as its type in types.ts where there is one), so code generators
// give it a name too.

// By name: common.ts also holds helpers of the schemas (positiveMs) that are not part of the contract.
export {
  MAX_BODY_DEPTH,
  MAX_METADATA_DEPTH,
  emptyBody,
  errorSchema,
  labelsPatchSchema,
  labelsSchema,
  noQuery,
  poolSchema,
  sessionIdSchema,
  sessionMatchQuery,
  userIdSchema,
  userParams,
} from './schemas/common.js';
export * from './schemas/tokens.js';
export * from './schemas/sessions.js';
export * from './schemas/events.js';
export * from './schemas/hosts.js';
export * from './schemas/access.js';
export * from './schemas/logs.js';
export * from './schemas/webhooks.js';
export * from './schemas/proxy.js';
export * from './schemas/exec.js';
