// Lint: the rules that catch what a review of this tree found (explicit any,
// unused variables and imports, promises nobody awaits). Unused exports are
// knip's job (knip.json), formatting Prettier's (.prettierrc.json).
// Typed rules need the TypeScript program: typescript-eslint's project service
// reads tsconfig.json.
import js from '@eslint/js';
import tseslint from 'typescript-eslint';

export default tseslint.config(
  {
    ignores: [
      'node_modules/',
      'src/generated/',
      'client/generated/',
      'client/dashboard/dist/',
      'client/examples/*/dist/',
      'packages/*/dist/',
      'packages/client/src/generated/',
      'tests/artifacts/',
      '.data/',
      '.cache/',
    ],
  },
  {
    files: ['**/*.{ts,tsx}'],
    extends: [js.configs.recommended, ...tseslint.configs.recommended],
    languageOptions: {
      parserOptions: { projectService: true, tsconfigRootDir: import.meta.dirname },
    },
    linterOptions: { reportUnusedDisableDirectives: 'error' },
    rules: {
      '@typescript-eslint/no-explicit-any': 'error',
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_', caughtErrors: 'none', ignoreRestSiblings: true }],
      '@typescript-eslint/no-floating-promises': 'error',
    },
  },
  {
    // Tests and benches read GraphQL responses as parsed JSON and poke at
    // internals; typing each response would not catch anything the assertions
    // do not.
    files: ['tests/**', 'bench/**'],
    rules: { '@typescript-eslint/no-explicit-any': 'off' },
  },
);
