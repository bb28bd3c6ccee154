// Tokens and spawns: `POST /v1/tokens` (what a token admits) and `POST /v1/spawn` (its admission).
import { MAX_METADATA_BYTES, MAX_TOKEN_TTL_MS } from '../vocabulary.js';
import { z } from 'zod';
import { MAX_METADATA_DEPTH, labelsSchema, poolSchema, positiveMs, userIdSchema } from './common.js';

function depthWithin(value: unknown, limit: number): boolean {
  const stack: Array<[unknown, number]> = [[value, 0]];
  while (stack.length > 0) {
    const [node, depth] = stack.pop()!;
    if (node === null || typeof node !== 'object') continue;
    if (depth >= limit) return false;
    for (const child of Object.values(node)) stack.push([child, depth + 1]);
  }
  return true;
}

const metadataSchema = z
  .record(z.string(), z.unknown())
  .refine((value) => depthWithin(value, MAX_METADATA_DEPTH), {
    message: `metadata must be nested at most ${MAX_METADATA_DEPTH} levels deep`,
    // Deeper metadata never reaches the size check below: JSON.stringify recurses.
    abort: true,
  })
  .refine(
    (value) => Buffer.byteLength(JSON.stringify(value)) <= MAX_METADATA_BYTES,
    `metadata must be at most ${MAX_METADATA_BYTES} bytes as JSON`,
  )
  .describe('Carried to the session as SESSION_METADATA (at most 4 KiB as JSON)');

export const issueTokenBody = z
  .object({
    userId: userIdSchema,
    metadata: metadataSchema.optional(),
    ttlMs: positiveMs.max(MAX_TOKEN_TTL_MS).optional().describe('Life of the unused token, ms (default TOKEN_TTL_MS)'),
    lifetimeMs: positiveMs.optional().describe('Lifetime of the session it admits, ms; at most MAX_LIFETIME_MS'),
    idleTimeoutMs: z
      .number()
      .int()
      .min(0)
      .optional()
      .describe(
        'The session it admits is stopped (reason idle) after this long without activity, ms; 0: never; ' +
          'at most MAX_LIFETIME_MS (default IDLE_TIMEOUT_MS)',
      ),
    labels: labelsSchema.optional().describe('Labels of the session it admits (SESSION_LABELS); changeable later'),
    pool: poolSchema.optional().describe('The pool whose hosts run the session it admits (default: default)'),
  })
  .strict()
  .meta({ id: 'IssueTokenRequest' });

export const tokenIssued = z
  .object({
    token: z.string(),
    userId: z.string(),
    expiresAt: z.string().describe('ISO-8601, UTC'),
  })
  .meta({ id: 'IssuedToken' });

export const spawnBody = z
  .object({ token: z.string().max(1024).describe('A one-time spawn token') })
  .strict()
  .meta({ id: 'SpawnRequest' });

export const spawnAdmitted = z
  .object({
    sessionId: z.string(),
    userId: z.string(),
    fence: z.number().int(),
    state: z.literal('pending'),
    lifetimeMs: z.number().int(),
  })
  .meta({ id: 'Admission' });
