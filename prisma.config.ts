// Prisma CLI configuration. Prisma 6.19 with the JS engine and the 7.x pg
// adapter is the combination that runs offline; discrete connection fields
// keep the shadow database from pointing at the main one.
//
// Two majors on purpose (`prisma`/`@prisma/client` 6.19, `@prisma/adapter-pg`
// 7.10), and they cannot be one here: the Prisma 7 CLI downloads a native
// schema engine for every command (even `--version`), so it does not run
// offline; the 6.19 adapter fails `migrate deploy` with "Column type 'name'
// could not be deserialized" (prisma/orm#27403), which 7.10 maps. Align them
// once the 7.x CLI runs without a download. (ARCHITECTURE.md, Database tooling.)
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
