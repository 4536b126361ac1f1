// HTTP + WebSocket front: yoga serves GraphQL (POST/GET and SSE subscriptions)
// and GraphiQL at /graphql; graphql-ws serves subscriptions on the same path.
import http from 'node:http';
import { createYoga, type Plugin } from 'graphql-yoga';
import { GraphQLError, getOperationAST } from 'graphql';
import { WebSocketServer } from 'ws';
import { CloseCode } from 'graphql-ws';
import { useServer } from 'graphql-ws/use/ws';
import { schema } from './schema.ts';
import type { Context } from './context.ts';
import { SessionLoader } from './session-loader.ts';
import type { Services } from '../host/services.ts';
import type { PrismaClient } from '@prisma/client';
import { maskError, useInputErrorCodes, type ErrorLog } from './plugins/error-codes.ts';
import { TenantAuth, connectionAuthorization, unauthenticated, type Principal } from './plugins/auth.ts';
import { TokenBuckets } from './plugins/rate-limit.ts';
import { AuthThrottle } from './plugins/auth-throttle.ts';
import { TOO_MANY_REQUESTS_CLOSE_CODE, TenantConnections, useHttpSubscriptionLimits } from './plugins/connection-limits.ts';
import { DEFAULT_TIMEOUTS, applyKeepAlive, cutUninitialisedSockets, httpServerOptions } from './connection-timeouts.ts';
import { isAllowedLocalHost, isAllowedOrigin, useCsrfPrevention } from './plugins/browser.ts';
import { RequestGate, useRequestGate } from './plugins/request-gate.ts';
import { useQueryLimits } from './plugins/limits.ts';
import { useResponseSizeLimit } from './plugins/response-size.ts';
import { useCloseUnsentStreams } from './plugins/unsent-streams.ts';
import { useScopes } from './plugins/scopes.ts';
import { TokenConnections } from './token-connections.ts';
import { useStorableText } from './plugins/text-input.ts';
import { useJitQueries } from './plugins/jit.ts';
import { countErrors, useMetrics } from './plugins/metrics.ts';
import { DEFAULT_LIMITS, assertSafeBinding, isLoopbackHost, type SecurityOptions } from './security.ts';
import { serviceEndpoints, type ReadinessReport } from './service-endpoints.ts';
import { recordingUpload } from './recording-upload.ts';
import { aguiHandler } from '../agui/agui-handler.ts';
import { withinBodyLimit } from './http-body.ts';
import { fastLane } from './fast-lane.ts';
import { GRAPHIQL_ASSETS_PREFIX, renderGraphiQLPage, serveGraphiQLAsset, useGraphiQLSecurityHeaders } from './graphiql.ts';
import { closingOptions, watchLiveness, type LivenessOptions } from './ws-liveness.ts';
import { WsDelivery } from './ws-delivery.ts';
import { Utf8CheckedWebSocket } from './ws-messages.ts';
import { resultWithoutInternals, withoutInternals } from './wire-errors.ts';
import type { ServiceMetrics } from '../metrics.ts';

/** WebSocket messages are small GraphQL operations; recordings go over HTTP. */
const MAX_WS_MESSAGE_BYTES = 1024 * 1024;
/**
 * Connections the kernel completes and holds until we accept them. libuv
 * accepts one per event-loop iteration (libuv#3696), so under load a burst of
 * new connections waits here. Node's default, 511, overflowed with 1,000
 * clients sending at once to a busy process (`turns` bench on a Postgres with
 * synchronous_commit off): dropped SYNs, and 434–870 of the 1,000 connects timed out
 * after 10 s. With 4,096: none. Linux caps it at net.core.somaxconn.
 */
const LISTEN_BACKLOG = 4096;

export interface ServerOptions {
  services: Services;
  prisma: PrismaClient;
  host: string;
  port: number;
  log?: ErrorLog;
  /** Authentication, limits, CORS (README "Security and operations"); unset: local mode with default limits. */
  security?: SecurityOptions;
  metrics?: ServiceMetrics;
  /** /readyz; unset: ready whenever the process answers. */
  readiness?: () => Promise<ReadinessReport>;
  /** How long close() lets in-flight HTTP requests finish before it cuts them. */
  drainMs?: number;
  /** Extra yoga plugins, appended to the list below. */
  plugins?: Plugin[];
  /** Where POST /recordings spools bodies. */
  uploadDir: string;
  /** WebSocket ping interval and how long a silent socket lives (tests shorten them). */
  wsLiveness?: LivenessOptions;
  /** POST queries and mutations served without yoga's fetch layer (fast-lane.ts); default on. */
  fastLane?: boolean;
  /** Handles other paths (the dashboard) after /healthz, /readyz and /metrics; return false to 404. */
  onOtherRequest?: (req: http.IncomingMessage, res: http.ServerResponse) => boolean | Promise<boolean>;
}

const ROUTES = new Set(['/graphql', '/recordings', '/agui', '/healthz', '/readyz', '/metrics', '/']);
const METHODS = new Set(['GET', 'POST', 'HEAD', 'OPTIONS']);

export interface RunningServer {
  url: string;
  httpServer: http.Server;
  /** Direct sessionEvents delivery over graphql-ws (its counts). */
  wsDelivery: WsDelivery;
  /** What each tenant holds open (auth mode with caps; connection-limits.ts). */
  tenantConnections?: TenantConnections;
  close(): Promise<void>;
}

export async function startServer(opts: ServerOptions): Promise<RunningServer> {
  const log = opts.log ?? ((m, e) => console.error(m, e ?? ''));
  const security = opts.security ?? {};
  const { metrics } = opts;
  const auth = new TenantAuth(security.apiTokens, opts.services.apiTokens);
  assertSafeBinding(opts.host, security, auth.enabled);
  const tokens = new TokenConnections(auth, opts.services.apiTokens);
  // Local mode is reachable only through loopback names (DNS rebinding).
  const loopbackOnly = !auth.enabled && isLoopbackHost(opts.host);
  const rateLimit = security.rateLimit ?? { perSecond: DEFAULT_LIMITS.ratePerSecond, burst: DEFAULT_LIMITS.rateBurst };
  const buckets = auth.enabled && rateLimit ? new TokenBuckets(rateLimit.perSecond, rateLimit.burst) : undefined;
  const authFailures = security.authFailures ?? { max: DEFAULT_LIMITS.authFailures, windowMs: DEFAULT_LIMITS.authFailureWindowSeconds * 1000 };
  const throttle = auth.enabled && authFailures ? new AuthThrottle({ maxFailures: authFailures.max, windowMs: authFailures.windowMs }) : undefined;
  const caps = security.connectionCaps ?? { connections: DEFAULT_LIMITS.connectionsPerTenant, subscriptions: DEFAULT_LIMITS.subscriptionsPerTenant };
  const held = auth.enabled && caps ? new TenantConnections(caps) : undefined;
  const timeouts = { ...DEFAULT_TIMEOUTS, ...security.timeouts };
  const corsOrigins = security.corsOrigins ?? [];
  const toClientError = maskError(log);
  const maxBodyBytes = security.maxBodyBytes ?? DEFAULT_LIMITS.maxBodyBytes;
  const limits = {
    maxTokens: security.maxTokens ?? DEFAULT_LIMITS.maxTokens,
    maxDepth: security.maxDepth ?? DEFAULT_LIMITS.maxDepth,
    maxAliases: security.maxAliases ?? DEFAULT_LIMITS.maxAliases,
    maxCost: security.maxCost ?? DEFAULT_LIMITS.maxCost,
  };
  const gate = new RequestGate({
    auth,
    buckets,
    throttle,
    loopbackOnly,
    onRefused: (reason) => reason !== 'host' && metrics?.rejected.inc({ reason }),
  });

  const yoga = createYoga<{ req?: http.IncomingMessage }, Context>({
    schema,
    graphqlEndpoint: '/graphql',
    // With tokens, GraphiQL subscribes over SSE: that request carries the headers set in its editor.
    graphiql: { title: 'forkline', subscriptionsProtocol: auth.enabled ? 'SSE' : 'WS' },
    renderGraphiQL: renderGraphiQLPage, // from the npm package, same-origin (graphiql.ts)
    landingPage: false,
    logging: false,
    maskedErrors: { maskError: toClientError },
    maxRequestBodySize: false, // withinBodyLimit (http-body.ts) instead: same limit, a fraction of the cost
    // Same-origin only (GraphiQL and the dashboard are served from here) unless origins are configured.
    cors: corsOrigins.length ? { origin: corsOrigins, allowedHeaders: ['authorization', 'content-type', 'x-graphql-yoga-csrf'] } : false,
    // Every cross-cutting concern, registered here and only here, in request order.
    plugins: [
      useRequestGate(gate),
      useGraphiQLSecurityHeaders(),
      useCsrfPrevention(),
      useQueryLimits(limits),
      useResponseSizeLimit(security.maxResponseBytes ?? DEFAULT_LIMITS.maxResponseBytes),
      useStorableText(),
      useScopes(),
      useInputErrorCodes(),
      metrics && useMetrics(metrics),
      held && useHttpSubscriptionLimits(held),
      useCloseUnsentStreams(),
      useJitQueries(),
      ...(opts.plugins ?? []),
    ].filter((p): p is Plugin => Boolean(p)),
    context: (initial: { req?: http.IncomingMessage; principal?: Principal }): Context => {
      // graphql-ws operations come with their caller; HTTP requests passed the gate.
      const principal = initial.principal ?? (initial.req && gate.check(initial.req).principal);
      if (!principal) throw unauthenticated();
      const { tenant } = principal;
      return {
        scope: { tenant },
        caller: principal,
        prisma: opts.prisma,
        store: opts.services.store,
        services: opts.services,
        sessionLoader: new SessionLoader(opts.services.store.sessions, tenant),
      };
    },
  });

  const fast = opts.fastLane !== false && fastLane({ yoga, gate, corsEnabled: corsOrigins.length > 0, maxTokens: limits.maxTokens, onErrors: (errors) => metrics && countErrors(metrics, errors) });

  // Non-yoga entry points (WebSocket upgrades, recording uploads) apply the same browser guards.
  const browserAllowed = (req: http.IncomingMessage) =>
    isAllowedOrigin(req, corsOrigins) && (!loopbackOnly || isAllowedLocalHost(req.headers.host));
  const upload = recordingUpload({
    importRecording: (scope, source, idem) => opts.services.controller.importRecording(scope, source, idem),
    gate,
    allowed: (req) => isAllowedOrigin(req, corsOrigins),
    log,
    spoolDir: opts.uploadDir,
  });
  // AG-UI (src/agui/): same gate, origin guard and body limit as /graphql.
  const agui = aguiHandler({ services: opts.services, gate, allowed: (req) => isAllowedOrigin(req, corsOrigins), corsOrigins, maxBodyBytes, log });
  const endpoints = serviceEndpoints({ readiness: opts.readiness ?? (async () => ({ ready: true, checks: {} })), metrics });
  const httpServer = http.createServer(httpServerOptions(timeouts), async (req, res) => {
    const path = (req.url ?? '/').split('?')[0];
    if (metrics) res.once('finish', () => metrics.httpRequests.inc({ route: ROUTES.has(path) ? path : 'other', method: METHODS.has(req.method ?? '') ? req.method! : 'other', status: res.statusCode }));
    try {
      if (!(await tokens.admit(req, res, path))) return;
      if (path === '/graphql') {
        if (!(await withinBodyLimit(req, res, maxBodyBytes, () => !gate.check(req).refused))) return;
        if (fast && (await fast(req, res))) return;
        return await yoga(req, res);
      }
      if (path.startsWith(GRAPHIQL_ASSETS_PREFIX) && (await serveGraphiQLAsset(req, res, path))) return;
      if (path === '/recordings') return await upload(req, res);
      if (path === '/agui') return await agui(req, res);
      if (await endpoints(req, res, path)) return;
      if (opts.onOtherRequest && (await opts.onOtherRequest(req, res))) return;
      res.writeHead(404, { 'content-type': 'text/plain' }).end('not found');
    } catch (err) {
      log('request failed', err, { path });
      if (!res.headersSent) res.writeHead(500, { 'content-type': 'text/plain' }).end('internal server error');
      else res.destroy();
    }
  });
  applyKeepAlive(httpServer, timeouts);

  const wsDelivery = new WsDelivery();
  /** The caller of each WebSocket, resolved when it connects. */
  const callers = new WeakMap<object, Principal>();
  const wss = new WebSocketServer({
    server: httpServer,
    path: '/graphql',
    maxPayload: MAX_WS_MESSAGE_BYTES,
    // Every message, text or binary, is checked as UTF-8 by the socket itself (ws-messages.ts).
    WebSocket: Utf8CheckedWebSocket,
    skipUTF8Validation: true,
    ...closingOptions(opts.wsLiveness),
    // Browsers open WebSockets cross-site without CORS: only this origin (or configured ones).
    verifyClient: ({ req }, done) =>
      browserAllowed(req) ? done(true) : done(false, 403, 'Forbidden'),
  });
  const authorizationOf = (ctx: { connectionParams?: Record<string, unknown>; extra: { request: http.IncomingMessage } }) =>
    connectionAuthorization(ctx.connectionParams, ctx.extra.request);
  const wsCleanup = useServer<Record<string, unknown>, { req?: http.IncomingMessage }>(
    {
      connectionInitWaitTimeout: timeouts.wsInitMs,
      execute: (args: any) => args.rootValue.execute(args),
      subscribe: (args: any) => args.rootValue.subscribe(args),
      // graphql-ws clients treat 4401 and 4429 as final (no reconnect loop with a bad token or over a limit).
      onConnect: async (ctx) => {
        const { socket, request } = ctx.extra;
        if (!(await tokens.lookUp(authorizationOf(ctx), socket))) return false; // a stored token, looked up first (1013 when the database is away)
        const { principal, refused } = gate.authenticate(authorizationOf(ctx), request.socket.remoteAddress);
        // connection_init is an operation of its caller: it takes a rate-limit token, and a connection under the tenant's cap.
        const over = principal ? gate.admit(principal).refused ?? held?.openSocket(socket, principal.tenant) : refused;
        if (principal && !over) return void callers.set(socket, principal), tokens.watchSocket(principal, socket), true;
        if (over?.status === 401) socket.close(CloseCode.Unauthorized, 'Unauthorized: missing or invalid connectionParams.authorization');
        else socket.close(TOO_MANY_REQUESTS_CLOSE_CODE, `${over!.code}: ${over!.message}`.slice(0, 123)); // a close reason's limit (ASCII)
        return false;
      },
      onSubscribe: async (ctx, id, params) => {
        // Errors here answer this operation only; thrown, they would close the whole socket.
        try {
          const caller = callers.get(ctx.extra.socket);
          const { principal, refused } = caller ? gate.admit(caller) : gate.authenticate(undefined);
          if (refused) throw new GraphQLError(refused.message, { extensions: { code: refused.code } });
          const { schema: s, execute, subscribe, contextFactory, parse, validate } = yoga.getEnveloped({
            ...ctx,
            req: ctx.extra.request,
            socket: ctx.extra.socket,
            principal,
            params,
          });
          const document = parse(params.query);
          const errors = validate(s, document);
          if (errors.length) throw errors;
          const contextValue = { ...(await contextFactory()), ws: { socket: ctx.extra.socket, id, delivery: wsDelivery } };
          // Last: from here graphql-ws runs the operation, and onComplete (or the socket's close) releases it.
          const capped = held && getOperationAST(document, params.operationName)?.operation === 'subscription' ? held.startSubscription(ctx.extra.socket, id) : undefined;
          if (capped) throw new GraphQLError(capped.message, { extensions: { code: capped.code } });
          return { schema: s, operationName: params.operationName, document, variableValues: params.variables, contextValue, rootValue: { execute, subscribe } };
        } catch (err) {
          const errors = (Array.isArray(err) ? err : [err]).map((e) => toClientError(e, 'Unexpected error.') as GraphQLError);
          if (metrics) countErrors(metrics, errors);
          return errors.map(withoutInternals);
        }
      },
      onComplete: (ctx, id) => held?.endSubscription(ctx.extra.socket, id),
      onNext: (_ctx, _id, _payload, _args, result) => {
        if (!('errors' in result) || !result.errors) return;
        if (metrics) countErrors(metrics, result.errors);
        return resultWithoutInternals(result);
      },
    },
    wss,
    0, // graphql-ws's keep-alive drops slow readers with 1006 and no reason: ws-liveness.ts instead
  );
  watchLiveness(wss, {
    ...opts.wsLiveness,
    onUnresponsive: (socket) => {
      metrics?.unresponsiveSockets.inc();
      opts.wsLiveness?.onUnresponsive?.(socket);
    },
  });

  cutUninitialisedSockets(wss, timeouts, (socket) => callers.has(socket));

  await new Promise<void>((resolve, reject) => {
    httpServer.once('error', reject);
    httpServer.listen({ port: opts.port, host: opts.host, backlog: LISTEN_BACKLOG }, () => resolve());
  });
  const addr = httpServer.address() as import('node:net').AddressInfo;
  const hostForUrl = addr.family === 'IPv6' ? `[${addr.address}]` : addr.address;
  return {
    url: `http://${hostForUrl}:${addr.port}/graphql`,
    httpServer,
    wsDelivery,
    tenantConnections: held,
    /** Stops accepting, closes WebSockets (1001), lets HTTP requests finish for drainMs, then cuts the rest (SSE). */
    async close() {
      const closed = Promise.all([new Promise<void>((r) => httpServer.close(() => r())), wsCleanup.dispose()]);
      httpServer.closeIdleConnections();
      const timer = new Promise<'timeout'>((r) => setTimeout(() => r('timeout'), opts.drainMs ?? 1000).unref());
      if ((await Promise.race([closed, timer])) === 'timeout') {
        for (const socket of wss.clients) socket.terminate();
        httpServer.closeAllConnections();
      }
      await closed;
    },
  };
}
