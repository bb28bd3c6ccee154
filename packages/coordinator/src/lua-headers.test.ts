import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { defaultScriptsDir, loadScripts, scriptNames, type ScriptName } from './script-loader.js';
import { scriptTable } from './script-table.js';

const FILE_NAME = /^([a-z][A-Za-z0-9]*)-(\d+)\.lua$/;

function header(text: string): string {
  const match = /^--\[\[([\s\S]*?)\]\]/.exec(text);
  return match?.[1] ?? '';
}

function documented(section: string, kind: 'KEYS' | 'ARGV'): number[] {
  return [...section.matchAll(new RegExp(`^\\s*${kind}\\[(\\d+)\\]\\s+\\S`, 'gm'))].map((m) => Number(m[1]));
}

function used(body: string, kind: 'KEYS' | 'ARGV'): Set<number> {
  return new Set([...body.matchAll(new RegExp(`${kind}\\[(\\d+)\\]`, 'g'))].map((m) => Number(m[1])));
}

const files = readdirSync(defaultScriptsDir).filter((f) => f.endsWith('.lua'));
const scripts = loadScripts();

describe('lua script headers', () => {
  it('every script file is named camelCase-<numberOfKeys>.lua and is one the library runs', () => {
    expect(files.length).toBeGreaterThan(0);
    for (const file of files) expect(file, file).toMatch(FILE_NAME);
    expect(files.map((f) => FILE_NAME.exec(f)![1]).sort()).toEqual([...scriptNames].sort());
  });

  it.each(files)('%s documents exactly the KEYS its name counts, every ARGV it reads, and its outputs', (file) => {
    const text = readFileSync(join(defaultScriptsDir, file), 'utf8');
    const head = header(text);
    const body = text.slice(text.indexOf(']]') + 2);
    const numberOfKeys = Number(FILE_NAME.exec(file)![2]);

    expect(head.trim().split('\n')[0]!.trim(), 'a sentence of purpose first').toMatch(/^[A-Z].*[.:]?$/);
    const input = /Input:([\s\S]*?)Output:/.exec(head)?.[1];
    const output = /Output:([\s\S]*)$/.exec(head)?.[1];
    expect(input, 'an Input: section').toBeDefined();
    expect(output?.trim(), 'an Output: section').toBeTruthy();

    const keys = documented(input!, 'KEYS');
    expect(keys).toEqual(Array.from({ length: numberOfKeys }, (_, i) => i + 1));
    for (const n of used(body, 'KEYS'))
      expect(n, `KEYS[${n}] is used but the name says ${numberOfKeys}`).toBeLessThanOrEqual(numberOfKeys);

    const argv = documented(input!, 'ARGV');
    expect(argv, 'ARGV documented in order from 1').toEqual(Array.from({ length: argv.length }, (_, i) => i + 1));
    for (const n of used(body, 'ARGV')) expect(argv, `ARGV[${n}] is read but not documented`).toContain(n);

    // Every negative code an Output: lists is one the body can return, and vice versa (the body with its
    // includes expanded: a shared refusal, such as settleForChange's, is returned from there).
    const expanded = scripts.get(FILE_NAME.exec(file)![1] as ScriptName)!.lua;
    const returnedCodes = new Set([...expanded.matchAll(/return [^\n]*?\{ (-\d+)/g)].map((m) => Number(m[1])));
    const listedCodes = new Set([...output!.matchAll(/\{(-\d+)/g)].map((m) => Number(m[1])));
    expect([...returnedCodes].sort()).toEqual([...listedCodes].sort());

    // The TypeScript side's table agrees with the header: keys, args and reply codes.
    const spec = scriptTable[FILE_NAME.exec(file)![1] as ScriptName];
    expect(spec.keys, 'scriptTable keys').toBe(numberOfKeys);
    expect(spec.args, 'scriptTable args').toBe(argv.length);
    const codes = [...spec.replies].filter((c) => c < 0).sort();
    expect(codes, 'scriptTable reply codes').toEqual([...listedCodes].sort());
    expect(body).toMatch(/^local rcall = redis\.call$/m);
  });

  it('every include has a header and every script loads with its includes expanded once', () => {
    const includes = readdirSync(join(defaultScriptsDir, 'includes'));
    for (const file of includes) {
      expect(header(readFileSync(join(defaultScriptsDir, 'includes', file), 'utf8')).trim(), file).not.toBe('');
    }
    for (const script of scripts.values()) {
      expect(script.lua, script.name).not.toMatch(/--- @include/);
      const functions = [...script.lua.matchAll(/^local function (\w+)/gm)].map((m) => m[1]);
      expect(new Set(functions).size, `${script.name} defines a function twice`).toBe(functions.length);
    }
  });
});
