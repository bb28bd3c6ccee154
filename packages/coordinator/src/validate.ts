import { POOL_PATTERN, USER_ID_PATTERN, labelsProblem } from '@cq/contract';
import { InvalidArgumentError } from './errors.js';

export { USER_ID_PATTERN };

/** What a key prefix, limiter name or lease resource may be: no braces, so hash tags stay ours. */
export const NAME_PATTERN = /^[A-Za-z0-9._:@-]{1,128}$/;

/** Throws {@link InvalidArgumentError} unless `userId` matches {@link USER_ID_PATTERN}. */
export function assertUserId(userId: string): void {
  if (!USER_ID_PATTERN.test(userId)) {
    throw new InvalidArgumentError('userId must be 1 to 128 characters of A-Z a-z 0-9 . _ : @ -');
  }
}

/** Throws {@link InvalidArgumentError} unless `value` is a usable name for `what`. */
export function assertName(value: string, what: string): void {
  if (!NAME_PATTERN.test(value)) {
    throw new InvalidArgumentError(`${what} must be 1 to 128 characters of A-Z a-z 0-9 . _ : @ - (no braces)`);
  }
}

/** Throws {@link InvalidArgumentError} naming the label unless `labels` keeps the limits (`allowNull`: a change). */
export function assertLabels(labels: Readonly<Record<string, unknown>>, allowNull = false): void {
  const problem = labelsProblem(labels, allowNull);
  if (problem !== undefined) throw new InvalidArgumentError(problem);
}

/** Throws {@link InvalidArgumentError} unless `pool` is a pool name. */
export function assertPool(pool: string): void {
  if (!POOL_PATTERN.test(pool)) throw new InvalidArgumentError('pool must be 1 to 64 characters of a-z 0-9 -');
}

/** Throws {@link InvalidArgumentError} unless `value` is an integer in [min, max]. */
export function assertInteger(value: number, what: string, min: number, max = Number.MAX_SAFE_INTEGER): void {
  if (!Number.isSafeInteger(value) || value < min || value > max) {
    throw new InvalidArgumentError(`${what} must be an integer from ${min} to ${max}, got ${String(value)}`);
  }
}
