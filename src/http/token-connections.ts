// What stored API tokens (host/api-tokens.ts) need from the HTTP and
// WebSocket front, before and after the request gate settles the caller:
// - a token this process has not verified lately is looked up first (one
//   statement; the gate itself stays synchronous);
// - the doors that only write (POST /recordings, POST /agui, POST /chat) refuse a token
//   without the `write` scope (on /graphql, plugins/scopes.ts decides per operation);
// - a revoked or expired token's open connections end: its graphql-ws sockets
//   close with 4401 (graphql-ws clients do not retry it), its streams (SSE
//   subscriptions, AG-UI runs, /chat answers) are cut, and its next request is a 401;
// - so do its requests under way (endRevoked): a body still arriving is never
//   acted on (a slow body sent before the revocation would otherwise run a
//   mutation or open a stream after it), and a stream that begins after it
//   ends at once. An upload door ends its own request (takeRevocation): 401,
//   nothing imported.
import type http from 'node:http';
import type { WebSocket } from 'ws';
import { CloseCode } from 'graphql-ws';
import { grants } from '../core/api-tokens.ts';
import { isDatabaseUnavailable, RETRY_AFTER_SECONDS } from '../db/unavailable.ts';
import type { ApiTokens } from '../host/api-tokens.ts';
import { isStoredTokenShape } from '../store/api-tokens.ts';
import { bearerToken, type Principal, type TenantAuth } from './auth.ts';
import { bodyReadWhole, replyError } from './http-body.ts';

/** Paths the request gate guards (the rest are static pages and probes). */
const GATED = new Set(['/graphql', '/sessions', '/recordings', '/agui', '/chat']);
/** Doors where every POST writes. */
const WRITE_ONLY = new Set(['/recordings', '/agui', '/chat']);
/** A page of a session's log over GET (http/graphql/event-pages.ts): the /sessions door. */
export const EVENT_PAGE_PATH = /^\/sessions\/([^/]+)\/events$/;
/** /chat/<id>/stream is the /chat door too; /sessions/<id>/events the /sessions door. */
const doorOf = (path: string) => (path.startsWith('/chat/') ? '/chat' : EVENT_PAGE_PATH.test(path) ? '/sessions' : path);

/**
 * Node keeps the first of several Authorization fields and drops the rest: a
 * proxy that adds its own after the client's would see one caller and
 * forkline another. The field is a singleton (RFC 9110): a request or a
 * WebSocket upgrade with several is refused.
 */
export const severalAuthorizations = (req: http.IncomingMessage) => (req.headersDistinct.authorization?.length ?? 0) > 1;
export const SEVERAL_AUTHORIZATIONS = 'send one Authorization header, not several';

export const REVOKED_REASON = 'Unauthorized: the API token was revoked or expired';

export class TokenConnections {
  /** Each admitted request of a stored token: aborted when the token is revoked or expires. */
  private readonly revocations = new WeakMap<http.ServerResponse, AbortController>();
  /** Requests whose door ends them itself when their token goes (takeRevocation). */
  private readonly endedByDoor = new WeakSet<http.ServerResponse>();

  constructor(
    private readonly auth: TenantAuth,
    private readonly tokens: ApiTokens,
    /**
     * An address the auth throttle refuses (http/auth-throttle.ts): its tokens
     * are not looked up, or one trying random tokens would still cost a
     * statement per request (the gate answers it 429 without one).
     */
    private readonly throttled: (address: string | undefined) => boolean = () => false,
  ) {}

  /** Before the gate, on a gated path; false when it answered the request itself (400, 403, 503). */
  async admit(req: http.IncomingMessage, res: http.ServerResponse, requestPath: string): Promise<boolean> {
    const path = doorOf(requestPath);
    if (GATED.has(path) && severalAuthorizations(req)) {
      req.resume();
      replyError(res, 400, 'BAD_USER_INPUT', SEVERAL_AUTHORIZATIONS, { connection: 'close' });
      return false;
    }
    const token = bearerToken(req.headers.authorization);
    if (!GATED.has(path) || !token || !isStoredTokenShape(token)) return true; // the gate alone decides
    if (this.throttled(req.socket.remoteAddress)) return true; // the gate refuses it (429)
    if (!(await this.lookedUp(req.headers.authorization, res))) return false;
    const principal = this.auth.authenticate(req.headers.authorization);
    if (!principal?.stored) return true; // the gate answers a missing or unknown token
    if (WRITE_ONLY.has(path) && req.method === 'POST' && !grants(principal.scopes, 'write')) {
      replyError(res, 403, 'FORBIDDEN', `${path} needs an API token with the write scope`);
      return false;
    }
    const revoked = new AbortController();
    this.revocations.set(res, revoked);
    const unwatch = this.tokens.watch(principal.key, () => {
      revoked.abort(new Error(REVOKED_REASON));
      if (!this.endedByDoor.has(res)) endRevoked(req, res);
    });
    res.once('close', unwatch);
    return true;
  }

  /**
   * For a door that ends its own request when the token goes (a recording
   * upload: it stops spooling or importing, and answers 401): the signal, and
   * the guard no longer cuts that request itself. Undefined: not a stored token.
   */
  takeRevocation(res: http.ServerResponse): AbortSignal | undefined {
    this.endedByDoor.add(res);
    return this.revocations.get(res)?.signal;
  }

  /** A graphql-ws connection's credential, looked up before the gate authenticates it; false when it closed the socket (1013). */
  async lookUp(authorization: unknown, socket: WebSocket, address: string | undefined): Promise<boolean> {
    if (this.throttled(address)) return true; // the gate refuses it (4429)
    try {
      await this.auth.lookUp(authorization);
      return true;
    } catch (err) {
      if (!isDatabaseUnavailable(err)) throw err;
      socket.close(1013, 'Try again later: the database is unavailable');
      return false;
    }
  }

  /** An open socket of a stored token closes when the token is revoked or expires. */
  watchSocket(principal: Principal, socket: WebSocket): void {
    if (!principal.stored) return;
    const unwatch = this.tokens.watch(principal.key, () => socket.close(CloseCode.Unauthorized, REVOKED_REASON));
    socket.once('close', unwatch);
  }

  private async lookedUp(authorization: unknown, res: http.ServerResponse): Promise<boolean> {
    try {
      await this.auth.lookUp(authorization);
      return true;
    } catch (err) {
      if (!isDatabaseUnavailable(err)) throw err;
      replyError(res, 503, 'SERVICE_UNAVAILABLE', 'the database is unavailable or out of connections; retry shortly', {
        'retry-after': String(RETRY_AFTER_SECONDS),
      });
      return false;
    }
  }
}

/**
 * A request under way whose token was revoked or expired. A stream under way
 * is cut. A request whose body is still arriving is cut too: nothing of it
 * is acted on. One whose body was read and whose answer has not begun
 * finishes when its answer is written at once (revokeApiToken answering the
 * revocation of its own token), but an answer that goes on (a stream: an SSE
 * subscription, an AG-UI run, a /chat answer) is cut as soon as it begins.
 */
function endRevoked(req: http.IncomingMessage, res: http.ServerResponse): void {
  if (res.headersSent || !bodyReadWhole(req)) return void res.destroy();
  const writeHead = res.writeHead;
  res.writeHead = function (this: http.ServerResponse, ...args: Parameters<typeof writeHead>) {
    res.writeHead = writeHead;
    setImmediate(() => res.writableEnded || res.destroy());
    return writeHead.apply(this, args);
  } as typeof writeHead;
}
