/**
 * Text from the API made safe to show on a terminal. A session's output and its readiness endpoint, a
 * webhook's URL, a receiver's error, even a user id are written by parties the operator does not control;
 * printed raw, their control characters would drive the operator's terminal: set the clipboard (OSC 52) or
 * the window title (OSC 0/2), hide a link (OSC 8), erase or rewrite lines already printed (CSI, a bare CR,
 * their C1 forms U+009B and U+009D), or reorder what is shown (bidi overrides). Here each such character
 * becomes a visible escape (`\x1b`, `\r`, `\u202e`); everything else, backslashes included, is shown as it
 * is, so escaping text a second time leaves it unchanged.
 */

/**
 * What a terminal acts on rather than shows: the C0 controls, DEL and the C1 controls (`\p{Cc}`), the bidi
 * controls (U+061C, U+200E, U+200F, U+202A-U+202E, U+2066-U+2069), and the line and paragraph separators.
 */
const CONTROL = /[\p{Cc}\p{Bidi_Control}\u2028\u2029]/gu;

/** The escapes that have a name; every other control is shown by its code point. */
const NAMED_ESCAPES: Readonly<Record<string, string>> = { '\n': '\\n', '\r': '\\r', '\t': '\\t' };

/** One control as a visible escape: `\n`, `\r`, `\t`, else `\xHH` up to U+00FF, else `\uHHHH`. */
function escapeControl(control: string): string {
  const named = NAMED_ESCAPES[control];
  if (named !== undefined) return named;
  const code = control.charCodeAt(0);
  return code <= 0xff ? `\\x${code.toString(16).padStart(2, '0')}` : `\\u${code.toString(16).padStart(4, '0')}`;
}

/**
 * `text` with every control escaped but newline and tab: what reaches the terminal of the text the CLI
 * composes (its tables and multi-line messages keep their lines). Every text line the CLI prints, and
 * nothing but JSON, goes through here (`Context.out`).
 */
export function printable(text: string): string {
  return text.replace(CONTROL, (control) => (control === '\n' || control === '\t' ? control : escapeControl(control)));
}

/**
 * `value` with every control escaped, newline and tab included: a value from the API put inside a line,
 * which can then neither start a line of its own (forging one) nor shift a column.
 */
export function oneLine(value: string): string {
  return value.replace(CONTROL, escapeControl);
}

/**
 * A line (or lines) the CLI composes around values from the API: the template's own text as written, its
 * newlines included, and each value through {@link oneLine}, e.g. `` escaped`${userId}: ${state}` ``.
 */
export function escaped(template: TemplateStringsArray, ...values: unknown[]): string {
  return String.raw({ raw: template }, ...values.map((value) => oneLine(String(value))));
}
