// Tenant authentication (issue 9). With API tokens configured every HTTP, SSE
// and WebSocket operation carries `Authorization: Bearer <token>` (WebSocket:
// connectionParams.authorization); the token's tenant becomes ctx.scope.tenant,
// and the store confines every read and write to it. Without tokens: local
// single-tenant mode, tenant `local`.
import { createHash } from 'node:crypto';
import type http from 'node:http';
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
}

export function unauthenticated(): ForklineError {
  return new ForklineError('UNAUTHENTICATED', 'missing or invalid API token: send "Authorization: Bearer <token>"');
}

export const jsonError = (status: number, code: string, message: string, headers: Record<string, string> = {}) =>
  new Response(JSON.stringify({ errors: [{ message, extensions: { code } }] }), {
    status,
    headers: { 'content-type': 'application/json; charset=utf-8', ...headers },
  });
