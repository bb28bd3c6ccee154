// ESLint for the whole monorepo (typescript-eslint, the vitest plugin). Run by `npm run lint` and by
// .ci/run; Prettier (`.prettierrc.json`, 120 columns) formats, ESLint judges.
import js from '@eslint/js';
import vitest from '@vitest/eslint-plugin';
import globals from 'globals';
import tseslint from 'typescript-eslint';

export default tseslint.config(
  {
    ignores: [
      '**/node_modules/**',
      '**/dist/**',
      '**/.turbo/**',
      '.data/**',
      '**/test-results/**',
      '**/test-artifacts/**',
    ],
  },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  {
    languageOptions: { globals: globals.node },
    rules: {
      '@typescript-eslint/no-unused-vars': [
        'error',
        { argsIgnorePattern: '^_', varsIgnorePattern: '^_', caughtErrors: 'none' },
      ],
      'no-restricted-syntax': [
        'error',
        {
          selector:
            "NewExpression[callee.name='Promise'] > ArrowFunctionExpression > CallExpression[callee.name='setTimeout']",
          message: "Sleep with `setTimeout` from 'node:timers/promises' instead of a hand-made promise.",
        },
      ],
    },
  },
  {
    // The dashboard's own script runs in the browser.
    files: ['apps/api/static/**/*.js'],
    languageOptions: { globals: globals.browser },
  },
  {
    // Product code: no line over 140 characters (Prettier wraps code at 120; this catches strings and comments).
    files: ['apps/*/src/**/*.ts', 'packages/*/src/**/*.ts'],
    ignores: ['**/*.test.ts', '**/test-support/**'],
    rules: { 'max-len': ['error', { code: 140 }] },
  },
  {
    files: ['**/*.test.ts', 'test/**/*.ts'],
    plugins: { vitest },
    rules: {
      ...vitest.configs.recommended.rules,
      'vitest/expect-expect': ['error', { assertFunctionNames: ['expect', 'expect*', 'assert*', 'check*'] }],
      // expect(value, message): the message names the case in a failure.
      'vitest/valid-expect': ['error', { maxArgs: 2 }],
      // Parametrized cases (one test per fault, per target) check what applies to each.
      'vitest/no-conditional-expect': 'off',
      // A harness checks its own set-up and tear-down.
      'vitest/no-standalone-expect': ['error', { additionalTestBlockFunctions: ['beforeAll', 'afterAll'] }],
      'vitest/no-focused-tests': 'error',
      'vitest/no-disabled-tests': 'error',
    },
  },
);
