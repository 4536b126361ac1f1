// `npm start`: embedded Postgres under .data/ unless DATABASE_URL is set,
// migrations, then GraphQL + GraphiQL at http://HOST:PORT/graphql.
import path from 'node:path';
import { defaultModelOf, livenessOptions, loadConfig, providersOf, securityOptions } from './config.ts';
import { DEFAULT_MODEL_RETRIES } from './agent/models/model.ts';
import { ModelCatalog, readModelsFile } from './agent/models/model-catalog.ts';
import { createLogger, type Logger } from './logger.ts';
import { assertSafeBinding } from './http/security.ts';
import { startEmbeddedPostgres, type EmbeddedDatabase } from './db/embedded.ts';
import { ensureDatabase, migrate } from './db/migrate.ts';
import { createApp, type App } from './app.ts';
import { loadMcpConfig } from './agent/mcp/mcp-config.ts';
import { defaultWorkspacesDir, prepareWorkspacesDir } from './agent/workspaces-dir.ts';
import { tracingOptionsFromEnv } from './telemetry/genai-tracing.ts';

/** SIGTERM to exit: well inside the 10 s an orchestrator usually allows. */
const SHUTDOWN_DEADLINE_MS = 9_000;

let logger: Logger = createLogger(); // until the configuration names a level

async function main() {
  const config = loadConfig();
  logger = createLogger(config.LOG_LEVEL);
  const security = securityOptions(config);
  assertSafeBinding(config.HOST, security); // before anything starts
  let embedded: EmbeddedDatabase | undefined;
  let databaseUrl = config.DATABASE_URL;
  if (!databaseUrl) {
    const dir = path.resolve(config.FORKLINE_DATA_DIR, 'pg');
    logger.info({ dir }, 'starting embedded Postgres');
    embedded = await startEmbeddedPostgres(dir);
    databaseUrl = `${embedded.serverUrl}/forkline`;
  }
  const workspacesDir = path.resolve(config.FORKLINE_WORKSPACES_DIR ?? defaultWorkspacesDir(config.FORKLINE_DATA_DIR));
  prepareWorkspacesDir(workspacesDir, {
    formerDefault: path.join(config.FORKLINE_DATA_DIR, 'workspaces'),
    log: (msg) => logger.warn({ dir: workspacesDir }, msg),
  });
  let app: App | undefined;
  let stopping = false;
  const stop = async (signal: string) => {
    if (stopping) return;
    stopping = true;
    logger.info({ signal }, 'shutting down');
    const started = Date.now();
    const force = setTimeout(() => {
      logger.error({ signal }, `shutdown did not finish in ${SHUTDOWN_DEADLINE_MS} ms; exiting`);
      process.exit(1);
    }, SHUTDOWN_DEADLINE_MS);
    force.unref();
    let code = 0;
    try {
      // Stops accepting, closes subscriptions, closes running turns as interrupted, releases leases.
      await app?.close();
    } catch (err) {
      code = 1;
      logger.error({ err }, 'shutdown failed');
    } finally {
      await embedded?.stop().catch((err: unknown) => logger.error({ err }, 'embedded Postgres did not stop'));
      logger.info({ ms: Date.now() - started }, 'stopped');
      process.exit(code);
    }
  };
  process.on('SIGINT', () => void stop('SIGINT'));
  process.on('SIGTERM', () => void stop('SIGTERM'));
  // Behind a transaction-mode pooler, what needs a session of its own (the
  // migrations' advisory lock, LISTEN) goes to Postgres directly.
  const directUrl = config.DATABASE_DIRECT_URL ?? config.DATABASE_LISTEN_URL ?? databaseUrl;
  try {
    await ensureDatabase(directUrl);
    await migrate(directUrl);
    app = await createApp({
      databaseUrl,
      directUrl,
      readUrls: config.DATABASE_READ_URL,
      poolMax: config.DATABASE_POOL_MAX,
      importsAtOnce: config.FORKLINE_MAX_IMPORTS_AT_ONCE,
      importsPerTenant: config.FORKLINE_MAX_IMPORTS_PER_TENANT,
      preparedStatements: config.DATABASE_PREPARED_STATEMENTS,
      distributed: config.DATABASE_DISTRIBUTED,
      fastLane: config.FORKLINE_HTTP_FAST_LANE,
      maxActiveSessions: config.FORKLINE_MAX_ACTIVE_SESSIONS,
      maxActiveSessionsPerTenant: config.FORKLINE_MAX_ACTIVE_SESSIONS_PER_TENANT,
      foldCheckpointEvents: config.FORKLINE_FOLD_CHECKPOINT_EVENTS,
      foldCacheBytes: config.FORKLINE_FOLD_CACHE_MAX_BYTES,
      pageBytes: config.FORKLINE_PAGE_BYTES,
      reclaim: { chunkEvents: config.FORKLINE_DELETE_CHUNK_EVENTS, pauseMs: config.FORKLINE_DELETE_PAUSE_MS, sweepMs: config.FORKLINE_DELETE_SWEEP_MS },
      maxTurnMs: config.FORKLINE_MAX_TURN_MS,
      runnerMaxStepMs: config.FORKLINE_RUNNER_MAX_STEP_MS,
      budget: {
        defaultContextTokens: config.FORKLINE_CONTEXT_TOKENS,
        compactAt: config.FORKLINE_COMPACT_AT,
        models: new ModelCatalog(config.FORKLINE_MODELS_CONFIG ? readModelsFile(config.FORKLINE_MODELS_CONFIG) : {}),
      },
      modelRetries: { ...DEFAULT_MODEL_RETRIES, maxRetries: config.FORKLINE_MODEL_MAX_RETRIES },
      leaseTtlMs: config.FORKLINE_LEASE_TTL_MS,
      logger,
      security,
      wsLiveness: livenessOptions(config),
      host: config.HOST,
      port: config.PORT,
      defaultModel: defaultModelOf(config),
      providers: providersOf(config),
      mcp: config.FORKLINE_MCP_CONFIG ? loadMcpConfig(path.resolve(config.FORKLINE_MCP_CONFIG)) : undefined,
      uploadDir: path.resolve(config.FORKLINE_DATA_DIR, 'uploads'),
      workspacesDir,
      shell: config.FORKLINE_SHELL,
      sandboxTmpBytes: config.FORKLINE_SANDBOX_TMP_BYTES,
      approvalTools: config.FORKLINE_APPROVAL_TOOLS,
      workspaceLimits: { maxBytes: config.FORKLINE_WORKSPACE_MAX_BYTES, maxFiles: config.FORKLINE_WORKSPACE_MAX_FILES },
      maxNamedFileHashes: config.FORKLINE_MAX_NAMED_FILE_HASHES,
      tenantWorkspacesMaxBytes: config.FORKLINE_TENANT_WORKSPACES_MAX_BYTES,
      sweepMs: 2000,
      tracing: tracingOptionsFromEnv(process.env),
    });
  } catch (err) {
    await embedded?.stop();
    throw err;
  }
  logger.info(
    { url: app.url, auth: security.apiTokens || app.services.apiTokens.inUse ? 'tokens' : 'local', tenants: new Set(security.apiTokens?.values()).size },
    `forkline is serving GraphQL and GraphiQL at ${app.url} (dashboard at /)`,
  );
}

main().catch((err) => {
  logger.fatal({ err }, err instanceof Error ? err.message : String(err));
  process.exit(1);
});
