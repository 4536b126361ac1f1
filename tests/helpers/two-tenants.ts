// Two tenants on one service, each behind a bearer token: the set-up of the
// tests of what one tenant may see or do to another's sessions
// (docs/operations.md "What a tenant can and cannot do").
import type { AppOptions } from '../../src/app.ts';
import { startTestApp, type TestApp } from './app.ts';

export const TOKEN_A = 'alpha-token-0123456789abcdef';
export const TOKEN_B = 'beta-token-0123456789abcdef0';
/** The headers that send each tenant's token. */
export const A = { authorization: `Bearer ${TOKEN_A}` };
export const B = { authorization: `Bearer ${TOKEN_B}` };

/**
 * A service whose tokens are TOKEN_A (tenant `alpha`) and TOKEN_B (`beta`),
 * without rate limits unless `opts.security` sets them; the other options as given.
 */
export function startTwoTenantApp(opts: Partial<AppOptions> = {}): Promise<TestApp> {
  return startTestApp({
    ...opts,
    security: {
      rateLimit: false,
      ...opts.security,
      apiTokens: new Map([
        [TOKEN_A, 'alpha'],
        [TOKEN_B, 'beta'],
      ]),
    },
  });
}
