import { readdirSync, readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import type { UserEvent } from '@cq/coordinator';
import { describe, expect, it } from 'vitest';
import { wire } from './event-wire.js';

describe('the wire form of an event', () => {
  it('is the event with its times as ISO-8601 and without the fields it lacks, built once', () => {
    const event: UserEvent = {
      type: 'running',
      sessionId: 's1',
      userId: 'u1',
      fence: 3,
      at: Date.UTC(2025, 0, 2, 3, 4, 5),
      workerId: 'host-1',
      deadline: Date.UTC(2025, 0, 2, 4, 4, 5),
      pool: 'gpu',
      labels: { job: 'j-1' },
    };
    expect(JSON.parse(wire(event))).toEqual({
      type: 'running',
      sessionId: 's1',
      userId: 'u1',
      fence: 3,
      at: '2025-01-02T03:04:05.000Z',
      pool: 'gpu',
      labels: { job: 'j-1' },
      workerId: 'host-1',
      deadline: '2025-01-02T04:04:05.000Z',
    });
    expect(wire(event)).toBe(wire(event));
  });

  it('gives an event written before sessions had pools and labels the defaults: pool default, no labels', () => {
    const event: UserEvent = { type: 'pending', sessionId: 's0', userId: 'u0', fence: 1, at: 0 };
    expect(JSON.parse(wire(event))).toMatchObject({ pool: 'default', labels: {} });
  });

  it('is imported by webhook delivery from its own module, never from a route module', () => {
    const dir = fileURLToPath(new URL('./webhooks/', import.meta.url));
    const sources = readdirSync(dir).filter((file) => file.endsWith('.ts') && !file.endsWith('.test.ts'));
    expect(sources).toContain('dispatcher.ts');
    for (const file of sources) expect(readFileSync(`${dir}${file}`, 'utf8'), file).not.toMatch(/from '\.\.\/routes\//);
  });
});
