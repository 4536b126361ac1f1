// Tenant authentication (issue 9). With API tokens configured every HTTP, SSE
// and WebSocket operation carries `Authorization: Bearer <token>` (WebSocket:
// connectionParams.authorization); the token's tenant becomes ctx.scope.tenant,
// and the store confines every read and write to it. Without tokens: local
// single-tenant mode, tenant `local`. Stored tokens (issue 27, host/api-tokens.ts)
// carry their scopes; environment tokens and local mode hold every scope.
import type http from 'node:http';
import { ForklineError } from '../../core/errors.ts';
import { ALL_SCOPES, type Caller } from '../../core/api-tokens.ts';
import { tokenDigest } from '../../store/api-tokens.ts';
import type { ApiTokens } from '../../host/api-tokens.ts';
import { LOCAL_TENANT } from '../security.ts';

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

/** The digest of an Authorization value's bearer token; undefined when it is not `Bearer <token>`. */
function bearerDigest(authorization: unknown): string | undefined {
  if (typeof authorization !== 'string') return undefined;
  const m = /^Bearer\s+(\S+)\s*$/i.exec(authorization);
  return m ? tokenDigest(m[1]) : undefined;
}

export class TenantAuth {
  // Keyed by the token's digest: a lookup reveals nothing about a token's bytes through timing.
  private readonly byDigest = new Map<string, string>();

  constructor(
    tokens?: ReadonlyMap<string, string>,
    private readonly stored?: ApiTokens,
  ) {
    for (const [token, tenant] of tokens ?? []) this.byDigest.set(tokenDigest(token), tenant);
  }

  /** Environment tokens configured, or stored tokens live at start. */
  get enabled(): boolean {
    return this.byDigest.size > 0 || (this.stored?.inUse ?? false);
  }

  /** The principal of an Authorization value (`Bearer <token>`); undefined when it is missing or unknown. */
  authenticate(authorization: unknown): Principal | undefined {
    if (!this.enabled) return { tenant: LOCAL_TENANT, key: LOCAL_TENANT, scopes: ALL_SCOPES };
    const key = bearerDigest(authorization);
    if (key === undefined) return undefined;
    const tenant = this.byDigest.get(key);
    if (tenant !== undefined) return { tenant, key, scopes: ALL_SCOPES };
    const token = this.stored?.credential(key);
    return token && { tenant: token.tenant, key, scopes: token.scopes, stored: true };
  }

  /** Looks up a stored token `authenticate` cannot answer for yet: awaited first, when it returns a promise. */
  lookUp(authorization: unknown): Promise<void> | undefined {
    if (!this.stored || !this.enabled) return undefined;
    const key = bearerDigest(authorization);
    return key === undefined || this.byDigest.has(key) ? undefined : this.stored.lookUp(key);
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
