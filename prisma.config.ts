// Prisma CLI configuration (generate, migrate diff, migrate status). Prisma
// 6.19 with the JS engine and its pg adapter runs offline; discrete connection
// fields keep a shadow database from pointing at the main one.
//
// Every Prisma package is on 6.19 (ARCHITECTURE.md, Database tooling): the
// Prisma 7 CLI downloads a native schema engine for every command, so it does
// not run offline. With the 6.19 adapter `prisma migrate deploy` fails ("Column
// type 'name' could not be deserialized", prisma/orm#27403): forkline applies
// the migrations itself (src/db/migrate.ts) and records them in Prisma's
// `_prisma_migrations` as deploy does; `prisma migrate status` reads them.
import { defineConfig } from 'prisma/config';
import { PrismaPg } from '@prisma/adapter-pg';
import { pgConfigFromUrl } from './src/db/pg-config.ts';

export default defineConfig({
  engine: 'js',
  experimental: { adapter: true },
  schema: 'prisma/schema.prisma',
  migrations: { path: 'prisma/migrations' },
  adapter: async () => new PrismaPg({ ...pgConfigFromUrl(process.env.DATABASE_URL ?? ''), allowExitOnIdle: true }),
});
