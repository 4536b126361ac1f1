// The router: the node:http server and the WebSocket server every door sits
// behind. Each request passes the guard (guard.ts) and goes to its door by
// path: /graphql (graphql/graphql-handler.ts, over HTTP and graphql-ws),
// GET /sessions/<id>/events (graphql/event-pages.ts), /agui (agui/agui-handler.ts), /chat and /chat/<id>/stream (chat/chat-handler.ts), /recordings (POST: recording-upload.ts, GET:
// recording-download.ts), GraphiQL's
// assets, the service endpoints, then the dashboard.
import http from 'node:http';
import { WebSocketServer } from 'ws';
import type { Plugin } from 'graphql-yoga';
import type { DoorServices } from '../host/services.ts';
import type { ServiceMetrics } from '../metrics.ts';
import type { ErrorLog } from '../logger.ts';
import { graphqlHandler } from './graphql/graphql-handler.ts';
import type { WsDelivery } from './graphql/ws-delivery.ts';
import { EVENT_PAGE_PATH } from './token-connections.ts';
import { aguiHandler } from '../agui/agui-handler.ts';
import { chatHandler } from '../chat/chat-handler.ts';
import { Guard } from './guard.ts';
import type { TenantConnections } from './connection-limits.ts';
import { applyKeepAlive, cutUninitialisedSockets, httpServerOptions } from './connection-timeouts.ts';
import { AddressConnections, watchBody } from './body-deadlines.ts';
import { DEFAULT_LIMITS, type SecurityOptions } from './security.ts';
import { serviceEndpoints, type ReadinessReport } from './service-endpoints.ts';
import { recordingUpload } from './recording-upload.ts';
import { recordingDownload } from './recording-download.ts';
import { doorStatements } from './door-statements.ts';
import { GRAPHIQL_ASSETS_PREFIX, serveGraphiQLAsset } from './graphiql.ts';
import { closingOptions, watchLiveness, type LivenessOptions } from './ws-liveness.ts';
import { Utf8CheckedWebSocket } from './ws-messages.ts';
import { capQueuedOutput } from './ws-output-cap.ts';

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
  services: DoorServices;
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
  /** Extra plugins with request-level hooks that may miss the fast lane's requests (tests). */
  fastLaneAllowed?: Plugin[];
  /** Handles other paths (the dashboard) after /healthz, /readyz and /metrics; return false to 404. */
  onOtherRequest?: (req: http.IncomingMessage, res: http.ServerResponse) => boolean | Promise<boolean>;
}

const ROUTES = new Set(['/graphql', '/sessions', '/recordings', '/agui', '/chat', '/healthz', '/readyz', '/metrics', '/']);
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
  const { metrics } = opts;
  const guard = new Guard({ host: opts.host, security: opts.security, apiTokens: opts.services.apiTokens, metrics });
  const graphql = graphqlHandler({
    services: opts.services,
    guard,
    log,
    security: opts.security,
    metrics,
    plugins: opts.plugins,
    fastLane: opts.fastLane,
    fastLaneAllowed: opts.fastLaneAllowed,
  });
  const upload = recordingUpload({
    importRecording: (scope, source, idem, limits) => opts.services.controller.importRecording(scope, source, idem, limits),
    discardImport: (scope, sessionId, idem) => opts.services.controller.discardSession(scope, sessionId, idem),
    importRefusal: (tenant) => opts.services.controller.importRefusal(tenant),
    guard,
    log,
    spoolDir: opts.uploadDir,
    maxBytes: opts.security?.maxRecordingBytes ?? DEFAULT_LIMITS.maxRecordingBytes,
    maxLineBytes: opts.security?.maxRecordingLineBytes,
    maxContents: opts.security?.maxRecordingContents,
    uploadsPerTenant: opts.security?.uploadsPerTenant,
    spoolMaxBytes: opts.security?.uploadSpoolMaxBytes,
  });
  const statements = doorStatements(opts.security);
  const download = recordingDownload({ store: opts.services.store, guard, statements, log });
  const agui = aguiHandler({ services: opts.services, guard, statements, log });
  const chat = chatHandler({ services: opts.services, guard, statements, log });
  const endpoints = serviceEndpoints({ readiness: opts.readiness ?? (async () => ({ ready: true, checks: {} })), metrics });
  const bodyRate = { minBytesPerSecond: guard.timeouts.bodyMinBytesPerSecond, windowMs: guard.timeouts.bodyRateWindowMs };
  const httpServer = http.createServer(httpServerOptions(guard.timeouts, metrics && (() => metrics.stalledResponses.inc())), async (req, res) => {
    // Every answer may carry content from outside (a recording, a file, a title in an error): its Content-Type is
    // never second-guessed into HTML by a browser (docs/operations.md "Threat model").
    res.setHeader('x-content-type-options', 'nosniff');
    const url = req.url ?? '/';
    const query = url.indexOf('?');
    const path = query < 0 ? url : url.slice(0, query);
    // A recording upload may take longer than any request (its body may be gigabytes): only the body rate holds it.
    watchBody(req, res, bodyRate, path === '/recordings' ? 0 : guard.timeouts.requestMs);
    // /graphql first: most requests, and no pattern to try on it.
    const route = path === '/graphql' ? path : path.startsWith('/chat/') ? '/chat' : EVENT_PAGE_PATH.test(path) ? '/sessions' : path;
    if (metrics)
      res.once('finish', () =>
        metrics.httpRequests.inc({
          route: ROUTES.has(route) ? route : 'other',
          method: METHODS.has(req.method ?? '') ? req.method! : 'other',
          status: res.statusCode,
        }),
      );
    try {
      if (!(await guard.admit(req, res, path))) return;
      if (path === '/graphql') return await graphql.http(req, res);
      if (route === '/sessions') return await graphql.eventPage(req, res, path);
      if (path.startsWith(GRAPHIQL_ASSETS_PREFIX) && (await serveGraphiQLAsset(req, res, path))) return;
      if (path === '/recordings') return await (req.method === 'GET' ? download(req, res) : upload(req, res));
      if (path === '/agui') return await agui(req, res);
      if (route === '/chat') return await chat(req, res, path);
      if (await endpoints(req, res, path)) return;
      if (opts.onOtherRequest && (await opts.onOtherRequest(req, res))) return;
      res.writeHead(404, { 'content-type': 'text/plain' }).end('not found');
    } catch (err) {
      log('request failed', err, { path });
      if (!res.headersSent) res.writeHead(500, { 'content-type': 'text/plain' }).end('internal server error');
      else res.destroy();
    }
  });
  applyKeepAlive(httpServer, guard.timeouts);
  const perAddress = new AddressConnections(opts.security?.maxConnectionsPerAddress ?? DEFAULT_LIMITS.connectionsPerAddress);
  httpServer.on('connection', (socket: import('node:net').Socket) => {
    if (!perAddress.accept(socket)) metrics?.rejected.inc({ reason: 'connections_per_address' });
  });

  const wss = new WebSocketServer({
    server: httpServer,
    path: '/graphql',
    maxPayload: MAX_WS_MESSAGE_BYTES,
    // Every message, text or binary, is checked as UTF-8 by the socket itself (ws-messages.ts).
    WebSocket: Utf8CheckedWebSocket,
    skipUTF8Validation: true,
    ...closingOptions(opts.wsLiveness),
    verifyClient: ({ req }, done) => {
      const refused = guard.upgradeRefusal(req);
      return refused ? done(false, refused.status, refused.message) : done(true);
    },
  });
  capQueuedOutput(wss, opts.security?.wsMaxBufferedBytes ?? DEFAULT_LIMITS.wsMaxBufferedBytes, metrics && (() => metrics.tooSlowSockets.inc()));
  const wsCleanup = graphql.serveWebSocket(wss);
  watchLiveness(wss, {
    ...opts.wsLiveness,
    onUnresponsive: (socket) => {
      metrics?.unresponsiveSockets.inc();
      opts.wsLiveness?.onUnresponsive?.(socket);
    },
  });

  cutUninitialisedSockets(wss, guard.timeouts, (socket) => guard.socketOpened(socket));

  await new Promise<void>((resolve, reject) => {
    httpServer.once('error', reject);
    httpServer.listen({ port: opts.port, host: opts.host, backlog: LISTEN_BACKLOG }, () => resolve());
  });
  const addr = httpServer.address() as import('node:net').AddressInfo;
  const hostForUrl = addr.family === 'IPv6' ? `[${addr.address}]` : addr.address;
  return {
    url: `http://${hostForUrl}:${addr.port}/graphql`,
    httpServer,
    wsDelivery: graphql.wsDelivery,
    tenantConnections: guard.connections,
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
