// The lint `make test` runs before tap (`make lint`). The rule set is kept to what catches bugs, not
// taste: layout is .editorconfig's, unused names are tsc's (noUnusedLocals/noUnusedParameters in
// tsconfig.base.json), checked once.
import js from '@eslint/js';
import tseslint from 'typescript-eslint';

const GLOBALS = [
  'process',
  'console',
  'URL',
  'Buffer',
  'setTimeout',
  'clearTimeout',
  'setInterval',
  'clearInterval',
  'setImmediate',
  'performance',
  'AbortController',
  'AbortSignal',
  'queueMicrotask',
  'TextEncoder',
  'TextDecoder',
  'structuredClone',
  'fetch',
];

export default tseslint.config(
  {
    ignores: [
      '**/dist/**',
      '**/node_modules/**',
      '.compat/**',
      'tmp/**',
      // Generated protobuf code: test/unit/proto-generated.test.ts checks it matches `buf generate`.
      'lib/protocol/src/gen/**',
    ],
  },
  {
    files: ['**/*.ts'],
    extends: [js.configs.recommended, ...tseslint.configs.recommended],
    languageOptions: {
      // Each source file typed by its package's own tsconfig, as `tsc -b` reads it.
      parserOptions: { projectService: true, tsconfigRootDir: import.meta.dirname },
    },
    rules: {
      // A switch over a union handles every member, or says `default` on purpose.
      '@typescript-eslint/switch-exhaustiveness-check': ['error', { considerDefaultExhaustiveForUnions: true, requireDefaultForNonUnion: false }],
      '@typescript-eslint/no-unused-vars': 'off',
      // Casts through `any` at the edges (JSON, dockerode, generated code) are deliberate and reviewed.
      '@typescript-eslint/no-explicit-any': 'off',
      // `self` for an outer `this` inside callbacks that get their own (prom-client's collect()).
      '@typescript-eslint/no-this-alias': ['error', { allowedNames: ['self'] }],
      // `t.same(…) || t.comment(…)`: say more only when an assertion failed.
      '@typescript-eslint/no-unused-expressions': ['error', { allowShortCircuit: true, allowTernary: true }],
      // TypeScript checks these itself, and better.
      'no-undef': 'off',
      'no-redeclare': 'off',
    },
  },
  {
    // A function over 60 lines (blank lines and comments not counted) holds more than one step: split it
    // into named ones. Source only: a test's body is its story.
    files: ['core/src/**/*.ts', 'lib/*/src/**/*.ts', 'plugins/*/src/**/*.ts', 'bin/src/**/*.ts', 'examples/*/src/**/*.ts'],
    rules: { 'max-lines-per-function': ['error', { max: 60, skipBlankLines: true, skipComments: true }] },
  },
  {
    // Tests are type-checked by `tsc -p tsconfig.tap.json` in `make test`; typing them here again
    // doubled the lint's time (≈ 47 s vs 26 s of CPU) for switches that are the code's, not the tests'.
    files: ['test/**/*.ts', 'examples/*/test/**/*.ts'],
    ...tseslint.configs.disableTypeChecked,
  },
  {
    files: ['**/*.mjs', '**/*.js'],
    extends: [js.configs.recommended],
    languageOptions: { globals: Object.fromEntries(GLOBALS.map((g) => [g, 'readonly'])) },
    rules: {
      'no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_', caughtErrors: 'none' }],
    },
  },
  {
    // The web console's page script runs in a browser: its globals are the browser's.
    files: ['plugins/controller/console/**/*.js'],
    languageOptions: {
      sourceType: 'script',
      globals: Object.fromEntries(['document', 'window', 'location', 'EventSource', 'URLSearchParams', 'Option'].map((g) => [g, 'readonly'])),
    },
  },
);
