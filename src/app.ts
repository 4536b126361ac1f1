// Composition root: database, store, host services and the HTTP server (http/http-server.ts).
// Used by main.ts and by the tests (which start real servers through it).
import path from 'node:path';
import { DEFAULT_POOL_MAX, openDatabase, type Database, type QueryObserver } from './db/database.ts';
import { pgConfigFromUrl } from './db/pg-config.ts';
import { SessionStore } from './store/session-store.ts';
import { PgListener } from './store/pg-listener.ts';
import { Reclaimer } from './host/reclaimer.ts';
import { defaultImportsAtOnce, SessionController } from './host/controller.ts';
import { DEFAULT_MAX_ACTIVE_SESSIONS, defaultSlotsPerTenant, SessionHost } from './host/session-host.ts';
import { LiveEvents } from './host/live/live-events.ts';
import { LeaseStore } from './store/leases.ts';
import { RunnerProtocol } from './host/runner-protocol.ts';
import { ApiTokenStore } from './store/api-tokens.ts';
import { ApiTokens } from './host/api-tokens.ts';
import { startServer, type RunningServer } from './http/http-server.ts';
import { DEFAULT_LIMITS, statementTimeoutsOf, type SecurityOptions } from './http/security.ts';
import { ServiceMetrics } from './metrics.ts';
import { errorLogOf, type ErrorLog, type Logger } from './logger.ts';
import { databaseReadiness } from './db/readiness.ts';
import { expectedMigrations } from './db/migrate.ts';
import { ReadReplicas, standbyChecks } from './db/read-replicas.ts';
import { serveDashboard } from './dashboard-static.ts';
import type { Services } from './host/services.ts';
import { toolEffectOf } from './agent/tools.ts';
import { ToolCatalog } from './agent/tool-catalog.ts';
import type { ShellMode } from './agent/workspace-sandbox.ts';
import { DEFAULT_TENANT_WORKSPACES_MAX_BYTES, FileWorkspaces, type WorkspacesOptions } from './agent/file-workspace.ts';
import { DEFAULT_WORKSPACE_LIMITS, type WorkspaceLimits } from './core/file-tree.ts';
import { DEFAULT_MAX_NAMED_HASHES } from './store/file-blobs.ts';
import fs from 'node:fs';
import type { McpConfig } from './agent/mcp/mcp-config.ts';
import type { BudgetOptions } from './agent/context-budget.ts';
import { DEFAULT_MAX_TURN_MS } from './agent/session-runner.ts';
import { ModelRegistry } from './agent/models/registry.ts';
import type { ModelRetryPolicy } from './agent/models/model.ts';
import type { ProviderConfig } from './agent/models/providers.ts';
import type { TurnUpdate } from './agent/turn-updates.ts';
import type { ToolCall } from './core/events.ts';
import { EventEmitter } from 'node:events';
import type { Plugin } from 'graphql-yoga';
import type { LivenessOptions } from './http/ws-liveness.ts';
import { systemClock, type Clock } from './core/clock.ts';
import os from 'node:os';
import { randomUUID } from 'node:crypto';
import { GenAiTracing, type TracingOptions } from './telemetry/genai-tracing.ts';

export interface AppOptions {
  databaseUrl: string;
  /** A direct URL for what needs a session (LISTEN) when `databaseUrl` points at a transaction-mode pooler (DATABASE_DIRECT_URL). */
  directUrl?: string;
  /** Hot standbys for event pages, subscription catch-up and session lists (DATABASE_READ_URL). */
  readUrls?: string[];
  /** Connections this process uses besides its one LISTEN connection (DATABASE_POOL_MAX). */
  poolMax?: number;
  /** Recording imports this process runs at once, each on a pool connection (FORKLINE_MAX_IMPORTS_AT_ONCE; default: a quarter of poolMax). */
  importsAtOnce?: number;
  /** Recording imports one tenant may have running plus waiting for a slot (FORKLINE_MAX_IMPORTS_PER_TENANT; past it RATE_LIMITED). */
  importsPerTenant?: number;
  /** Hot statements are prepared per connection (DATABASE_PREPARED_STATEMENTS; off for old transaction-mode poolers). */
  preparedStatements?: boolean;
  /** The database is distributed by fork tree (DATABASE_DISTRIBUTED, e.g. Citus): every statement names its tree. */
  distributed?: boolean;
  /** How many events apart a session's fold is checkpointed (FORKLINE_FOLD_CHECKPOINT_EVENTS; default DEFAULT_FOLD_CHECKPOINT_EVENTS, 0: none). */
  foldCheckpointEvents?: number;
  /** What one page read of events holds of their data at most, plus one event (FORKLINE_PAGE_BYTES; default PAGE_BYTES). */
  pageBytes?: number;
  /** The most a fold checkpoint read back may hold decompressed (default MAX_FOLD_CHECKPOINT_TEXT_BYTES: a larger one is not restored). */
  foldCheckpointMaxBytes?: number;
  /** Brackets and answers a Session.totals read sums before it keeps a checkpoint (default TOTALS_CHECKPOINT_EVERY; tests keep them closer). */
  totalsCheckpointEvery?: number;
  /** What the agents' folds kept between turns may hold, in estimated heap bytes (FORKLINE_FOLD_CACHE_MAX_BYTES; default DEFAULT_FOLD_CACHE_BYTES). */
  foldCacheBytes?: number;
  /** Sessions this process runs at once (FORKLINE_MAX_ACTIVE_SESSIONS). */
  maxActiveSessions?: number;
  /** Of those, the most one tenant's sessions take (FORKLINE_MAX_ACTIVE_SESSIONS_PER_TENANT; unset: defaultSlotsPerTenant). */
  maxActiveSessionsPerTenant?: number;
  /** A turn running longer is stopped and ends `failed` (FORKLINE_MAX_TURN_MS; 0: no limit). */
  maxTurnMs?: number;
  /** How long a session's lease outlives its last renewal (a dead process's sessions wait this long). */
  leaseTtlMs?: number;
  /** The host's time: lease heartbeats, sweeps, turn limits, retry waits, WebSocket liveness (tests pass one they move); default: the system clock. */
  clock?: Clock;
  host?: string;
  port?: number;
  log?: ErrorLog;
  /** Structured logger (main.ts: pino); `log` writes to it when unset. */
  logger?: Logger;
  /** Authentication and limits (config.ts securityOptions); unset: local mode, default limits. */
  security?: SecurityOptions;
  /** Prometheus metrics served at /metrics; created when unset. */
  metrics?: ServiceMetrics;
  /** Observes every SQL statement the pool runs, with the rows it returned (tests and bench count them). */
  onQuery?: QueryObserver;
  defaultModel?: { provider: string; model: string };
  /** Provider endpoints and keys (agent/models/providers.ts; main: from the environment). */
  providers?: ProviderConfig;
  /** Where POST /recordings spools bodies (main: under the data directory). */
  uploadDir?: string;
  /** WebSocket ping interval and how long a silent socket lives (ws-liveness.ts; tests shorten them). */
  wsLiveness?: LivenessOptions;
  toolTimeoutMs?: number;
  /** The longest one schema compile or check may take the schema worker (mcp/schema-checks.ts SCHEMA_TIME_BOUND_MS; tests shorten it). */
  schemaTimeBoundMs?: number;
  /** MCP servers whose tools the agent may use (FORKLINE_MCP_CONFIG); unset: built-in tools only. */
  mcp?: McpConfig;
  /** JSON POST queries and mutations skip yoga's fetch layer (http/graphql/fast-lane.ts; FORKLINE_HTTP_FAST_LANE). */
  fastLane?: boolean;
  /** Extra yoga plugins (tests observe requests with them). */
  yogaPlugins?: Plugin[];
  /** Of those, plugins with request-level hooks that may miss the fast lane's requests (else the server refuses to start). */
  fastLaneAllowed?: Plugin[];
  maxSteps?: number;
  /** The context budget (FORKLINE_CONTEXT_TOKENS, FORKLINE_COMPACT_AT): the default window and when to compact. */
  budget?: BudgetOptions;
  /** How failed model calls are tried again (FORKLINE_MODEL_MAX_RETRIES); unset: DEFAULT_MODEL_RETRIES. */
  modelRetries?: ModelRetryPolicy;
  /** How often to look for sessions a dead process left (0: only at start). */
  sweepMs?: number;
  /** How often runnableSessions subscribers look for sessions whose external runner's lease expired (default 5 s). */
  runnableSweepMs?: number;
  /** A step an external runner holds open longer is ended at its next renewal (FORKLINE_RUNNER_MAX_STEP_MS; 0: no limit). */
  runnerMaxStepMs?: number;
  /** Deletions' reclaim (docs/contract.md#deletion): events per transaction (FORKLINE_DELETE_CHUNK_EVENTS), the wait between chunks (FORKLINE_DELETE_PAUSE_MS), how often to look for deletions nobody reclaims (FORKLINE_DELETE_SWEEP_MS). */
  reclaim?: { chunkEvents?: number; pauseMs?: number; sweepMs?: number };
  onToolRun?: (sessionId: string, call: ToolCall) => void;
  /** OpenTelemetry GenAI traces (main: tracingOptionsFromEnv); unset: off. */
  tracing?: TracingOptions;
  /** Where sessions' file workspaces are made (FORKLINE_WORKSPACES_DIR; main: under the data directory); unset: a new temporary directory. */
  workspacesDir?: string;
  /** Offer the `shell` tool (FORKLINE_SHELL; agent/shell-tool.ts); `true` is `on`: sandboxed or refused. */
  shell?: boolean | ShellMode;
  /** The bubblewrap binary the shell runs in (default: `bwrap` on PATH). */
  bwrap?: string;
  /** What each of a sandbox's /tmp and /dev/shm may hold (FORKLINE_SANDBOX_TMP_BYTES; agent/workspace-sandbox.ts). */
  sandboxTmpBytes?: number;
  /** Built-in tools whose calls need approval in every session (FORKLINE_APPROVAL_TOOLS); an unknown name fails the start. */
  approvalTools?: readonly string[];
  /** Per-session file workspace quota (FORKLINE_WORKSPACE_MAX_BYTES, FORKLINE_WORKSPACE_MAX_FILES). */
  workspaceLimits?: Partial<WorkspaceLimits>;
  /** Distinct file contents one recording or runner batch may name without carrying them (FORKLINE_MAX_NAMED_FILE_HASHES). */
  maxNamedFileHashes?: number;
  /** Bytes of one tenant's workspaces on this process's disk (FORKLINE_TENANT_WORKSPACES_MAX_BYTES). */
  tenantWorkspacesMaxBytes?: number;
  /** How workspace files are written (tests put a failing disk here): `bytes` into the new file `file` at `abs`; default file.writeFile. */
  workspaceWriteBytes?: WorkspacesOptions['writeBytes'];
}

export interface App {
  url: string;
  db: Database;
  services: Services;
  models: ModelRegistry;
  /**
   * Turn updates of the agents this process runs, by session id, as they
   * happen (tests and embedders observe them here; sessionTurns subscribers get
   * every process's updates through live-events.ts, not from this emitter).
   */
  turnUpdates: EventEmitter;
  server: RunningServer;
  metrics: ServiceMetrics;
  /** The hot standbys, when DATABASE_READ_URL names some. */
  standbys?: ReadReplicas;
  /** The trace exporter, when tracing is on (tests flush it). */
  tracing?: GenAiTracing;
  /** Reclaims what deletions leave (tests wait on it). */
  reclaimer: Reclaimer;
  /**
   * The start-up check of stored change sets, which reads the Event table in
   * the background after start: settled once it ran (never rejects). Tests
   * that count statements wait for it, so they count only their own.
   */
  startupChecks: Promise<void>;
  close(): Promise<void>;
}

export async function createApp(opts: AppOptions): Promise<App> {
  const log = opts.log ?? (opts.logger ? errorLogOf(opts.logger) : (m: string, e?: unknown) => console.error(m, e ?? ''));
  const metrics = opts.metrics ?? new ServiceMetrics();
  let closing = false;
  const statementTimeouts = opts.security?.statementBounds === false ? undefined : statementTimeoutsOf(opts.security ?? {});
  const db = openDatabase(opts.databaseUrl, { onQuery: opts.onQuery, max: opts.poolMax, statementTimeouts });
  const migrations = expectedMigrations();
  const listener = new PgListener(pgConfigFromUrl(opts.directUrl ?? opts.databaseUrl));
  await listener.start();
  const prepare = opts.preparedStatements ?? true;
  const standbys = opts.readUrls?.length
    ? new ReadReplicas(opts.readUrls, db.pool, { max: opts.poolMax, onPoll: (s) => metrics.observeStandbys(s), statementTimeouts })
    : undefined;
  await standbys?.start();
  const limits: WorkspaceLimits = {
    ...DEFAULT_WORKSPACE_LIMITS,
    ...Object.fromEntries(Object.entries(opts.workspaceLimits ?? {}).filter(([, v]) => v !== undefined)),
  };
  const fileLimits = { ...limits, maxNamedHashes: opts.maxNamedFileHashes ?? DEFAULT_MAX_NAMED_HASHES };
  const store = new SessionStore(db.pool, toolEffectOf, {
    prepare,
    log,
    standbys,
    onStandbyRead: (served, read) => metrics.standbyReads.inc({ served, read }),
    byTree: opts.distributed,
    fileLimits,
    foldCheckpointMaxBytes: opts.foldCheckpointMaxBytes,
    totalsCheckpointEvery: opts.totalsCheckpointEvery,
    pageBytes: opts.pageBytes,
    reclaimChunkEvents: opts.reclaim?.chunkEvents,
  });
  const leases = new LeaseStore(db.pool, `${os.hostname()}:${process.pid}:${randomUUID().slice(0, 8)}`, opts.leaseTtlMs, {
    prepare,
    trees: store.trees,
    reserved: listener,
  });
  const turnUpdates = new EventEmitter().setMaxListeners(0);
  /** A turn update from whoever wrote its events (the agent, a runner's append, a decision): to every process's sessionTurns subscribers. */
  const publishTurnUpdate = (u: TurnUpdate) => {
    turnUpdates.emit(u.sessionId, u);
    live.publishTurnUpdate(u);
    metrics.observeTurnUpdate(u);
  };
  const tracing = opts.tracing ? new GenAiTracing({ log, ...opts.tracing }) : undefined;
  const clock = opts.clock ?? systemClock;
  const live = new LiveEvents(store, listener, { log });
  const defaultModel = opts.defaultModel ?? { provider: 'scripted', model: 'scripted' };
  const models = new ModelRegistry({ ...opts.providers, defaultModel, retries: opts.modelRetries });
  const tools = new ToolCatalog(opts.mcp, log, {
    shell: opts.shell === true ? 'on' : opts.shell || 'off',
    bwrap: opts.bwrap,
    sandboxTmpBytes: opts.sandboxTmpBytes,
    approvalTools: opts.approvalTools,
    toolTimeoutMs: opts.toolTimeoutMs,
    workspaceLimits: limits,
    schemaTimeBoundMs: opts.schemaTimeBoundMs,
  });
  // Without a configured directory (tests, embedders): a temporary one, removed at close.
  const temporaryWorkspaces = opts.workspacesDir ? undefined : fs.mkdtempSync(path.join(os.tmpdir(), 'forkline-workspaces-'));
  const workspaces = new FileWorkspaces(opts.workspacesDir ?? temporaryWorkspaces!, store.files, store.log, limits, {
    tenantOf: (id) => store.sessions.tenantOf(id),
    tenantMaxBytes: opts.tenantWorkspacesMaxBytes ?? DEFAULT_TENANT_WORKSPACES_MAX_BYTES,
    log,
    writeBytes: opts.workspaceWriteBytes,
  });
  const host = new SessionHost(
    store,
    leases,
    {
      resolveModel: (p) => models.resolve(p),
      defaultModel,
      tools,
      toolTimeoutMs: opts.toolTimeoutMs ?? 30_000,
      maxSteps: opts.maxSteps ?? 16,
      maxTurnMs: opts.maxTurnMs ?? DEFAULT_MAX_TURN_MS,
      budget: opts.budget,
      clock,
      now: () => new Date(clock.now()),
      onUpdate: publishTurnUpdate,
      onToolRun: opts.onToolRun,
      observer: tracing,
      workspaces,
    },
    {
      listener,
      sweepMs: opts.sweepMs,
      clock,
      maxActive: opts.maxActiveSessions,
      foldCheckpointEvents: opts.foldCheckpointEvents,
      foldCacheBytes: opts.foldCacheBytes,
      maxActivePerTenant:
        opts.maxActiveSessionsPerTenant ??
        defaultSlotsPerTenant(opts.maxActiveSessions ?? DEFAULT_MAX_ACTIVE_SESSIONS, new Set(opts.security?.apiTokens?.values()).size),
      log,
    },
  );
  const runners = new RunnerProtocol({
    store,
    tools,
    publish: publishTurnUpdate,
    sessionsChanged: (scope) => live.sessionsChanged(scope),
    sweepMs: opts.runnableSweepMs,
    maxStepMs: opts.runnerMaxStepMs,
    clock,
    prepare,
    compaction: { resolveModel: (p) => models.resolve(p), defaultModel, budget: opts.budget },
    foldCacheBytes: opts.foldCacheBytes,
    log,
  });
  const controller = new SessionController(
    store,
    host,
    models,
    tools,
    runners,
    publishTurnUpdate,
    opts.importsAtOnce ?? defaultImportsAtOnce(opts.poolMax ?? DEFAULT_POOL_MAX),
    opts.importsPerTenant,
  );
  const pruning = setInterval(() => void controller.forgetOldIdempotencyKeys().catch((err) => log('pruning idempotency keys failed', err)), 60 * 60 * 1000);
  pruning.unref();
  const maxApiTokens = opts.security?.maxApiTokensPerTenant ?? DEFAULT_LIMITS.apiTokensPerTenant;
  const apiTokens = new ApiTokens(new ApiTokenStore(db.pool), { log, maxLivePerTenant: maxApiTokens === false ? undefined : maxApiTokens });
  await apiTokens.start();
  const services: Services = { store, controller, host, live, tools, models: { offers: () => models.offers(), defaultModel }, apiTokens, runners };
  await host.start();
  const reclaimer = new Reclaimer(store.reclaim, { listener, pauseMs: opts.reclaim?.pauseMs, sweepMs: opts.reclaim?.sweepMs, log });
  reclaimer.start();
  // Change sets stored before every door held paths to one rule: reported, never made on disk (agent/file-workspace.ts refuses them).
  const changeSetAudit = store.files
    .refusedChangeSets()
    .then((found) => {
      if (found.length === 0) return;
      const sessionIds = [...new Set(found.map((f) => f.sessionId))];
      const msg = `${found.length} stored file change set(s) name paths the file tools refuse; their files will not be made on disk (sessions ${sessionIds.join(', ')}): ${found[0].problem}`;
      if (opts.logger) opts.logger.warn({ sessionIds, changeSets: found.slice(0, 20) }, msg);
      else log(msg);
    })
    .catch((err) => log('checking stored file change sets failed', err));
  const server = await startServer({
    services,
    host: opts.host ?? '127.0.0.1',
    port: opts.port ?? 0,
    log,
    security: opts.security,
    metrics,
    readiness: async () => {
      if (closing) return { ready: false, checks: { process: 'stopping' } };
      const report = await databaseReadiness(db.pool, migrations);
      // A standby that lags or is down costs latency, not readiness: shown, not counted.
      return standbys ? { ...report, checks: { ...report.checks, ...standbyChecks(standbys.statuses()) } } : report;
    },
    onOtherRequest: serveDashboard(),
    uploadDir: opts.uploadDir ?? path.join(os.tmpdir(), 'forkline-uploads'),
    wsLiveness: { clock, ...opts.wsLiveness },
    fastLane: opts.fastLane,
    plugins: opts.yogaPlugins,
    fastLaneAllowed: opts.fastLaneAllowed,
  });
  return {
    url: server.url,
    db,
    services,
    models,
    turnUpdates,
    server,
    metrics,
    tracing,
    standbys,
    reclaimer,
    startupChecks: changeSetAudit,
    async close() {
      closing = true;
      clearInterval(pruning);
      await server.close();
      await apiTokens.stop();
      await host.stop();
      await reclaimer.stop(); // after the chunk in progress: the rest is left in Postgres for the next process
      await changeSetAudit;
      await tools.close(); // after the host: no call is running
      if (temporaryWorkspaces) fs.rmSync(temporaryWorkspaces, { recursive: true, force: true });
      await tracing?.shutdown(); // after the host: turns it closed as interrupted are exported
      await live.close();
      await store.notifications.close(); // what was committed is announced (one attempt each)
      await listener.close();
      await standbys?.close();
      await db.close();
    },
  };
}
