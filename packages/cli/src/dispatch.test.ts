// Every command takes the global options and those it declares, and refuses any other by name; the help
// text names, on each command's lines, exactly the options it declares.
import { describe, expect, it, vi } from 'vitest';
import { globalOptions, isGlobalOption, knownOptions, parseCommandLine, type OptionName } from './args.js';
import { commands } from './commands/index.js';
import { refuseUndeclared } from './dispatch.js';
import { exitCodes } from './exit-codes.js';
import { main } from './main.js';
import { USAGE } from './usage.js';

/** `option` as typed on a command line: with a value when it takes one (a label's as `k=v`). */
function typed(option: OptionName): string[] {
  if (knownOptions[option].type === 'boolean') return [`--${option}`];
  return [`--${option}`, option === 'label' ? 'k=v' : '1'];
}

const every = Object.keys(knownOptions) as OptionName[];
const taken = [...commands].flatMap(([name, command]) =>
  every
    .filter((option) => isGlobalOption(option) || (command.options as string[]).includes(option))
    .map((option) => [name, option]),
);
const refused = [...commands].flatMap(([name, command]) =>
  every
    .filter((option) => !isGlobalOption(option) && !(command.options as string[]).includes(option))
    .map((option) => [name, option]),
);

describe("each command's options", () => {
  it('every option is global or taken by some command, and each command is walked', () => {
    for (const option of every)
      expect(
        isGlobalOption(option) || [...commands.values()].some((c) => (c.options as string[]).includes(option)),
        option,
      ).toBe(true);
    // Both walks below cover every command and every option.
    expect(taken.length + refused.length).toBe(commands.size * every.length);
    expect(refused.length).toBeGreaterThan(0);
  });

  it.each(taken)('%s takes --%s: parsed, nothing is refused', (name, option) => {
    const { values, positionals } = parseCommandLine([name!, ...typed(option as OptionName)]);
    expect(positionals).toEqual([name]);
    expect(() => refuseUndeclared(name!, commands.get(name!)!, values)).not.toThrow();
  });

  it.each(refused)('%s does not take --%s: a usage error naming both, before anything runs', async (name, option) => {
    let stderr = '';
    const write = vi.spyOn(process.stderr, 'write').mockImplementation((chunk: string | Uint8Array) => {
      stderr += String(chunk);
      return true;
    });
    const lines: string[] = [];
    let code: number;
    try {
      // Nothing listens at this URL: a command that ran would exit 8 (unreachable), not 2.
      code = await main([name!, ...typed(option as OptionName), '--url', 'http://127.0.0.1:1'], (line) =>
        lines.push(line),
      );
    } finally {
      write.mockRestore();
    }
    expect(stderr).toBe(`cq: ${name} does not take --${option}; run cq --help\n`);
    expect(lines).toEqual([]);
    expect(code).toBe(exitCodes.usage);
  });
});

/** The options each command's lines of the help text name: in its synopsis, left of the gap before the description. */
function usageOptions(): Map<string, string[]> {
  const section = USAGE.slice(USAGE.indexOf('\ncommands:\n'), USAGE.indexOf('\noptions of every command:\n'));
  const named = new Map<string, string[]>();
  for (const line of section.split('\n')) {
    // A description carried to a line of its own starts further in: it is no synopsis.
    const synopsis = /^ {2}(\S.*?)(?: {2,}|$)/.exec(line)?.[1];
    if (synopsis === undefined) continue;
    const name = synopsis.split(' ')[0]!;
    const options = [...synopsis.matchAll(/--(\w+)/g)].map((match) => match[1]!);
    named.set(name, [...new Set([...(named.get(name) ?? []), ...options])]);
  }
  return named;
}

describe('the help text', () => {
  it("names each command with exactly the options it takes on the command's lines", () => {
    const named = usageOptions();
    expect([...named.keys()].sort()).toEqual([...commands.keys()].sort());
    for (const [name, command] of commands) expect(named.get(name)!.sort(), name).toEqual([...command.options].sort());
  });

  it('names the options every command takes', () => {
    const from = USAGE.indexOf('\noptions of every command:\n');
    const section = USAGE.slice(from, USAGE.indexOf('\nany other option', from));
    const named = [...section.matchAll(/^ {2}(?:-\w, )?--(\w+)/gm)].map((match) => match[1]);
    expect(named.sort()).toEqual([...globalOptions].sort());
  });
});
