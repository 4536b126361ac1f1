// Tenant authentication (issue 9). With API tokens configured every HTTP, SSE
// and WebSocket operation carries `Authorization: Bearer <token>` (WebSocket:
// connectionParams.authorization); the token's tenant becomes ctx.scope.tenant,
// and the store confines every read and write to it. Without tokens: local
// single-tenant mode, tenant `local`.
import { createHash } from 'node:crypto';
import type http from 'node:http';
import type { Plugin } from 'graphql-yoga';
import { ForklineError } from '../../core/errors.ts';
import { LOCAL_TENANT } from '../security.ts';

export interface Principal {
  tenant: string;
  /** Stable key of the credential (rate limiting); never the token itself. */
  key: string;
}

/** A graphql-ws connection's credential: connectionParams.authorization, else the upgrade request's header. */
export function connectionAuthorization(connectionParams: Record<string, unknown> | undefined, req: http.IncomingMessage | undefined): unknown {
  return connectionParams?.authorization ?? connectionParams?.Authorization ?? req?.headers.authorization;
}

const digest = (token: string) => createHash('sha256').update(token).digest('hex');

export class TenantAuth {
  // Keyed by the token's digest: a lookup reveals nothing about a token's bytes through timing.
  private readonly byDigest = new Map<string, string>();

  constructor(tokens?: ReadonlyMap<string, string>) {
    for (const [token, tenant] of tokens ?? []) this.byDigest.set(digest(token), tenant);
  }

  get enabled(): boolean {
    return this.byDigest.size > 0;
  }

  /** The principal of an Authorization value (`Bearer <token>`); undefined when it is missing or unknown. */
  authenticate(authorization: unknown): Principal | undefined {
    if (!this.enabled) return { tenant: LOCAL_TENANT, key: LOCAL_TENANT };
    if (typeof authorization !== 'string') return undefined;
    const m = /^Bearer\s+(\S+)\s*$/i.exec(authorization);
    if (!m) return undefined;
    const key = digest(m[1]);
    const tenant = this.byDigest.get(key);
    return tenant === undefined ? undefined : { tenant, key };
  }

  /**
   * The principal of a GraphQL context's initial value: the HTTP request's
   * header, or for graphql-ws the connection's `authorization` param (the
   * upgrade request's header as a fallback for non-browser clients).
   */
  principalOf(initial: { request?: Request; connectionParams?: Record<string, unknown>; req?: http.IncomingMessage }): Principal {
    const header = initial.request
      ? initial.request.headers.get('authorization')
      : connectionAuthorization(initial.connectionParams, initial.req);
    const principal = this.authenticate(header);
    if (!principal) throw unauthenticated();
    return principal;
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

/**
 * Rejects unauthenticated HTTP requests (queries, mutations, SSE) with 401
 * before their body is read. GraphiQL's page itself is static and is served
 * earlier by yoga; the operations it sends need the header like any other.
 */
export function useTenantAuth(auth: TenantAuth, onRejected?: () => void): Plugin {
  return {
    onRequest({ request, endResponse }) {
      if (!auth.enabled || request.method === 'OPTIONS') return;
      if (auth.authenticate(request.headers.get('authorization'))) return;
      onRejected?.();
      const e = unauthenticated();
      endResponse(jsonError(401, e.code, e.message, { 'www-authenticate': 'Bearer' }));
    },
  };
}
