// HTTP + WebSocket front: yoga serves GraphQL (POST/GET and SSE subscriptions)
// and GraphiQL at /graphql; graphql-ws serves subscriptions on the same path.
import http from 'node:http';
import { createYoga, type Plugin } from 'graphql-yoga';
import { WebSocketServer } from 'ws';
import { useServer } from 'graphql-ws/use/ws';
import { schema } from './schema.ts';
import type { Context } from './context.ts';
import type { Services } from '../host/services.ts';
import type { PrismaClient } from '@prisma/client';
import { maskError, useInputErrorCodes } from './plugins/error-codes.ts';

export interface ServerOptions {
  services: Services;
  prisma: PrismaClient;
  host: string;
  port: number;
  log?: (msg: string, err?: unknown) => void;
  /** Extra yoga plugins (auth, limits, metrics), registered in one place. */
  plugins?: Plugin[];
  /** Handles non-GraphQL paths (dashboard, health); return false to 404. */
  onOtherRequest?: (req: http.IncomingMessage, res: http.ServerResponse) => boolean | Promise<boolean>;
}

export interface RunningServer {
  url: string;
  httpServer: http.Server;
  close(): Promise<void>;
}

export async function startServer(opts: ServerOptions): Promise<RunningServer> {
  const log = opts.log ?? ((m, e) => console.error(m, e ?? ''));
  const yoga = createYoga<{ req?: http.IncomingMessage }, Context>({
    schema,
    graphqlEndpoint: '/graphql',
    graphiql: { title: 'forkline', subscriptionsProtocol: 'WS' },
    landingPage: false,
    logging: false,
    maskedErrors: { maskError: maskError(log) },
    plugins: [useInputErrorCodes(), ...(opts.plugins ?? [])],
    context: (): Omit<Context, never> => ({
      scope: { tenant: 'local' },
      prisma: opts.prisma,
      store: opts.services.store,
      services: opts.services,
    }),
  });

  const httpServer = http.createServer(async (req, res) => {
    const path = (req.url ?? '/').split('?')[0];
    if (path === '/graphql') return yoga(req, res);
    if (opts.onOtherRequest && (await opts.onOtherRequest(req, res))) return;
    res.writeHead(404, { 'content-type': 'text/plain' }).end('not found');
  });

  const wss = new WebSocketServer({ server: httpServer, path: '/graphql' });
  const wsCleanup = useServer<Record<string, unknown>, { req?: http.IncomingMessage }>(
    {
      execute: (args: any) => args.rootValue.execute(args),
      subscribe: (args: any) => args.rootValue.subscribe(args),
      onSubscribe: async (ctx, _id, params) => {
        const { schema: s, execute, subscribe, contextFactory, parse, validate } = yoga.getEnveloped({
          ...ctx,
          req: ctx.extra.request,
          socket: ctx.extra.socket,
          params,
        });
        const document = parse(params.query);
        const errors = validate(s, document);
        if (errors.length) return errors;
        return {
          schema: s,
          operationName: params.operationName,
          document,
          variableValues: params.variables,
          contextValue: await contextFactory(),
          rootValue: { execute, subscribe },
        };
      },
    },
    wss,
  );

  await new Promise<void>((resolve, reject) => {
    httpServer.once('error', reject);
    httpServer.listen(opts.port, opts.host, () => resolve());
  });
  const addr = httpServer.address() as import('node:net').AddressInfo;
  const hostForUrl = addr.family === 'IPv6' ? `[${addr.address}]` : addr.address;
  return {
    url: `http://${hostForUrl}:${addr.port}/graphql`,
    httpServer,
    async close() {
      await wsCleanup.dispose();
      wss.close();
      httpServer.closeAllConnections();
      await new Promise<void>((r) => httpServer.close(() => r()));
    },
  };
}
