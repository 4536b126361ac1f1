// Tenant authentication. With API tokens configured every HTTP, SSE
// and WebSocket operation carries `Authorization: Bearer <token>` (WebSocket:
// connectionParams.authorization); the token's tenant becomes ctx.scope.tenant,
// and the store confines every read and write to it. Without tokens: local
// single-tenant mode, tenant `local`. Stored tokens (host/api-tokens.ts)
// carry their scopes; environment tokens and local mode hold every scope.
import type http from 'node:http';
import { ForklineError } from '../core/errors.ts';
import { ALL_SCOPES, type Caller } from '../core/api-tokens.ts';
import { isStoredTokenShape, tokenDigest } from '../store/api-tokens.ts';
import type { ApiTokens } from '../host/api-tokens.ts';

/** The one tenant of local mode (no tokens configured). */
export const LOCAL_TENANT = 'local';

export interface Principal extends Caller {
  /** Stable key of the credential (rate limiting, revocation): its digest, never the token itself. */
  key: string;
  /** A stored token, which can be revoked or expire (environment tokens cannot). */
  stored?: boolean;
}

/** A graphql-ws connection's credential: connectionParams.authorization, else the upgrade request's header. */
export function connectionAuthorization(connectionParams: Record<string, unknown> | undefined, req: http.IncomingMessage | undefined): unknown {
  return connectionParams?.authorization ?? connectionParams?.Authorization ?? req?.headers.authorization;
}

/** The token of an Authorization value; undefined when it is not `Bearer <token>`. */
export function bearerToken(authorization: unknown): string | undefined {
  if (typeof authorization !== 'string') return undefined;
  return /^Bearer\s+(\S+)\s*$/i.exec(authorization)?.[1];
}

export class TenantAuth {
  // Keyed by the token's digest: a lookup reveals nothing about a token's bytes through timing.
  private readonly byDigest = new Map<string, { tenant: string; who: string }>();

  constructor(
    tokens?: ReadonlyMap<string, string>,
    private readonly stored?: ApiTokens,
  ) {
    // An environment token is named by its place in FORKLINE_API_TOKENS, never by its digest: the
    // operator chose it (16 characters may do), and any part of its unsalted digest in a session's
    // log or an exported recording would let a reader check guesses offline (docs/operations.md "API tokens").
    let place = 0;
    for (const [token, tenant] of tokens ?? []) this.byDigest.set(tokenDigest(token), { tenant, who: `env-token:${++place}` });
  }

  /** Environment tokens configured, or stored tokens live at start. */
  get enabled(): boolean {
    return this.byDigest.size > 0 || (this.stored?.inUse ?? false);
  }

  /** The principal of an Authorization value (`Bearer <token>`); undefined when it is missing or unknown. */
  authenticate(authorization: unknown): Principal | undefined {
    if (!this.enabled) return { tenant: LOCAL_TENANT, key: LOCAL_TENANT, scopes: ALL_SCOPES, who: LOCAL_TENANT };
    const token = bearerToken(authorization);
    if (token === undefined) return undefined;
    const key = tokenDigest(token);
    const env = this.byDigest.get(key);
    if (env !== undefined) return { tenant: env.tenant, key, scopes: ALL_SCOPES, who: env.who };
    const stored = this.stored?.credential(key);
    return stored && { tenant: stored.tenant, key, scopes: stored.scopes, stored: true, who: `token:${stored.id}` };
  }

  /** Looks up a stored token `authenticate` cannot answer for yet: awaited first, when it returns a promise. */
  lookUp(authorization: unknown): Promise<void> | undefined {
    if (!this.stored || !this.enabled) return undefined;
    const token = bearerToken(authorization);
    return token === undefined || !isStoredTokenShape(token) ? undefined : this.stored.lookUp(tokenDigest(token));
  }
}

export function unauthenticated(): ForklineError {
  return new ForklineError('UNAUTHENTICATED', 'missing or invalid API token: send "Authorization: Bearer <token>"');
}

export const jsonError = (status: number, code: string, message: string, headers: Record<string, string> = {}) =>
  new Response(JSON.stringify({ errors: [{ message, extensions: { code } }] }), {
    status,
    headers: { 'content-type': 'application/json; charset=utf-8', ...headers },
  });
