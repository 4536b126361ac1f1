// Prisma CLI configuration. Prisma 6.19 with the JS engine and the 7.x pg
// adapter is the combination that runs offline (see TOOLCHAIN.md); discrete
// connection fields keep the shadow database from pointing at the main one.
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
