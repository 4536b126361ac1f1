// The one guard every door calls: GraphQL over HTTP (yoga and the fast lane),
// GraphQL over WebSocket (graphql-ws), POST /agui, POST /recordings and the
// service endpoints. It holds the floor's rules — who is calling (tokens,
// tenants, local mode's loopback Host), rate limits and the auth throttle
// (request-gate.ts), stored tokens' look-up and revocation
// (token-connections.ts), the body limit and UTF-8 rule (http-body.ts) and the
// messages, JSON values and keys a chat door's request may carry
// (core/resent-conversation.ts), the
// browser's Origin (browser.ts), and what a tenant may hold open
// (connection-limits.ts), and what one token of it may — so a rule added here holds at every door.
import type http from 'node:http';
import type { WebSocket } from 'ws';
import { CloseCode } from 'graphql-ws';
import type { Plugin } from 'graphql-yoga';
import type { ApiTokens } from '../host/api-tokens.ts';
import type { ServiceMetrics } from '../metrics.ts';
import { TenantAuth, type Principal } from './auth.ts';
import { TokenBuckets } from './rate-limit.ts';
import { AuthThrottle } from './auth-throttle.ts';
import { SocketOperations, TOO_MANY_REQUESTS_CLOSE_CODE, TenantConnections, useHttpSubscriptionLimits } from './connection-limits.ts';
import { DEFAULT_TIMEOUTS, IdleSockets, type ConnectionTimeouts } from './connection-timeouts.ts';
import { isAllowedLocalHost, isAllowedOrigin, useCsrfPrevention } from './browser.ts';
import { RequestGate, useRequestGate, type GateDecision } from './request-gate.ts';
import { SEVERAL_AUTHORIZATIONS, TokenConnections, severalAuthorizations } from './token-connections.ts';
import { BODY_TOO_LARGE, readBody, replyError, withinBodyLimit, type DoorJsonBounds, type Refusal, type TooLarge } from './http-body.ts';
import { TooManyEntries, chatBodyAdvice } from '../core/resent-conversation.ts';
import { DEFAULT_LIMITS, assertSafeBinding, isLoopbackHost, type SecurityOptions } from './security.ts';

export interface GuardOptions {
  /** The interface the server binds (local mode on loopback answers only loopback Host names). */
  host: string;
  security?: SecurityOptions;
  apiTokens: ApiTokens;
  metrics?: ServiceMetrics;
}

export class Guard {
  readonly auth: TenantAuth;
  readonly gate: RequestGate;
  /** Stored tokens: looked up before the gate, their connections closed when revoked. */
  readonly tokens: TokenConnections;
  /** What each tenant holds open (auth mode with caps). */
  readonly connections?: TenantConnections;
  /** What one graphql-ws socket may have in flight, in every mode. */
  readonly operations: SocketOperations;
  readonly corsOrigins: readonly string[];
  readonly maxBodyBytes: number;
  /** The largest event a door's own stream sends (/chat, /agui: http/event-ceiling.ts), as a subscription's. */
  readonly maxResponseBytes: number;
  /** The messages one /chat or /agui request may carry (the conversation a chat client resends: core/resent-conversation.ts). */
  readonly maxRequestMessages: number;
  /** The JSON values and distinct keys one /chat or /agui body may hold, counted before it is parsed (core/resent-conversation.ts). */
  readonly chatBodyBounds: DoorJsonBounds;
  readonly timeouts: ConnectionTimeouts;
  /** Local mode reachable only through loopback names (DNS rebinding). */
  readonly loopbackOnly: boolean;
  /** The caller of each WebSocket, resolved when it connects. */
  private readonly callers = new WeakMap<object, Principal>();
  private readonly idle: IdleSockets;

  constructor(opts: GuardOptions) {
    const security = opts.security ?? {};
    const { metrics } = opts;
    const auth = (this.auth = new TenantAuth(security.apiTokens, opts.apiTokens));
    assertSafeBinding(opts.host, security, auth.enabled);
    this.tokens = new TokenConnections(auth, opts.apiTokens, (address) => this.gate.throttled(address));
    this.loopbackOnly = !auth.enabled && isLoopbackHost(opts.host);
    const rateLimit = security.rateLimit ?? { perSecond: DEFAULT_LIMITS.ratePerSecond, burst: DEFAULT_LIMITS.rateBurst };
    const buckets = auth.enabled && rateLimit ? new TokenBuckets(rateLimit.perSecond, rateLimit.burst) : undefined;
    const authFailures = security.authFailures ?? { max: DEFAULT_LIMITS.authFailures, windowMs: DEFAULT_LIMITS.authFailureWindowSeconds * 1000 };
    const throttle = auth.enabled && authFailures ? new AuthThrottle({ maxFailures: authFailures.max, windowMs: authFailures.windowMs }) : undefined;
    const caps = security.connectionCaps ?? { connections: DEFAULT_LIMITS.connectionsPerTenant, subscriptions: DEFAULT_LIMITS.subscriptionsPerTenant };
    const tokenCaps = security.tokenConnectionCaps ?? { connections: DEFAULT_LIMITS.connectionsPerToken, subscriptions: DEFAULT_LIMITS.subscriptionsPerToken };
    const off = { connections: Infinity, subscriptions: Infinity };
    this.connections =
      auth.enabled && (caps || tokenCaps)
        ? new TenantConnections({ tenant: caps || off, token: tokenCaps || off }, (reason) => metrics?.rejected.inc({ reason }))
        : undefined;
    const perSocket = security.maxOperationsPerSocket ?? DEFAULT_LIMITS.operationsPerSocket;
    this.operations = new SocketOperations(perSocket || Infinity, () => metrics?.rejected.inc({ reason: 'socket_operations' }));
    this.timeouts = { ...DEFAULT_TIMEOUTS, ...security.timeouts };
    this.idle = new IdleSockets(this.timeouts.wsIdleMs);
    this.corsOrigins = security.corsOrigins ?? [];
    this.maxBodyBytes = security.maxBodyBytes ?? DEFAULT_LIMITS.maxBodyBytes;
    this.maxResponseBytes = security.maxResponseBytes ?? DEFAULT_LIMITS.maxResponseBytes;
    this.maxRequestMessages = security.maxRequestMessages ?? DEFAULT_LIMITS.maxRequestMessages;
    this.chatBodyBounds = {
      values: security.maxRequestValues ?? DEFAULT_LIMITS.maxRequestValues,
      keys: security.maxRequestKeys ?? DEFAULT_LIMITS.maxRequestKeys,
      advice: chatBodyAdvice,
    };
    this.gate = new RequestGate({
      auth,
      buckets,
      throttle,
      loopbackOnly: this.loopbackOnly,
      onRefused: (reason) => reason !== 'host' && metrics?.rejected.inc({ reason }),
    });
  }

  /** Every HTTP request, before its door: a stored token is looked up (403/503 answered here); false when answered. */
  admit(req: http.IncomingMessage, res: http.ServerResponse, path: string): Promise<boolean> {
    return this.tokens.admit(req, res, path);
  }

  /** The caller of an HTTP request (decided once per request), or its refusal. */
  check(req: http.IncomingMessage): GateDecision {
    return this.gate.check(req);
  }

  /** A browser may send this request: no Origin, this server's own, or a configured one. */
  originAllowed(req: http.IncomingMessage): boolean {
    return isAllowedOrigin(req, this.corsOrigins);
  }

  /** CORS headers for a door that answers cross-origin requests itself (AG-UI): only for a configured origin. */
  corsHeaders(req: http.IncomingMessage): Record<string, string> {
    const origin = req.headers.origin;
    if (!origin || !(this.corsOrigins.includes('*') || this.corsOrigins.includes(origin))) return {};
    return { 'access-control-allow-origin': origin, vary: 'origin' };
  }

  /**
   * The caller of a door that reads its own body (/agui, /recordings): the
   * Origin, then the gate's decision. Undefined when it answered the request
   * (403 cross-site; the gate's refusal or 401, with `headers`).
   */
  callerOf(req: http.IncomingMessage, res: http.ServerResponse, headers: Record<string, string> = {}): Principal | undefined {
    if (!this.originAllowed(req)) return void replyError(res, 403, 'FORBIDDEN', 'cross-site request refused');
    const { principal, refused } = this.gate.check(req);
    if (refused) return void replyError(res, refused.status, refused.code, refused.message, { ...refused.headers, ...headers });
    if (!principal) return void replyError(res, 401, 'UNAUTHENTICATED', 'missing credentials', headers);
    return principal;
  }

  /**
   * A WebSocket upgrade's refusal, if any: several Authorization fields (the
   * header is connection_init's fallback credential: the rule of the HTTP
   * doors), the Origin, and in local mode a loopback Host (browsers open
   * WebSockets cross-site without CORS).
   */
  upgradeRefusal(req: http.IncomingMessage): { status: number; message: string } | undefined {
    if (severalAuthorizations(req)) return { status: 400, message: SEVERAL_AUTHORIZATIONS };
    if (!this.originAllowed(req) || (this.loopbackOnly && !isAllowedLocalHost(req.headers.host))) return { status: 403, message: 'Forbidden' };
    return undefined;
  }

  /** The body of a door that reads it itself, within the body limit, as strict UTF-8; undefined when answered. */
  readBody(req: http.IncomingMessage, res: http.ServerResponse, refusal: TooLarge = BODY_TOO_LARGE, headers?: Record<string, string>) {
    return readBody(req, res, this.maxBodyBytes, refusal, headers);
  }

  /**
   * The request of a chat door (/chat, /agui): its body as readBody reads it, held to the JSON values and distinct keys one
   * may hold before it is parsed (JSON.parse's time grows with them, and the loop waits for it), parsed as JSON and by
   * `parse` (given the messages one request may carry); undefined when answered: 413 past either, 400 when the body is
   * not JSON or `parse` refuses it. Only what `parse` returns is kept: an answer streams for as long as its turn lasts.
   */
  async readChatRequest<T>(
    req: http.IncomingMessage,
    res: http.ServerResponse,
    parse: (body: unknown, maxMessages: number) => T,
    headers?: Record<string, string>,
  ): Promise<T | undefined> {
    const body = await readBody(req, res, this.maxBodyBytes, BODY_TOO_LARGE, headers, this.chatBodyBounds);
    if (!body) return undefined;
    try {
      return parse(JSON.parse(body.text), this.maxRequestMessages);
    } catch (err) {
      if (err instanceof TooManyEntries) return void replyError(res, 413, BODY_TOO_LARGE.code, err.message, headers);
      return void replyError(res, 400, 'BAD_USER_INPUT', err instanceof SyntaxError ? 'the body is not JSON' : (err as Error).message, headers);
    }
  }

  /** /graphql's body limit before yoga (which reads no body of a refused caller); false when answered. */
  withinBodyLimit(req: http.IncomingMessage, res: http.ServerResponse): Promise<boolean> {
    return withinBodyLimit(req, res, this.maxBodyBytes, () => !this.gate.check(req).refused);
  }

  /**
   * A graphql-ws connection_init: its caller (a stored token looked up first,
   * 1013 when the database is away), a rate-limit token, and a connection under
   * its tenant's and its token's caps. False when refused: the socket is closed with 4401 or
   * 4429, which graphql-ws clients treat as final (no reconnect loop). An
   * admitted socket is closed once it runs no operation (`busy`) for wsIdleMs.
   */
  async openSocket(socket: WebSocket, authorization: unknown, address: string | undefined, busy: () => boolean): Promise<boolean> {
    if (!(await this.tokens.lookUp(authorization, socket, address))) return false;
    const { principal, refused } = this.gate.authenticate(authorization, address);
    const over = principal ? (this.gate.admit(principal).refused ?? this.connections?.openSocket(socket, principal)) : refused;
    if (principal && !over) {
      this.callers.set(socket, principal);
      this.tokens.watchSocket(principal, socket);
      this.idle.watch(socket, busy);
      return true;
    }
    if (over?.status === 401) socket.close(CloseCode.Unauthorized, 'Unauthorized: missing or invalid connectionParams.authorization');
    else socket.close(TOO_MANY_REQUESTS_CLOSE_CODE, `${over!.code}: ${over!.message}`.slice(0, 123)); // a close reason's limit (ASCII)
    return false;
  }

  /** The socket passed openSocket. */
  socketOpened(socket: WebSocket): boolean {
    return this.callers.has(socket);
  }

  /**
   * One graphql-ws operation: its connection's caller takes a rate-limit token
   * (401 for a socket that never opened), and the operation a place among the
   * socket's in flight (`inFlight`: graphql-ws's record of them). Its place is
   * freed by endSubscription.
   */
  admitOperation(socket: WebSocket, id: string, inFlight: (id: string) => boolean): GateDecision {
    this.idle.touch(socket);
    const caller = this.callers.get(socket);
    const decision = caller ? this.gate.admit(caller) : this.gate.authenticate(undefined);
    const over = decision.principal && this.operations.start(socket, id, inFlight);
    return over ? { refused: over } : decision;
  }

  /** A graphql-ws subscription under its tenant's and its token's caps; its refusal otherwise. */
  startSubscription(socket: WebSocket, id: string): Refusal | undefined {
    return this.connections?.startSubscription(socket, id);
  }

  /**
   * A graphql-ws operation ended (graphql-ws onComplete) or failed before it
   * ran: its place among the socket's operations and a subscription's place
   * are freed, the socket's idle time starts again.
   */
  endSubscription(socket: WebSocket, id: string): void {
    this.idle.touch(socket);
    this.operations.end(socket, id);
    this.connections?.endSubscription(socket, id);
  }

  /**
   * A response a door holds open for the request's caller, under its tenant's
   * and its token's caps until it closes: a connection, and a subscription
   * unless `subscription` is false (a recording download is no subscription).
   */
  openStream(req: http.IncomingMessage, res: http.ServerResponse, subscription = true): Refusal | undefined {
    const { principal } = this.gate.check(req);
    return principal && this.connections?.openStream(res, principal, subscription);
  }

  /**
   * The same floor inside yoga, in request order: the caller before the body is
   * read, CSRF prevention, subscriptions over HTTP under the caps.
   * `first` go ahead of every GraphQL plugin, `streams` after the metrics.
   */
  yogaPlugins(): { first: Plugin[]; streams: Plugin[] } {
    return {
      first: [useRequestGate(this.gate), useCsrfPrevention()],
      streams: this.connections ? [useHttpSubscriptionLimits(this.connections, (req) => this.gate.check(req).principal)] : [],
    };
  }
}
