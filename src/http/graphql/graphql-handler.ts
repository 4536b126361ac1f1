// The GraphQL door behind the router (http/http-server.ts): yoga serves
// /graphql (POST/GET, SSE subscriptions, GraphiQL) with the fast lane in front
// of it, and graphql-ws serves subscriptions on the same path. Every request
// and connection passes the guard (http/guard.ts) first; the yoga plugins here
// are the GraphQL concerns (limits, errors, scopes, metrics, the JIT).
import type http from 'node:http';
import { createYoga, type Plugin } from 'graphql-yoga';
import { GraphQLError, getOperationAST } from 'graphql';
import type { WebSocket, WebSocketServer } from 'ws';
import { CloseCode } from 'graphql-ws';
import { useServer } from 'graphql-ws/use/ws';
import { schema } from '../../graphql/schema.ts';
import type { Context } from '../../graphql/context.ts';
import { SessionLoader } from '../../graphql/session-loader.ts';
import type { DoorServices } from '../../host/services.ts';
import type { ServiceMetrics } from '../../metrics.ts';
import type { ErrorLog } from '../../logger.ts';
import { maskError, useInputErrorCodes } from '../../graphql/plugins/error-codes.ts';
import { useQueryLimits } from '../../graphql/plugins/limits.ts';
import { useResponseSizeLimit } from '../../graphql/plugins/response-size.ts';
import { useCloseUnsentStreams } from '../../graphql/plugins/unsent-streams.ts';
import { useScopes } from '../../graphql/plugins/scopes.ts';
import { useStorableText } from '../../graphql/plugins/text-input.ts';
import { useVariableShape } from '../../graphql/plugins/variable-shape.ts';
import { heldRequestTooLarge, useHeldRequestLimit } from '../../graphql/plugins/held-requests.ts';
import { jsonCharsPast } from '../../core/storable.ts';
import { useJitQueries } from '../../graphql/plugins/jit.ts';
import { rememberedDocuments } from './remembered-documents.ts';
import { countErrors, useMetrics } from '../../graphql/plugins/metrics.ts';
import { useStatementDeadlines } from '../../graphql/plugins/statement-deadlines.ts';
import { oneExecuteHook } from '../../graphql/plugins/one-execute-hook.ts';
import { responseGone, socketGone } from '../client-gone.ts';
import { doorStatements } from '../door-statements.ts';
import { fastLane, fastLaneFence } from './fast-lane.ts';
import { eventPages } from './event-pages.ts';
import { WsDelivery, useWsDelivery } from './ws-delivery.ts';
import { resultWithoutInternals, withoutInternals } from './wire-errors.ts';
import { unauthenticated, connectionAuthorization, type Principal } from '../auth.ts';
import type { Guard } from '../guard.ts';
import { DEFAULT_LIMITS, statementTimeoutsOf, type SecurityOptions } from '../security.ts';
import { renderGraphiQLPage, useGraphiQLSecurityHeaders } from '../graphiql.ts';

export interface GraphqlHandlerOptions {
  services: DoorServices;
  guard: Guard;
  log: ErrorLog;
  security?: SecurityOptions;
  metrics?: ServiceMetrics;
  /** Extra yoga plugins, appended to the list below. */
  plugins?: Plugin[];
  /** POST queries and mutations served without yoga's fetch layer (fast-lane.ts); default on. */
  fastLane?: boolean;
  /** Extra plugins with request-level hooks that may miss the fast lane's requests (fast-lane.ts). */
  fastLaneAllowed?: Plugin[];
}

export interface GraphqlHandler {
  /** An HTTP request to /graphql. */
  http(req: http.IncomingMessage, res: http.ServerResponse): Promise<unknown>;
  /** GET /sessions/<id>/events: a page of the log for HTTP caches (event-pages.ts). */
  eventPage(req: http.IncomingMessage, res: http.ServerResponse, path: string): Promise<void>;
  /** graphql-ws on the router's WebSocket server; dispose() closes its sockets (1001). */
  serveWebSocket(wss: WebSocketServer): { dispose(): void | Promise<void> };
  /** Direct sessionEvents delivery over graphql-ws (its counts). */
  wsDelivery: WsDelivery;
}

export function graphqlHandler(opts: GraphqlHandlerOptions): GraphqlHandler {
  const { guard, metrics, log } = opts;
  const security = opts.security ?? {};
  const toClientError = maskError(log);
  const limits = {
    maxTokens: security.maxTokens ?? DEFAULT_LIMITS.maxTokens,
    maxDepth: security.maxDepth ?? DEFAULT_LIMITS.maxDepth,
    maxAliases: security.maxAliases ?? DEFAULT_LIMITS.maxAliases,
    maxCost: security.maxCost ?? DEFAULT_LIMITS.maxCost,
  };
  const maxResponseBytes = security.maxResponseBytes ?? DEFAULT_LIMITS.maxResponseBytes;
  const maxHeldRequestChars = security.maxHeldRequestChars ?? DEFAULT_LIMITS.maxHeldRequestChars;
  const corsOrigins = guard.corsOrigins;
  const floor = guard.yogaPlugins();
  const graphiqlHeaders = useGraphiQLSecurityHeaders();
  const inputErrorCodes = useInputErrorCodes();
  const metricsPlugin = metrics && useMetrics(metrics);
  const closeUnsentStreams = useCloseUnsentStreams();
  // Every cross-cutting concern, registered here and only here, in request order.
  const own = [
    ...floor.first,
    graphiqlHeaders,
    useQueryLimits(limits),
    useVariableShape(),
    useResponseSizeLimit(maxResponseBytes),
    useHeldRequestLimit(maxHeldRequestChars),
    useStorableText(),
    useScopes(),
    inputErrorCodes,
    metricsPlugin,
    ...floor.streams,
    closeUnsentStreams,
    useJitQueries(),
    useWsDelivery(),
    // After every plugin that sets the execute or subscribe function.
    security.statementBounds !== false && useStatementDeadlines(statementTimeoutsOf(security)),
  ].filter((p): p is Plugin => Boolean(p));
  // Their onExecute hooks, in this order, run as one (one-execute-hook.ts); the extra plugins' after them.
  const plugins = [...own, oneExecuteHook(own), ...(opts.plugins ?? [])];

  const fence = fastLaneFence();
  const yoga = createYoga<{ req?: http.IncomingMessage }, Context>({
    schema,
    graphqlEndpoint: '/graphql',
    // With tokens, GraphiQL subscribes over SSE: that request carries the headers set in its editor.
    graphiql: { title: 'forkline', subscriptionsProtocol: guard.auth.enabled ? 'SSE' : 'WS' },
    renderGraphiQL: renderGraphiQLPage, // from the npm package, same-origin (http/graphiql.ts)
    landingPage: false,
    logging: false,
    maskedErrors: { maskError: toClientError },
    maxRequestBodySize: false, // the guard's body limit (http/http-body.ts) instead: same limit, a fraction of the cost
    // No Upload scalar, so no use for the multipart request spec; and its `operations` field, parsed out of form parts,
    // escapes the JSON bounds the guard holds a body to (http/http-body.ts): answered 415, as any other media type.
    multipart: false,
    // By text, for every transport: only short texts are kept (yoga's default kept 1,024 of any length).
    parserAndValidationCache: rememberedDocuments(),
    // Same-origin only (GraphiQL and the dashboard are served from here) unless origins are configured.
    cors: corsOrigins.length ? { origin: [...corsOrigins], allowedHeaders: ['authorization', 'content-type', 'x-graphql-yoga-csrf'] } : false,
    plugins: fence.around(plugins), // the fast lane sees every plugin they add (fast-lane.ts)
    context: (initial: { req?: http.IncomingMessage; res?: http.ServerResponse; socket?: WebSocket; principal?: Principal }): Context => {
      // graphql-ws operations come with their caller; HTTP requests passed the guard.
      const principal = initial.principal ?? (initial.req && guard.check(initial.req).principal);
      if (!principal) throw unauthenticated();
      const scope = { tenant: principal.tenant };
      const store = opts.services.store.forTenant(scope);
      return {
        scope,
        caller: principal,
        store,
        services: opts.services,
        sessionLoader: new SessionLoader(store),
        maxResponseBytes,
        gone: initial.socket ? socketGone(initial.socket) : initial.res && responseGone(initial.res),
        // Set per operation (graphql/plugins/statement-deadlines.ts) and on a resolver's first ask: the context keeps one shape.
        statements: undefined,
        reads: undefined,
        texts: undefined,
        modelRequests: undefined,
      };
    },
  });

  const fast =
    opts.fastLane !== false &&
    fastLane({
      yoga,
      guard,
      fence,
      // Request-level hooks that do not need to see the fast lane's requests, and why:
      allowed: [
        ...floor.first, // the fast lane asks the guard itself; a JSON POST is preflighted (no CSRF form can send it)
        graphiqlHeaders, // HTML pages only; the fast lane answers JSON
        inputErrorCodes, // rewords yoga's request-parser errors; the fast lane hands every unparsable body to yoga
        ...(metricsPlugin ? [metricsPlugin] : []), // counts errors per response: the fast lane counts them itself (onErrors)
        closeUnsentStreams, // streams only; the fast lane answers queries and mutations
        ...(opts.fastLaneAllowed ?? []),
      ],
      corsEnabled: corsOrigins.length > 0,
      maxTokens: limits.maxTokens,
      onErrors: (errors) => metrics && countErrors(metrics, errors),
    });

  const eventPage = eventPages({
    yoga,
    guard,
    store: opts.services.store,
    maxResponseBytes,
    statements: doorStatements(opts.security),
  });

  const wsDelivery = new WsDelivery(maxResponseBytes);
  return {
    wsDelivery,
    eventPage,
    async http(req, res) {
      if (!(await guard.withinBodyLimit(req, res))) return;
      if (fast && (await fast(req, res))) return;
      return await yoga(req, res);
    },
    serveWebSocket(wss) {
      return useServer<Record<string, unknown>, { req?: http.IncomingMessage }>(
        {
          connectionInitWaitTimeout: guard.timeouts.wsInitMs,
          // An operation failing inside the server closes its socket (4500) with a generic reason: graphql-ws
          // words it from the error's message unless NODE_ENV is production, which nothing here sets.
          isProd: true,
          // yoga's recipe: rootValue carries the enveloped execute and subscribe (set in onSubscribe).
          // eslint-disable-next-line @typescript-eslint/no-explicit-any
          execute: (args: any) => args.rootValue.execute(args),
          // eslint-disable-next-line @typescript-eslint/no-explicit-any
          subscribe: (args: any) => args.rootValue.subscribe(args),
          onConnect: (ctx) => {
            const { socket, request } = ctx.extra;
            // graphql-ws keeps the payload (ctx.connectionParams) as long as the socket lives.
            if (jsonCharsPast(ctx.connectionParams, maxHeldRequestChars)) {
              socket.close(CloseCode.BadRequest, heldRequestTooLarge('connection_init', maxHeldRequestChars).slice(0, 123));
              return false;
            }
            // Busy while graphql-ws holds an operation of the socket (its public record of them).
            const busy = () => Object.keys(ctx.subscriptions).length > 0;
            return guard.openSocket(socket, connectionAuthorization(ctx.connectionParams, request), request.socket.remoteAddress, busy);
          },
          onSubscribe: async (ctx, id, params) => {
            // Errors here answer this operation only; thrown, they would close the whole socket.
            try {
              // graphql-ws holds each operation it runs under its id from before this hook to its end.
              const { principal, refused } = guard.admitOperation(ctx.extra.socket, id, (held) => held in ctx.subscriptions);
              if (refused) throw new GraphQLError(refused.message, { extensions: { code: refused.code } });
              const {
                schema: s,
                execute,
                subscribe,
                contextFactory,
                parse,
                validate,
              } = yoga.getEnveloped({
                ...ctx,
                req: ctx.extra.request,
                socket: ctx.extra.socket,
                principal,
                params,
              });
              const document = parse(params.query);
              const errors = validate(s, document);
              if (errors.length) throw errors;
              const contextValue = { ...(await contextFactory()), ws: { socket: ctx.extra.socket, raw: ctx.extra.request.socket, id, delivery: wsDelivery } };
              // Last: from here graphql-ws runs the operation, and onComplete (or the socket's close) releases it.
              const capped =
                getOperationAST(document, params.operationName)?.operation === 'subscription' ? guard.startSubscription(ctx.extra.socket, id) : undefined;
              if (capped) throw new GraphQLError(capped.message, { extensions: { code: capped.code } });
              return {
                schema: s,
                operationName: params.operationName,
                document,
                variableValues: params.variables,
                contextValue,
                rootValue: { execute, subscribe },
              };
            } catch (err) {
              guard.endSubscription(ctx.extra.socket, id); // graphql-ws answers the errors and never calls onComplete
              const errors = (Array.isArray(err) ? err : [err]).map((e) => toClientError(e, 'Unexpected error.') as GraphQLError);
              if (metrics) countErrors(metrics, errors);
              return errors.map(withoutInternals);
            }
          },
          onComplete: (ctx, id) => guard.endSubscription(ctx.extra.socket, id),
          onNext: (_ctx, _id, _payload, _args, result) => {
            if (!('errors' in result) || !result.errors) return;
            if (metrics) countErrors(metrics, result.errors);
            return resultWithoutInternals(result);
          },
        },
        wss,
        0, // graphql-ws's keep-alive drops slow readers with 1006 and no reason: http/ws-liveness.ts instead
      );
    },
  };
}
