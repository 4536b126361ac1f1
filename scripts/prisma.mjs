#!/usr/bin/env node
// Runs the Prisma CLI offline. Prisma 6 downloads a query engine when the
// datasource URL is unset, even for `generate`; any syntactically valid URL
// avoids that (nothing connects to it for generate/diff).
import { spawnSync } from 'node:child_process';
import { createRequire } from 'node:module';

const require = createRequire(import.meta.url);
const cli = require.resolve('prisma/build/index.js');
const env = { ...process.env, PRISMA_HIDE_UPDATE_MESSAGE: '1', CHECKPOINT_DISABLE: '1' };
env.PATH = `${new URL('../node_modules/.bin', import.meta.url).pathname}:${env.PATH ?? ''}`;
env.DATABASE_URL ??= 'postgresql://forkline@127.0.0.1:5432/forkline';
const r = spawnSync(process.execPath, [cli, ...process.argv.slice(2)], { stdio: 'inherit', env });
process.exit(r.status ?? 1);
