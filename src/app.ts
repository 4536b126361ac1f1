// Composition root: database, store, host services and the GraphQL server.
// Used by main.ts and by the tests (which start real servers through it).
import { openDatabase, type Database } from './db/database.ts';
import { SessionStore } from './store/session-store.ts';
import { SessionController } from './host/controller.ts';
import { startServer, type RunningServer } from './graphql/server.ts';
import type { Services } from './host/services.ts';
import { toolEffectOf } from './agent/tools.ts';

export interface AppOptions {
  databaseUrl: string;
  host?: string;
  port?: number;
  log?: (msg: string, err?: unknown) => void;
  /** Observes every SQL statement Prisma sends (tests and bench count them). */
  onQuery?: (sql: string) => void;
}

export interface App {
  url: string;
  db: Database;
  services: Services;
  server: RunningServer;
  close(): Promise<void>;
}

export async function createApp(opts: AppOptions): Promise<App> {
  const db = openDatabase(opts.databaseUrl, { onQuery: opts.onQuery });
  const store = new SessionStore(db.prisma, db.pool, toolEffectOf);
  const controller = new SessionController(store);
  const services: Services = { store, controller };
  const server = await startServer({
    services,
    prisma: db.prisma,
    host: opts.host ?? '127.0.0.1',
    port: opts.port ?? 0,
    log: opts.log,
  });
  return {
    url: server.url,
    db,
    services,
    server,
    async close() {
      await server.close();
      await db.close();
    },
  };
}
