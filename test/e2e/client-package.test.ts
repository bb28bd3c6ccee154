import { execFile } from 'node:child_process';
import { mkdtempSync, readFileSync, readdirSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';
import { ROOT } from '../support/processes.js';
import { API_KEY, startSystem } from '../support/system.js';

const run = promisify(execFile);

/** Runs `command` in `cwd` with a bounded time; its output, or the failure with its output. */
async function sh(cwd: string, command: string, args: string[], env: Record<string, string> = {}) {
  return run(command, args, {
    cwd,
    env: { PATH: process.env['PATH'] ?? '', HOME: process.env['HOME'] ?? tmpdir(), ...env },
    timeout: 180_000,
    maxBuffer: 16 * 1024 * 1024,
  });
}

/** The first ```ts block of the client's README: the example the README promises runs. */
function readmeExample(): string {
  const readme = readFileSync(`${ROOT}packages/client/README.md`, 'utf8');
  const match = /```ts\n([\s\S]*?)```/.exec(readme);
  if (match === null) throw new Error('packages/client/README.md has no ```ts block');
  return match[1]!;
}

describe('@cq/client as a package of its own', () => {
  it("npm pack's tarball installs into an empty project with one dependency, and the README's example compiles and runs against a live system", async () => {
    const dir = mkdtempSync(join(tmpdir(), 'cq-client-pack-'));
    // The tarball, as a user would make it (the build has run: the package ships dist/).
    const { stdout: packed } = await sh(ROOT, 'npm', ['pack', '-w', '@cq/client', '--pack-destination', dir]);
    const tarball = join(dir, packed.trim().split('\n').at(-1)!);
    const project = join(dir, 'project');
    await sh(dir, 'mkdir', [project]);
    writeFileSync(
      join(project, 'package.json'),
      JSON.stringify({ name: 'readme-example', private: true, type: 'module' }),
    );
    const npmInstall = ['install', '--prefer-offline', '--no-audit', '--no-fund'];
    await sh(project, 'npm', [...npmInstall, tarball]);

    // At run time it needs eventsource-parser (the streams) and ws (exec, loaded when used), nothing
    // else: no contract, no zod.
    const { stdout: tree } = await sh(project, 'npm', ['ls', '--all', '--omit=dev', '--json']);
    const deps = (JSON.parse(tree) as { dependencies: Record<string, { dependencies?: Record<string, unknown> }> })
      .dependencies;
    expect(Object.keys(deps)).toEqual(['@cq/client']);
    expect(Object.keys(deps['@cq/client']!.dependencies ?? {})).toEqual(['eventsource-parser', 'ws']);
    const installed = join(project, 'node_modules/@cq/client');
    const declarations = readdirSync(join(installed, 'dist')).filter((f) => f.endsWith('.d.ts'));
    expect(declarations).toContain('index.d.ts');
    for (const file of declarations) expect(readFileSync(join(installed, 'dist', file), 'utf8')).not.toContain('@cq/');
    expect(readdirSync(installed).sort()).toEqual(['README.md', 'dist', 'package.json']);

    // The README's example, compiled strictly against the installed package's types.
    await sh(project, 'npm', [
      ...npmInstall,
      '--save-dev',
      'standardwebhooks@^1.1.1',
      'typescript@~5.9.3',
      '@types/node@^20.19.0',
    ]);
    writeFileSync(join(project, 'example.ts'), readmeExample());
    writeFileSync(
      join(project, 'tsconfig.json'),
      JSON.stringify({
        compilerOptions: {
          target: 'ES2022',
          module: 'NodeNext',
          moduleResolution: 'NodeNext',
          strict: true,
          types: ['node'],
          outDir: 'out',
        },
        files: ['example.ts'],
      }),
    );
    await sh(project, join(project, 'node_modules/.bin/tsc'), ['-p', '.']);

    // Run against the quick start's shape: hosts with the built-in demo session, private webhooks allowed.
    const system = await startSystem({
      workers: 1,
      apiEnv: { WEBHOOK_ALLOW_PRIVATE: 'true' },
      workerEnv: { SESSION_COMMAND: '' },
    });
    const { stdout } = await sh(project, process.execPath, ['out/example.js'], {
      CQ_API_URL: system.api.baseUrl,
      CQ_API_KEY: API_KEY,
    });
    const lines = stdout.trim().split('\n');
    expect(lines[0]).toMatch(/^session [0-9a-f-]{36} of readme-\d+ is ready$/);
    expect(lines[1]).toMatch(
      /^output \[stdout\] demo: readme-\d+ session [0-9a-f-]{36} fence 1 started; runs until stopped$/,
    );
    expect(lines[2]).toMatch(/^output \[stdout\] demo: /);
    expect(lines[3]).toMatch(/^now ends at \d{4}-\d\d-\d\dT/);
    expect(lines.slice(4)).toEqual([
      'ended: stopped',
      'history: this session, stopped',
      'webhook deliveries verified: ready, stopped',
    ]);
  }, 240_000);
});
