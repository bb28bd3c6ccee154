/**
 * What a hostile session (or webhook receiver, or API) puts in text the CLI prints to take over the
 * operator's terminal, each with how `cq` shows it; and the characters a terminal acts on, written out
 * here rather than taken from escape.ts, which the printed text must not hold.
 */

/** Each attack: what it does, the raw text, and the visible escapes `cq` prints in its place. */
export const attacks: ReadonlyArray<readonly [what: string, raw: string, shown: string]> = [
  ['OSC 52 (set the clipboard)', '\x1b]52;c;cm0gLXJm\x07', '\\x1b]52;c;cm0gLXJm\\x07'],
  ['OSC 0 (set the title)', '\x1b]0;owned\x1b\\', '\\x1b]0;owned\\x1b\\'],
  [
    'OSC 8 (a hidden link)',
    '\x1b]8;;https://evil.example/\x07docs\x1b]8;;\x07',
    '\\x1b]8;;https://evil.example/\\x07docs\\x1b]8;;\\x07',
  ],
  ['CSI (erase the line, go up one)', '\x1b[2K\x1b[1A', '\\x1b[2K\\x1b[1A'],
  ['a bare CR', 'ok\rforged', 'ok\\rforged'],
  ['C1 CSI and OSC', '\u009b2K\u009d0;t\u009c', '\\x9b2K\\x9d0;t\\x9c'],
  ['NUL, BEL, backspace, DEL', '\x00\x07\x08\x7f', '\\x00\\x07\\x08\\x7f'],
  [
    'bidi overrides and isolates',
    '\u202eexe.txt\u202c \u2066a\u2069 \u200f',
    '\\u202eexe.txt\\u202c \\u2066a\\u2069 \\u200f',
  ],
  ['line and paragraph separators', 'a\u2028b\u2029c', 'a\\u2028b\\u2029c'],
];

/** A newline in a value from the API, which would forge a line of its own. */
export const forgedLine = [
  'a forged line',
  'ok\nrey: completed, session s-rey',
  'ok\\nrey: completed, session s-rey',
] as const;

/** C0 controls (tab and newline among them), DEL, C1 controls, bidi controls, line and paragraph separators. */
// eslint-disable-next-line no-control-regex -- these very characters are what must not be printed
export const TERMINAL_CONTROL = /[\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069\u2028\u2029]/;
