import { afterAll, onTestFinished } from 'vitest';

/**
 * Runs `fn` when what created the resource is done: after the current test when called inside one,
 * after the file's (or describe's) tests when called while tests are being collected. A bare `afterAll`
 * called inside a test is never run, so a helper that a test calls would leak what it started (an API
 * with its queue workers, a server, a connection) into the rest of the file.
 */
export function cleanUp(fn: () => unknown): void {
  let inTest = true;
  try {
    onTestFinished(async () => void (await fn()));
  } catch {
    inTest = false;
  }
  if (!inTest) afterAll(async () => void (await fn()));
}
