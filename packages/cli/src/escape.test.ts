import { describe, expect, it } from 'vitest';
import { escaped, oneLine, printable } from './escape.js';
import { attacks, forgedLine, TERMINAL_CONTROL } from './test-support/terminal-attacks.js';

describe('escaping what the API sent', () => {
  it.each(attacks)('printable and oneLine show %s as visible escapes', (_what, raw, shown) => {
    expect(printable(raw)).toBe(shown);
    expect(oneLine(raw)).toBe(shown);
  });

  it('printable keeps newlines and tabs (the CLI composes lines with them); oneLine escapes them too', () => {
    const [, raw, shown] = forgedLine;
    expect(printable(raw)).toBe(raw);
    expect(oneLine(raw)).toBe(shown);
    expect(printable('a\tb\nc\r\n')).toBe('a\tb\nc\\r\n');
    expect(oneLine('a\tb\nc\r\n')).toBe('a\\tb\\nc\\r\\n');
  });

  it('leaves every other character as it is: backslashes, accents, CJK, emoji, zero-width joiners', () => {
    const text = 'C:\\temp\\x1b is text, café, 日本, 👩‍💻, «quoted» ~';
    expect(printable(text)).toBe(text);
    expect(oneLine(text)).toBe(text);
  });

  it('leaves no control in any character from U+0000 to U+2FFF, and escaping twice changes nothing', () => {
    for (let code = 0; code < 0x3000; code++) {
      const char = String.fromCharCode(code);
      const once = oneLine(char);
      expect(once, `U+${code.toString(16)}`).not.toMatch(TERMINAL_CONTROL);
      expect(oneLine(once)).toBe(once);
      expect(printable(once)).toBe(once);
      expect(printable(char).replace(/^[\n\t]$/, ''), `U+${code.toString(16)}`).not.toMatch(TERMINAL_CONTROL);
    }
  });

  it('escaped keeps the template its own newlines and puts each value on one line', () => {
    const url = 'https://hooks.example/\x1b]8;;x\x07\nsecret: forged';
    expect(escaped`${'wh_1'}: ${url}\nsecret: ${42}`).toBe(
      'wh_1: https://hooks.example/\\x1b]8;;x\\x07\\nsecret: forged\nsecret: 42',
    );
  });
});
