#!/usr/bin/env node
// Runs the Prisma CLI offline. Prisma 6 downloads a query engine when the
// datasource URL is unset, even for `generate`; any syntactically valid URL
// avoids that (nothing connects to it for generate/validate/diff).
import { spawnSync } from 'node:child_process';
import { createRequire } from 'node:module';

const require = createRequire(import.meta.url);
const cli = require.resolve('prisma/build/index.js');
const env = { ...process.env, PRISMA_HIDE_UPDATE_MESSAGE: '1', CHECKPOINT_DISABLE: '1' };
env.PATH = `${new URL('../node_modules/.bin', import.meta.url).pathname}:${env.PATH ?? ''}`;
// Empty counts as unset (`DATABASE_URL=` in a shell or an env file): Prisma
// treats an empty URL like a missing one and tries the download.
if (!env.DATABASE_URL) {
  const [command, sub] = process.argv.slice(2);
  if ((command === 'migrate' && sub !== 'diff') || command === 'db' || command === 'studio') {
    console.error(
      `DATABASE_URL is unset or empty: \`prisma ${[command, sub].filter(Boolean).join(' ')}\` needs the database to connect to (npm start applies migrations to its embedded Postgres by itself)`,
    );
    process.exit(1);
  }
  env.DATABASE_URL = 'postgresql://forkline@127.0.0.1:5432/forkline';
}
const r = spawnSync(process.execPath, [cli, ...process.argv.slice(2)], { stdio: 'inherit', env });
process.exit(r.status ?? 1);
