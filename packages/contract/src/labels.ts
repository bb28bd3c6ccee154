import { LABEL_KEY_PATTERN, MAX_LABEL_VALUE_LENGTH, MAX_LABELS } from './vocabulary.js';

// A control character: C0, DEL and C1.
// eslint-disable-next-line no-control-regex
const CONTROL = /[\u0000-\u001f\u007f-\u009f]/;

/** What is wrong with one label, naming it; undefined when it is fine. `null` passes with `allowNull` (a removal). */
export function labelProblem(key: string, value: unknown, allowNull = false): string | undefined {
  if (!LABEL_KEY_PATTERN.test(key))
    return `label key ${JSON.stringify(key.slice(0, 80))} must be 1 to 63 characters of A-Z a-z 0-9 . _ - /`;
  if (value === null && allowNull) return undefined;
  if (typeof value !== 'string') return `label ${key} must have a string value`;
  if (value.length > MAX_LABEL_VALUE_LENGTH)
    return `label ${key} has a value of ${value.length} characters; at most ${MAX_LABEL_VALUE_LENGTH}`;
  if (CONTROL.test(value)) return `label ${key} has a control character in its value`;
  return undefined;
}

/** What is wrong with a set of labels (or, with `allowNull`, a change to them); undefined when nothing. */
export function labelsProblem(labels: Readonly<Record<string, unknown>>, allowNull = false): string | undefined {
  const keys = Object.keys(labels);
  if (keys.length > MAX_LABELS) return `labels has ${keys.length} labels; at most ${MAX_LABELS}`;
  for (const key of keys) {
    const problem = labelProblem(key, labels[key], allowNull);
    if (problem !== undefined) return problem;
  }
  return undefined;
}
