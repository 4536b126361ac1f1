// Security settings of the HTTP/WebSocket front (README "Security and
// operations"). The guard (guard.ts) enforces them at every door; the
// GraphQL limits among them are yoga plugins (http/graphql/graphql-handler.ts).
import { isIP } from 'node:net';
import { MAX_RECORDING_BYTES, MAX_RECORDING_CONTENTS, MAX_RECORDING_LINE_BYTES, MAX_STRING_RECORDING_BYTES } from '../core/recording.ts';
import { DEFAULT_MAX_REQUEST_KEYS, DEFAULT_MAX_REQUEST_MESSAGES, DEFAULT_MAX_REQUEST_VALUES } from '../core/resent-conversation.ts';
import type { ConnectionCaps } from './connection-limits.ts';
import type { ConnectionTimeouts } from './connection-timeouts.ts';
import { DEFAULT_STATEMENT_TIMEOUTS, type StatementTimeouts } from '../db/statement-deadlines.ts';

export { DEFAULT_STATEMENT_TIMEOUTS };

/** The statement bounds `security` asks for, each unset one at its default. */
export function statementTimeoutsOf(security: SecurityOptions): StatementTimeouts {
  const given = Object.entries(security.statementTimeouts ?? {}).filter(([, v]) => v !== undefined);
  return { ...DEFAULT_STATEMENT_TIMEOUTS, ...Object.fromEntries(given) };
}

export interface SecurityOptions {
  /** token → tenant. Unset or empty: local single-tenant mode (tenant `local`, loopback only). */
  apiTokens?: ReadonlyMap<string, string>;
  /** Local mode may bind a non-loopback HOST only with this set (FORKLINE_ALLOW_INSECURE=1). */
  allowInsecure?: boolean;
  /** Browser origins allowed cross-origin (CORS, WebSocket); the server's own origin always is. */
  corsOrigins?: string[];
  maxBodyBytes?: number;
  maxTokens?: number;
  maxDepth?: number;
  maxAliases?: number;
  maxCost?: number;
  /** Largest query or mutation response sent (plugins/response-size.ts). */
  maxResponseBytes?: number;
  /** Messages one /chat or /agui request may carry (FORKLINE_MAX_REQUEST_MESSAGES; 413 past it). */
  maxRequestMessages?: number;
  /** JSON values one /chat or /agui body may hold, counted before it is parsed (FORKLINE_MAX_REQUEST_VALUES; 413 past it). */
  maxRequestValues?: number;
  /** Distinct object keys one /chat or /agui body may hold, counted before it is parsed (FORKLINE_MAX_REQUEST_KEYS; 413 past it). */
  maxRequestKeys?: number;
  /** Largest request held while it lives: a subscription's (query, variables, extensions, id), a WebSocket's connection_init payload (plugins/held-requests.ts). */
  maxHeldRequestChars?: number;
  /** Largest recording POST /recordings imports (spooled to disk and read as a stream: memory does not grow with it). */
  maxRecordingBytes?: number;
  /** Longest line of a recording POST /recordings imports (FORKLINE_MAX_RECORDING_LINE_BYTES). */
  maxRecordingLineBytes?: number;
  /** Distinct file contents the change sets of a recording POST /recordings imports may name (FORKLINE_MAX_RECORDING_CONTENTS). */
  maxRecordingContents?: number;
  /** Recording uploads one tenant may have in progress at once (FORKLINE_MAX_UPLOADS_PER_TENANT). */
  uploadsPerTenant?: number;
  /** Bytes all uploads in progress may spool to disk together (FORKLINE_UPLOAD_SPOOL_MAX_BYTES). */
  uploadSpoolMaxBytes?: number;
  /** Bytes one WebSocket may have queued for its client, all its subscriptions together (FORKLINE_WS_MAX_BUFFERED_BYTES). */
  wsMaxBufferedBytes?: number;
  /** Token bucket per API token (auth mode only); false: off. */
  rateLimit?: { perSecond: number; burst: number } | false;
  /** Per tenant (auth mode only): open WebSockets + SSE streams, and subscriptions; false: off. */
  connectionCaps?: ConnectionCaps | false;
  /** Per API token, within its tenant's (auth mode only): the same counts, so one token cannot take every place of its tenant; false: off. */
  tokenConnectionCaps?: ConnectionCaps | false;
  /** Failed authentication attempts per client address before 429s (auth mode only); false: off. */
  authFailures?: { max: number; windowMs: number } | false;
  /** Live stored API tokens one tenant may hold (createApiToken past it: BAD_USER_INPUT); false: no cap. */
  maxApiTokensPerTenant?: number | false;
  /** Operations (queries, mutations, subscriptions) one graphql-ws socket may have in flight, in every mode; 0: no cap. */
  maxOperationsPerSocket?: number;
  /** Open connections from one client address, per process (refused as they are accepted); 0: no cap. */
  maxConnectionsPerAddress?: number;
  /** HTTP and WebSocket idle timeouts (connection-timeouts.ts); unset fields: DEFAULT_TIMEOUTS. */
  timeouts?: Partial<ConnectionTimeouts>;
  /** How long an operation's database work may take (db/statement-deadlines.ts); unset fields: DEFAULT_STATEMENT_TIMEOUTS. */
  statementTimeouts?: Partial<StatementTimeouts>;
  /** Whether statements are bounded and cancelled at all (FORKLINE_STATEMENT_BOUNDS; unset: on). */
  statementBounds?: boolean;
}

export const DEFAULT_LIMITS = {
  // One body limit for every request: importRecording must accept a recording up
  // to MAX_STRING_RECORDING_BYTES, which JSON string escaping can double (larger
  // ones stream to POST /recordings). Smaller inputs have their own limits
  // (sendMessage text: 200,000 characters).
  maxBodyBytes: 2 * MAX_STRING_RECORDING_BYTES + 1024 * 1024,
  // 2 tokens per nesting level at least: keeps documents far from the depth
  // (~2,000 levels) where graphql-js's parser overflows the stack.
  maxTokens: 2000,
  maxDepth: 12,
  maxAliases: 30,
  maxCost: 100_000,
  // The largest recording POST /recordings imports, exported again through
  // Session.recording, with room for JSON string escaping.
  maxResponseBytes: 2 * MAX_RECORDING_BYTES,
  // useChat resends the whole conversation with each message: five times a long chat of 2,000 messages.
  maxRequestMessages: DEFAULT_MAX_REQUEST_MESSAGES,
  // What JSON.parse of a chat door's body costs grows with its values: about 7 times a long chat's.
  maxRequestValues: DEFAULT_MAX_REQUEST_VALUES,
  // Each new key costs JSON.parse a few hundred times a value: a chat repeats a few dozen.
  maxRequestKeys: DEFAULT_MAX_REQUEST_KEYS,
  // A subscription's arguments are ids and a seq, connection_init's a token: a few hundred characters, held as long as they live.
  maxHeldRequestChars: 64 * 1024,
  // An upload is spooled to disk and imported as a stream: this bounds the
  // disk it takes, not memory.
  maxRecordingBytes: 4 * 1024 ** 3,
  maxRecordingLineBytes: MAX_RECORDING_LINE_BYTES,
  maxRecordingContents: MAX_RECORDING_CONTENTS,
  uploadsPerTenant: 2,
  uploadSpoolMaxBytes: 8 * 1024 ** 3,
  // Far above what a subscriber that reads gets queued (graphql/ws-delivery.ts waits at 1 MiB).
  wsMaxBufferedBytes: 64 * 1024 * 1024,
  ratePerSecond: 20,
  rateBurst: 100,
  connectionsPerTenant: 100,
  connectionsPerAddress: 1024,
  subscriptionsPerTenant: 1000,
  // A quarter of the tenant's: a runaway or leaked token (a CI bot's) leaves the rest to the tenant's other tokens.
  connectionsPerToken: 25,
  subscriptionsPerToken: 250,
  // In every mode, tokens or none: a token's subscriptions (250) fit on one socket.
  operationsPerSocket: 250,
  apiTokensPerTenant: 100,
  authFailures: 20,
  authFailureWindowSeconds: 60,
} as const;

/** Loopback interfaces and names (a name other than localhost may resolve anywhere). */
export function isLoopbackHost(host: string): boolean {
  const h = host.replace(/^\[(.*)\]$/, '$1').toLowerCase();
  if (h === 'localhost' || h.endsWith('.localhost')) return true;
  if (isIP(h) === 4) return h.startsWith('127.');
  if (isIP(h) === 6) return h === '::1' || h.startsWith('::ffff:127.');
  return false;
}

/**
 * Without API tokens anyone who reaches the port owns every session: refuse to
 * listen beyond loopback unless the operator says so explicitly.
 */
export function assertSafeBinding(host: string, security: SecurityOptions, authEnabled = Boolean(security.apiTokens?.size)): void {
  if (authEnabled || security.allowInsecure || isLoopbackHost(host)) return;
  throw new Error(
    `refusing to listen on HOST=${host} without authentication: set FORKLINE_API_TOKENS="token=tenant,…" ` +
      `(recommended), or FORKLINE_ALLOW_INSECURE=1 to serve every session unauthenticated on that interface`,
  );
}
