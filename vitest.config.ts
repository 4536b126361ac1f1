import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['tests/**/*.test.ts'],
    globalSetup: ['tests/setup/global-postgres.ts'],
    pool: 'forks',
    testTimeout: 60_000,
    hookTimeout: 60_000,
    // Each test file gets its own database cloned from a migrated template.
    fileParallelism: true,
    maxWorkers: 2,
  },
});
