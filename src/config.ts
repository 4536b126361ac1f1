// Environment configuration (docs/operations.md), parsed once with zod.
import { z } from 'zod';
import { DEFAULT_LIMITS, DEFAULT_STATEMENT_TIMEOUTS, type SecurityOptions } from './http/security.ts';
import { DEFAULT_TIMEOUTS } from './http/connection-timeouts.ts';
import { DEFAULT_LIVENESS, type LivenessOptions } from './http/ws-liveness.ts';
import { approvalToolsProblem } from './agent/tool-catalog.ts';
import { DEFAULT_PROVIDER_LIMITS } from './agent/models/provider-fetch.ts';
import { MAX_STEP_CALLS } from './core/log-state.ts';
import { MAX_JSON_VALUES } from './core/storable.ts';

const flag = z
  .enum(['0', '1', 'true', 'false'])
  .optional()
  .transform((v) => v === '1' || v === 'true');

/** A statement bound (ms): 0 (none) or at least 100. */
const statementTimeout = (fallback: number) =>
  z.coerce
    .number()
    .int()
    .refine((v) => v === 0 || v >= 100, 'must be 0 (no bound) or at least 100')
    .default(fallback);

const TENANT = /^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$/;
export const MIN_TOKEN_LENGTH = 16;

/** `token=tenant,token2=tenant2` → token → tenant (unset or empty: local single-tenant mode). */
function parseApiTokens(value: string | undefined, ctx: z.RefinementCtx): Map<string, string> | undefined {
  if (value === undefined || value.trim() === '') return undefined;
  const tokens = new Map<string, string>();
  for (const entry of value
    .split(',')
    .map((e) => e.trim())
    .filter(Boolean)) {
    const eq = entry.lastIndexOf('=');
    const token = entry.slice(0, eq).trim();
    const tenant = entry.slice(eq + 1).trim();
    const problem =
      eq < 0
        ? 'an entry is not token=tenant'
        : token.length < MIN_TOKEN_LENGTH
          ? `a token is shorter than ${MIN_TOKEN_LENGTH} characters`
          : // An HTTP header carries only visible ASCII (Node reads other bytes as Latin-1): a token beyond it
            // would work over graphql-ws's connectionParams and never in an Authorization header.
            !/^[\x21-\x7e]+$/.test(token)
            ? 'a token holds whitespace or a character outside visible ASCII'
            : !TENANT.test(tenant)
              ? `tenant "${tenant}" is not 1-64 of [A-Za-z0-9._-]`
              : tokens.has(token) && tokens.get(token) !== tenant
                ? 'a token is listed for two tenants'
                : undefined;
    if (problem) {
      ctx.addIssue({ code: 'custom', message: `${problem} (expected "token=tenant,token2=tenant2")` });
      return z.NEVER;
    }
    tokens.set(token, tenant);
  }
  return tokens.size ? tokens : undefined;
}

const envSchema = z
  .object({
    PORT: z.coerce.number().int().min(0).max(65535).default(4000),
    HOST: z.string().min(1).default('127.0.0.1'),
    DATABASE_URL: z.string().url().optional(),
    /** A direct connection (LISTEN, migrations, anything session-scoped) when DATABASE_URL is a transaction-mode pooler. */
    DATABASE_DIRECT_URL: z.string().url().optional(),
    /** Hot standbys for event pages, subscription catch-up and session lists: one URL or several, comma-separated. */
    DATABASE_READ_URL: z
      .string()
      .optional()
      .transform(
        (v) =>
          v
            ?.split(',')
            .map((u) => u.trim())
            .filter(Boolean) ?? [],
      )
      .pipe(z.array(z.string().url())),
    /** The older name of DATABASE_DIRECT_URL. */
    DATABASE_LISTEN_URL: z.string().url().optional(),
    DATABASE_POOL_MAX: z.coerce.number().int().min(2).max(1000).default(10),
    /** Unset: a quarter of DATABASE_POOL_MAX (host/controller.ts defaultImportsAtOnce). */
    FORKLINE_MAX_IMPORTS_AT_ONCE: z.coerce.number().int().min(1).max(1000).optional(),
    /** Imports one tenant may have running plus waiting for a slot. Unset: host/import-slots.ts DEFAULT_IMPORTS_PER_TENANT. */
    FORKLINE_MAX_IMPORTS_PER_TENANT: z.coerce.number().int().min(1).max(10000).optional(),
    DATABASE_PREPARED_STATEMENTS: z
      .enum(['0', '1', 'true', 'false'])
      .default('true')
      .transform((v) => v === '1' || v === 'true'),
    DATABASE_DISTRIBUTED: z
      .enum(['0', '1', 'true', 'false'])
      .default('false')
      .transform((v) => v === '1' || v === 'true'),
    FORKLINE_MAX_ACTIVE_SESSIONS: z.coerce.number().int().min(1).optional(),
    FORKLINE_MAX_ACTIVE_SESSIONS_PER_TENANT: z.coerce.number().int().min(1).optional(),
    // How many events apart the agent keeps a checkpoint of a session's fold (docs/long-sessions.md "Cold starts"; 0: none).
    FORKLINE_FOLD_CHECKPOINT_EVENTS: z.coerce.number().int().min(0).max(100_000_000).optional(),
    FORKLINE_PAGE_BYTES: z.coerce
      .number()
      .int()
      .min(1024)
      .max(2 ** 31 - 1)
      .optional(),
    // Deletions' reclaim (docs/operations.md "Deletion"): events per transaction, the wait between chunks, how often to look for work left.
    FORKLINE_DELETE_CHUNK_EVENTS: z.coerce.number().int().min(1).max(1_000_000).optional(),
    FORKLINE_DELETE_PAUSE_MS: z.coerce.number().int().min(0).max(60_000).optional(),
    FORKLINE_DELETE_SWEEP_MS: z.coerce.number().int().min(1000).max(86_400_000).optional(),
    // What the agents' folds kept between turns may hold, in estimated heap bytes (docs/operations.md).
    FORKLINE_FOLD_CACHE_MAX_BYTES: z.coerce.number().int().min(1).optional(),
    // At most what a Node timer can wait (about 24.8 days).
    FORKLINE_MAX_TURN_MS: z.coerce
      .number()
      .int()
      .max(2 ** 31 - 1)
      .refine((v) => v === 0 || v >= 1000, 'must be 0 (no limit) or at least 1000')
      .optional(),
    // How long an external runner may hold a step open (docs/runners.md "When the lease ends"); 0: no limit.
    FORKLINE_RUNNER_MAX_STEP_MS: z.coerce
      .number()
      .int()
      .refine((v) => v === 0 || v >= 1000, 'must be 0 (no limit) or at least 1000')
      .optional(),
    // The context budget (docs/agents.md "Compaction"): the window of a model with none known, and when to compact.
    FORKLINE_CONTEXT_TOKENS: z.coerce.number().int().min(256).max(100_000_000).optional(),
    FORKLINE_COMPACT_AT: z.coerce.number().gt(0).max(1).optional(),
    // Model calls that fail with a 429, a 5xx, a timeout or a lost connection are tried again (docs/agents.md "Retries").
    /** A JSON file of models' context windows and prices over the shipped table (agent/models/model-catalog.ts). */
    FORKLINE_MODELS_CONFIG: z.string().optional(),
    FORKLINE_MODEL_MAX_RETRIES: z.coerce.number().int().min(0).max(10).default(2),
    // What one model call's response may cost the process (agent/models/provider-fetch.ts): its bytes, its silences.
    FORKLINE_MODEL_MAX_RESPONSE_BYTES: z.coerce.number().int().min(65_536).default(DEFAULT_PROVIDER_LIMITS.maxResponseBytes),
    FORKLINE_MODEL_IDLE_TIMEOUT_MS: z.coerce.number().int().min(1000).default(DEFAULT_PROVIDER_LIMITS.idleTimeoutMs),
    FORKLINE_MODEL_CALL_TIMEOUT_MS: z.coerce.number().int().min(1000).default(DEFAULT_PROVIDER_LIMITS.callTimeoutMs),
    FORKLINE_MODEL_MAX_TOOL_CALLS: z.coerce.number().int().min(1).max(MAX_STEP_CALLS).default(DEFAULT_PROVIDER_LIMITS.maxToolCalls),
    FORKLINE_LEASE_TTL_MS: z.coerce.number().int().min(500).max(600_000).default(10_000),
    FORKLINE_DATA_DIR: z.string().default('.data'),
    /** Where the sessions' file workspaces are made on this process (default: <FORKLINE_DATA_DIR>/workspaces). */
    FORKLINE_WORKSPACES_DIR: z.string().optional(),
    FORKLINE_WORKSPACE_MAX_BYTES: z.coerce.number().int().min(1).optional(),
    FORKLINE_WORKSPACE_MAX_FILES: z.coerce.number().int().min(1).optional(),
    /** Distinct file contents one recording or runner batch may name without carrying them (docs/files.md "Limits"). */
    FORKLINE_MAX_NAMED_FILE_HASHES: z.coerce.number().int().min(1).optional(),
    /** Bytes of one tenant's workspaces on this process's disk (docs/files.md "Limits"). */
    FORKLINE_TENANT_WORKSPACES_MAX_BYTES: z.coerce.number().int().min(1).optional(),
    /** `on`: offer the `shell` tool, run in a bubblewrap sandbox (refused where none can be made); `unsandboxed`: run as this OS user with no sandbox. */
    FORKLINE_SHELL: z.enum(['on', 'off', 'unsandboxed']).default('off'),
    /** What each of a sandbox's /tmp and /dev/shm may hold, in bytes (memory: a tmpfs; docs/operations.md "Threat model"). */
    FORKLINE_SANDBOX_TMP_BYTES: z.coerce.number().int().min(1_048_576).optional(),
    FORKLINE_HTTP_FAST_LANE: z
      .enum(['0', '1', 'true', 'false'])
      .default('true')
      .transform((v) => v === '1' || v === 'true'),
    // Models (docs/agents.md "Models"): the default provider and model, each provider's key and endpoint.
    MODEL_PROVIDER: z.enum(['scripted', 'openai', 'openai-responses', 'anthropic', 'google', 'openai-compatible']).default('scripted'),
    MODEL: z.string().optional(),
    OPENAI_BASE_URL: z.string().url().default('https://api.openai.com/v1'),
    OPENAI_API_KEY: z.string().optional(),
    ANTHROPIC_BASE_URL: z.string().url().optional(),
    ANTHROPIC_API_KEY: z.string().optional(),
    GOOGLE_BASE_URL: z.string().url().optional(),
    GOOGLE_GENERATIVE_AI_API_KEY: z.string().optional(),
    OPENAI_COMPATIBLE_BASE_URL: z.string().url().optional(),
    OPENAI_COMPATIBLE_API_KEY: z.string().optional(),
    /** A JSON file of MCP servers (`{"mcpServers": {...}}`) whose tools the agent may use. */
    FORKLINE_MCP_CONFIG: z.string().optional(),
    /** Built-in tools whose calls need approval in every session, comma-separated (docs/agents.md "Tool approval"). */
    FORKLINE_APPROVAL_TOOLS: z
      .string()
      .optional()
      .transform((v, ctx) => {
        const names = (v ?? '')
          .split(',')
          .map((n) => n.trim())
          .filter(Boolean);
        const problem = approvalToolsProblem(names);
        if (problem) ctx.addIssue({ code: 'custom', message: problem });
        return names;
      }),
    // Security and operations (docs/operations.md).
    FORKLINE_API_TOKENS: z
      .string()
      .optional()
      .transform((v, ctx) => parseApiTokens(v, ctx)),
    FORKLINE_ALLOW_INSECURE: flag,
    FORKLINE_CORS_ORIGINS: z
      .string()
      .optional()
      .transform(
        (v) =>
          v
            ?.split(',')
            .map((o) => o.trim())
            .filter(Boolean) ?? [],
      ),
    FORKLINE_MAX_BODY_BYTES: z.coerce.number().int().min(1024).default(DEFAULT_LIMITS.maxBodyBytes),
    FORKLINE_MAX_QUERY_TOKENS: z.coerce.number().int().min(100).default(DEFAULT_LIMITS.maxTokens),
    FORKLINE_MAX_QUERY_DEPTH: z.coerce.number().int().min(1).default(DEFAULT_LIMITS.maxDepth),
    FORKLINE_MAX_ALIASES: z.coerce.number().int().min(0).default(DEFAULT_LIMITS.maxAliases),
    FORKLINE_MAX_QUERY_COST: z.coerce.number().int().min(1).default(DEFAULT_LIMITS.maxCost),
    FORKLINE_MAX_RESPONSE_BYTES: z.coerce.number().int().min(1024).default(DEFAULT_LIMITS.maxResponseBytes),
    FORKLINE_MAX_REQUEST_MESSAGES: z.coerce.number().int().min(1).default(DEFAULT_LIMITS.maxRequestMessages),
    FORKLINE_MAX_REQUEST_VALUES: z.coerce.number().int().min(100).max(MAX_JSON_VALUES).default(DEFAULT_LIMITS.maxRequestValues),
    FORKLINE_MAX_REQUEST_KEYS: z.coerce.number().int().min(100).default(DEFAULT_LIMITS.maxRequestKeys),
    FORKLINE_MAX_HELD_REQUEST_CHARS: z.coerce.number().int().min(1024).default(DEFAULT_LIMITS.maxHeldRequestChars),
    FORKLINE_MAX_RECORDING_BYTES: z.coerce.number().int().min(1024).default(DEFAULT_LIMITS.maxRecordingBytes),
    FORKLINE_MAX_RECORDING_LINE_BYTES: z.coerce.number().int().min(1024).default(DEFAULT_LIMITS.maxRecordingLineBytes),
    FORKLINE_MAX_RECORDING_CONTENTS: z.coerce.number().int().min(1).default(DEFAULT_LIMITS.maxRecordingContents),
    FORKLINE_MAX_UPLOADS_PER_TENANT: z.coerce.number().int().min(1).default(DEFAULT_LIMITS.uploadsPerTenant),
    FORKLINE_UPLOAD_SPOOL_MAX_BYTES: z.coerce.number().int().min(1024).default(DEFAULT_LIMITS.uploadSpoolMaxBytes),
    FORKLINE_WS_MAX_BUFFERED_BYTES: z.coerce
      .number()
      .int()
      .min(64 * 1024)
      .default(DEFAULT_LIMITS.wsMaxBufferedBytes),
    FORKLINE_RATE_LIMIT_RPS: z.coerce.number().min(0).default(DEFAULT_LIMITS.ratePerSecond),
    FORKLINE_RATE_LIMIT_BURST: z.coerce.number().int().min(1).default(DEFAULT_LIMITS.rateBurst),
    FORKLINE_MAX_CONNECTIONS_PER_TENANT: z.coerce.number().int().min(0).default(DEFAULT_LIMITS.connectionsPerTenant),
    FORKLINE_MAX_API_TOKENS_PER_TENANT: z.coerce.number().int().min(0).default(DEFAULT_LIMITS.apiTokensPerTenant),
    FORKLINE_MAX_SUBSCRIPTIONS_PER_TENANT: z.coerce.number().int().min(0).default(DEFAULT_LIMITS.subscriptionsPerTenant),
    FORKLINE_MAX_CONNECTIONS_PER_TOKEN: z.coerce.number().int().min(0).default(DEFAULT_LIMITS.connectionsPerToken),
    FORKLINE_MAX_SUBSCRIPTIONS_PER_TOKEN: z.coerce.number().int().min(0).default(DEFAULT_LIMITS.subscriptionsPerToken),
    FORKLINE_MAX_OPERATIONS_PER_SOCKET: z.coerce.number().int().min(0).default(DEFAULT_LIMITS.operationsPerSocket),
    FORKLINE_AUTH_FAILURES_PER_ADDRESS: z.coerce.number().int().min(0).default(DEFAULT_LIMITS.authFailures),
    FORKLINE_AUTH_FAILURE_WINDOW_S: z.coerce.number().int().min(1).default(DEFAULT_LIMITS.authFailureWindowSeconds),
    FORKLINE_HTTP_HEADERS_TIMEOUT_MS: z.coerce.number().int().min(100).default(DEFAULT_TIMEOUTS.headersMs),
    FORKLINE_HTTP_REQUEST_TIMEOUT_MS: z.coerce.number().int().min(0).default(DEFAULT_TIMEOUTS.requestMs),
    FORKLINE_HTTP_KEEPALIVE_TIMEOUT_MS: z.coerce.number().int().min(1).default(DEFAULT_TIMEOUTS.keepAliveMs),
    FORKLINE_WS_INIT_TIMEOUT_MS: z.coerce.number().int().min(100).default(DEFAULT_TIMEOUTS.wsInitMs),
    FORKLINE_WS_IDLE_TIMEOUT_MS: z.coerce
      .number()
      .int()
      .refine((v) => v === 0 || v >= 100, 'must be 0 (never) or at least 100')
      .default(DEFAULT_TIMEOUTS.wsIdleMs),
    FORKLINE_WS_SILENCE_TIMEOUT_MS: z.coerce.number().int().min(1000).default(DEFAULT_LIVENESS.deadAfterMs),
    FORKLINE_WS_CLOSE_GRACE_MS: z.coerce.number().int().min(0).default(DEFAULT_LIVENESS.closeGraceMs),
    FORKLINE_HTTP_BODY_MIN_BYTES_PER_S: z.coerce.number().int().min(0).default(DEFAULT_TIMEOUTS.bodyMinBytesPerSecond),
    FORKLINE_HTTP_BODY_RATE_WINDOW_MS: z.coerce.number().int().min(100).default(DEFAULT_TIMEOUTS.bodyRateWindowMs),
    FORKLINE_HTTP_RESPONSE_STALL_TIMEOUT_MS: z.coerce
      .number()
      .int()
      .refine((v) => v === 0 || v >= 100, 'must be 0 (never) or at least 100')
      .default(DEFAULT_TIMEOUTS.responseStallMs),
    FORKLINE_MAX_CONNECTIONS_PER_ADDRESS: z.coerce.number().int().min(0).default(DEFAULT_LIMITS.connectionsPerAddress),
    FORKLINE_STATEMENT_BOUNDS: z.enum(['on', 'off']).default('on'),
    FORKLINE_QUERY_TIMEOUT_MS: statementTimeout(DEFAULT_STATEMENT_TIMEOUTS.queryMs),
    FORKLINE_MUTATION_TIMEOUT_MS: statementTimeout(DEFAULT_STATEMENT_TIMEOUTS.mutationMs),
    FORKLINE_LONG_STATEMENT_TIMEOUT_MS: statementTimeout(DEFAULT_STATEMENT_TIMEOUTS.longStatementMs),
    LOG_LEVEL: z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']).default('info'),
  })
  .superRefine((c, ctx) => {
    if (c.MODEL_PROVIDER === 'scripted' || c.MODEL) return;
    ctx.addIssue({
      code: 'custom',
      path: ['MODEL'],
      message: `MODEL_PROVIDER=${c.MODEL_PROVIDER} needs MODEL (the model name the provider knows, e.g. gpt-4o-mini, claude-sonnet-4-5, gemini-2.5-flash or llama3)`,
    });
  })
  .refine((c) => c.MODEL_PROVIDER !== 'openai-compatible' || c.OPENAI_COMPATIBLE_BASE_URL, {
    path: ['OPENAI_COMPATIBLE_BASE_URL'],
    message: 'MODEL_PROVIDER=openai-compatible needs OPENAI_COMPATIBLE_BASE_URL (e.g. http://127.0.0.1:11434/v1 for Ollama)',
  });

/** Each provider's endpoint and key (agent/models/providers.ts). */
export const providersOf = (c: Config) => ({
  openai: { baseUrl: c.OPENAI_BASE_URL, apiKey: c.OPENAI_API_KEY },
  anthropic: { baseUrl: c.ANTHROPIC_BASE_URL, apiKey: c.ANTHROPIC_API_KEY },
  google: { baseUrl: c.GOOGLE_BASE_URL, apiKey: c.GOOGLE_GENERATIVE_AI_API_KEY },
  ...(c.OPENAI_COMPATIBLE_BASE_URL ? { openaiCompatible: { baseUrl: c.OPENAI_COMPATIBLE_BASE_URL, apiKey: c.OPENAI_COMPATIBLE_API_KEY } } : {}),
  limits: {
    maxResponseBytes: c.FORKLINE_MODEL_MAX_RESPONSE_BYTES,
    idleTimeoutMs: c.FORKLINE_MODEL_IDLE_TIMEOUT_MS,
    callTimeoutMs: c.FORKLINE_MODEL_CALL_TIMEOUT_MS,
    maxToolCalls: c.FORKLINE_MODEL_MAX_TOOL_CALLS,
  },
});

/** The model new sessions use until a session/model event says otherwise. */
export const defaultModelOf = (c: Config) => ({ provider: c.MODEL_PROVIDER, model: c.MODEL ?? 'scripted' });

export type Config = z.infer<typeof envSchema>;

export function loadConfig(env: NodeJS.ProcessEnv = process.env): Config {
  const r = envSchema.safeParse(Object.fromEntries(Object.entries(env).filter(([, v]) => v !== '')));
  if (!r.success) {
    throw new Error(`invalid configuration: ${r.error.issues.map((i) => `${i.path.join('.')}: ${i.message}`).join('; ')}`);
  }
  return r.data;
}

/** A pair of connection caps from the environment; 0: that cap off (the other stays), both 0: off. */
const connectionCapsOf = (connections: number, subscriptions: number) =>
  connections || subscriptions ? { connections: connections || Infinity, subscriptions: subscriptions || Infinity } : (false as const);

/** How long a silent WebSocket subscriber is kept (docs/operations.md "Memory and time"). */
export function livenessOptions(config: Config): LivenessOptions {
  return { deadAfterMs: config.FORKLINE_WS_SILENCE_TIMEOUT_MS, closeGraceMs: config.FORKLINE_WS_CLOSE_GRACE_MS };
}

/** The security and limit settings the server takes from the environment. */
export function securityOptions(config: Config): SecurityOptions {
  return {
    apiTokens: config.FORKLINE_API_TOKENS,
    allowInsecure: config.FORKLINE_ALLOW_INSECURE,
    corsOrigins: config.FORKLINE_CORS_ORIGINS,
    maxBodyBytes: config.FORKLINE_MAX_BODY_BYTES,
    maxTokens: config.FORKLINE_MAX_QUERY_TOKENS,
    maxDepth: config.FORKLINE_MAX_QUERY_DEPTH,
    maxAliases: config.FORKLINE_MAX_ALIASES,
    maxCost: config.FORKLINE_MAX_QUERY_COST,
    maxResponseBytes: config.FORKLINE_MAX_RESPONSE_BYTES,
    maxHeldRequestChars: config.FORKLINE_MAX_HELD_REQUEST_CHARS,
    maxRequestMessages: config.FORKLINE_MAX_REQUEST_MESSAGES,
    maxRequestValues: config.FORKLINE_MAX_REQUEST_VALUES,
    maxRequestKeys: config.FORKLINE_MAX_REQUEST_KEYS,
    maxRecordingBytes: config.FORKLINE_MAX_RECORDING_BYTES,
    maxRecordingLineBytes: config.FORKLINE_MAX_RECORDING_LINE_BYTES,
    maxRecordingContents: config.FORKLINE_MAX_RECORDING_CONTENTS,
    uploadsPerTenant: config.FORKLINE_MAX_UPLOADS_PER_TENANT,
    uploadSpoolMaxBytes: config.FORKLINE_UPLOAD_SPOOL_MAX_BYTES,
    wsMaxBufferedBytes: config.FORKLINE_WS_MAX_BUFFERED_BYTES,
    rateLimit: config.FORKLINE_RATE_LIMIT_RPS > 0 ? { perSecond: config.FORKLINE_RATE_LIMIT_RPS, burst: config.FORKLINE_RATE_LIMIT_BURST } : false,
    connectionCaps: connectionCapsOf(config.FORKLINE_MAX_CONNECTIONS_PER_TENANT, config.FORKLINE_MAX_SUBSCRIPTIONS_PER_TENANT),
    tokenConnectionCaps: connectionCapsOf(config.FORKLINE_MAX_CONNECTIONS_PER_TOKEN, config.FORKLINE_MAX_SUBSCRIPTIONS_PER_TOKEN),
    maxApiTokensPerTenant: config.FORKLINE_MAX_API_TOKENS_PER_TENANT || false,
    authFailures:
      config.FORKLINE_AUTH_FAILURES_PER_ADDRESS > 0
        ? { max: config.FORKLINE_AUTH_FAILURES_PER_ADDRESS, windowMs: config.FORKLINE_AUTH_FAILURE_WINDOW_S * 1000 }
        : false,
    timeouts: {
      headersMs: config.FORKLINE_HTTP_HEADERS_TIMEOUT_MS,
      requestMs: config.FORKLINE_HTTP_REQUEST_TIMEOUT_MS,
      keepAliveMs: config.FORKLINE_HTTP_KEEPALIVE_TIMEOUT_MS,
      wsInitMs: config.FORKLINE_WS_INIT_TIMEOUT_MS,
      wsIdleMs: config.FORKLINE_WS_IDLE_TIMEOUT_MS,
      bodyMinBytesPerSecond: config.FORKLINE_HTTP_BODY_MIN_BYTES_PER_S,
      bodyRateWindowMs: config.FORKLINE_HTTP_BODY_RATE_WINDOW_MS,
      responseStallMs: config.FORKLINE_HTTP_RESPONSE_STALL_TIMEOUT_MS,
    },
    maxConnectionsPerAddress: config.FORKLINE_MAX_CONNECTIONS_PER_ADDRESS,
    maxOperationsPerSocket: config.FORKLINE_MAX_OPERATIONS_PER_SOCKET,
    statementBounds: config.FORKLINE_STATEMENT_BOUNDS === 'on',
    statementTimeouts: {
      queryMs: config.FORKLINE_QUERY_TIMEOUT_MS,
      mutationMs: config.FORKLINE_MUTATION_TIMEOUT_MS,
      longStatementMs: config.FORKLINE_LONG_STATEMENT_TIMEOUT_MS,
    },
  };
}
