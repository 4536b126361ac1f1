// What an API token may do. Scopes are levels: `read` queries and
// subscribes, `write` also runs mutations (and AG-UI runs, recording uploads),
// `admin` also manages the tenant's tokens. A token holding a scope holds the
// ones below it, so a check asks for the least scope an operation needs.
import { ForklineError } from './errors.ts';

export const TOKEN_SCOPES = ['read', 'write', 'admin'] as const;
export type TokenScope = (typeof TOKEN_SCOPES)[number];

/** Whoever a request runs as: its tenant and what its credential allows. */
export interface Caller {
  tenant: string;
  scopes: readonly TokenScope[];
  /** Who the caller is, as a decision it makes is recorded (tool/approval `by`): `local`, `token:<id>`, `env-token:<n>` (its place in FORKLINE_API_TOKENS). */
  who?: string;
}

/** Environment tokens (the bootstrap admins) and local mode hold every scope. */
export const ALL_SCOPES: readonly TokenScope[] = [...TOKEN_SCOPES];

const level = (s: TokenScope) => TOKEN_SCOPES.indexOf(s);

/** Whether `scopes` include `needed` (or a scope above it). */
export const grants = (scopes: readonly TokenScope[], needed: TokenScope) => scopes.some((s) => level(s) >= level(needed));

/** The scopes a set of scopes amounts to, spelled out: `write` → read, write. */
export function impliedScopes(scopes: readonly TokenScope[]): TokenScope[] {
  const top = Math.max(-1, ...scopes.map(level));
  return TOKEN_SCOPES.slice(0, top + 1);
}

export function forbidden(needed: TokenScope, what: string): ForklineError {
  return new ForklineError('FORBIDDEN', `${what} needs an API token with the ${needed} scope`, { scope: needed });
}

/** Throws FORBIDDEN unless the caller holds `needed`. */
export function requireScope(caller: Caller, needed: TokenScope, what: string): void {
  if (!grants(caller.scopes, needed)) throw forbidden(needed, what);
}

/** A token is live until it is revoked or its expiry passes. */
export function isLive(token: { expiresAt: Date | null; revokedAt: Date | null }, now: Date): boolean {
  return token.revokedAt === null && (token.expiresAt === null || token.expiresAt > now);
}
