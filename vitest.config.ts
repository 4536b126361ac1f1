import { createRequire } from 'node:module';
import { defineConfig } from 'vitest/config';
import { sourceAliases } from './packages/source-aliases.ts';

const require = createRequire(import.meta.url);

export default defineConfig({
  // graphql ships CJS and ESM builds without an exports map: Vite would pick the
  // ESM one for our sources while dependencies (Pothos, yoga) load the CJS one
  // through Node, and graphql refuses to mix the two. Use Node's choice.
  resolve: { alias: [{ find: /^graphql$/, replacement: require.resolve('graphql') }, ...sourceAliases] },
  test: {
    include: ['tests/**/*.test.ts'],
    globalSetup: ['tests/setup/global-postgres.ts'],
    pool: 'forks',
    testTimeout: 60_000,
    hookTimeout: 60_000,
    // Each test file gets its own database cloned from a migrated template.
    maxWorkers: 2,
  },
});
