// Who is calling, decided once per request or operation, the same way for
// every entry point: HTTP requests to /graphql (the fast lane or yoga, the
// refusal and the context's tenant alike), POST /recordings, and graphql-ws
// (the caller once per connection, a rate-limit token per operation). A
// loopback Host in local mode, a known API token, a token from its rate-limit
// bucket: a token's digest is computed once, and a request takes one
// rate-limit token, not one per check.
import type http from 'node:http';
import type { Plugin } from 'graphql-yoga';
import { jsonError, unauthenticated, type Principal, type TenantAuth } from './auth.ts';
import { rateLimitedMessage, type TokenBuckets } from './rate-limit.ts';
import { authThrottledMessage, type AuthThrottle } from './auth-throttle.ts';
import { isAllowedLocalHost } from './browser.ts';
import type { Refusal } from './http-body.ts';

/** Passed (with the caller's principal; none for a CORS preflight) or refused. */
export type GateDecision = { principal?: Principal; refused?: undefined } | { refused: Refusal; principal?: undefined };

export interface RequestGateOptions {
  auth: TenantAuth;
  buckets?: TokenBuckets;
  /** Local mode on a loopback interface: only loopback Host names (DNS rebinding). */
  loopbackOnly: boolean;
  /** Failed authentication attempts per client address (auth-throttle.ts). */
  throttle?: AuthThrottle;
  onRefused?: (reason: 'unauthenticated' | 'rate_limited' | 'auth_throttled' | 'host') => void;
}

/**
 * A request's decision, kept on the request itself (a request is one server's,
 * so one gate's): not in a WeakMap keyed by requests, whose entry per request
 * every young-generation GC went over until the next full one (http-body.ts).
 */
const DECISION = Symbol('gate decision');
type DecidedRequest = http.IncomingMessage & { [DECISION]?: GateDecision };

export class RequestGate {
  constructor(private readonly opts: RequestGateOptions) {}

  check(req: http.IncomingMessage): GateDecision {
    const r = req as DecidedRequest;
    return (r[DECISION] ??= this.decide(req.method, req.headers.host, req.headers.authorization, req.socket.remoteAddress));
  }

  /** The caller of a credential (`Bearer <token>`; anything in local mode), or a 401 refusal (429 from an address with too many). */
  authenticate(authorization: unknown, address?: string): GateDecision {
    const { throttle } = this.opts;
    const blocked = throttle?.blockedFor(address);
    if (blocked) {
      this.opts.onRefused?.('auth_throttled');
      return { refused: { status: 429, code: 'RATE_LIMITED', message: authThrottledMessage(blocked), headers: { 'retry-after': String(Math.ceil(blocked)) } } };
    }
    const principal = this.opts.auth.authenticate(authorization);
    if (principal) return { principal };
    throttle?.failed(address);
    this.opts.onRefused?.('unauthenticated');
    return { refused: { status: 401, code: 'UNAUTHENTICATED', message: unauthenticated().message, headers: { 'www-authenticate': 'Bearer' } } };
  }

  /** The auth throttle refuses `address` now (authenticate answers it 429, whatever its credential). */
  throttled(address: string | undefined): boolean {
    return (this.opts.throttle?.blockedFor(address) ?? 0) > 0;
  }

  /** One operation of an authenticated caller (a graphql-ws operation): its rate-limit token, or a 429 refusal. */
  admit(principal: Principal): GateDecision {
    const { auth, buckets, onRefused } = this.opts;
    const wait = auth.enabled && buckets ? buckets.take(principal.key) : 0;
    if (!wait) return { principal };
    onRefused?.('rate_limited');
    return { refused: { status: 429, code: 'RATE_LIMITED', message: rateLimitedMessage(wait), headers: { 'retry-after': String(Math.ceil(wait)) } } };
  }

  private decide(method: string | undefined, host: string | undefined, authorization: string | undefined, address: string | undefined): GateDecision {
    if (this.opts.loopbackOnly && !isAllowedLocalHost(host)) {
      this.opts.onRefused?.('host');
      return {
        refused: {
          status: 403,
          code: 'FORBIDDEN',
          message: 'this local-mode server answers only to loopback host names (localhost, 127.0.0.1, [::1])',
          headers: {},
        },
      };
    }
    if (method === 'OPTIONS') return {};
    const caller = this.authenticate(authorization, address);
    return caller.principal ? this.admit(caller.principal) : caller;
  }
}

/** yoga's side: refuses before the body is read. */
export function useRequestGate(gate: RequestGate): Plugin<object, { req?: http.IncomingMessage }> {
  return {
    onRequest({ serverContext, endResponse }) {
      if (!serverContext.req) throw new Error('forkline serves yoga through node:http only');
      const { refused } = gate.check(serverContext.req);
      if (refused) endResponse(jsonError(refused.status, refused.code, refused.message, refused.headers));
    },
  };
}
