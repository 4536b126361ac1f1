// `npm start`: embedded Postgres under .data/ unless DATABASE_URL is set,
// migrations, then GraphQL + GraphiQL at http://HOST:PORT/graphql.
import path from 'node:path';
import { loadConfig } from './config.ts';
import { startEmbeddedPostgres, type EmbeddedDatabase } from './db/embedded.ts';
import { ensureDatabase, migrate } from './db/migrate.ts';
import { createApp, type App } from './app.ts';

async function main() {
  const config = loadConfig();
  let embedded: EmbeddedDatabase | undefined;
  let databaseUrl = config.DATABASE_URL;
  if (!databaseUrl) {
    const dir = path.resolve(config.FORKLINE_DATA_DIR, 'pg');
    console.log(`starting embedded Postgres in ${dir}`);
    embedded = await startEmbeddedPostgres(dir);
    databaseUrl = `${embedded.serverUrl}/forkline`;
  }
  let app: App | undefined;
  let stopping = false;
  const stop = async (signal: string) => {
    if (stopping) return;
    stopping = true;
    console.log(`${signal}: shutting down`);
    const force = setTimeout(() => process.exit(1), 15_000);
    force.unref();
    try {
      await app?.close();
    } finally {
      await embedded?.stop();
      process.exit(0);
    }
  };
  process.on('SIGINT', () => void stop('SIGINT'));
  process.on('SIGTERM', () => void stop('SIGTERM'));
  try {
    await ensureDatabase(databaseUrl);
    await migrate(databaseUrl);
    app = await createApp({
      databaseUrl,
      host: config.HOST,
      port: config.PORT,
      defaultModel: { provider: config.MODEL_PROVIDER, model: config.MODEL ?? config.MODEL_PROVIDER },
      openai: { baseUrl: config.OPENAI_BASE_URL, apiKey: config.OPENAI_API_KEY, model: config.MODEL },
      sandboxRoot: path.resolve(config.FORKLINE_DATA_DIR, 'sandbox'),
      sweepMs: 5000,
    });
  } catch (err) {
    await embedded?.stop();
    throw err;
  }
  console.log(`forkline is serving GraphQL and GraphiQL at ${app.url}`);
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
