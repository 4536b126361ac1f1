// The structure drawn from imports (ARCHITECTURE.md): arrows between rooms run
// one way, down — core ← store ← agent/host ← http's guard ← graphql (the
// schema) ← the GraphQL door (http/graphql/), agui and chat ← the router
// (http/http-server.ts) ← the composition root — and no module imports itself
// back through a circle. A new import that runs back up fails here. And
// src/graphql/ holds only the schema, its plugins and resolvers: transports
// (HTTP, WebSocket, yoga's server) live in the GraphQL door.
import fs from 'node:fs';
import path from 'node:path';
import { describe, expect, expectTypeOf, it } from 'vitest';
import type { Context } from '../../src/graphql/context.ts';
import type { DoorServices, Services, TenantStores } from '../../src/host/services.ts';
import type { SessionStore } from '../../src/store/session-store.ts';
import type { TenantStore } from '../../src/store/tenant-store.ts';

const SRC = path.resolve(import.meta.dirname, '../../src');
const ROUTER = 'http/http-server.ts';
const GRAPHQL_DOOR = 'http/graphql';

/** A module's room: its folder under src/, the router and the GraphQL door apart from the rest of http/, a top-level file by its name. */
function roomOf(file: string): string {
  if (file === ROUTER) return 'router';
  if (file.startsWith(`${GRAPHQL_DOOR}/`)) return GRAPHQL_DOOR;
  const [first, ...rest] = file.split('/');
  return rest.length ? first : file;
}

/** The rooms each room may import (besides itself). */
const MAY_IMPORT: Record<string, readonly string[]> = {
  core: [],
  'pid-alive.ts': [],
  'logger.ts': [],
  db: ['pid-alive.ts'],
  store: ['core', 'db'],
  agent: ['core', 'store'],
  'metrics.ts': ['agent'],
  host: ['core', 'db', 'store', 'agent'],
  telemetry: ['core', 'agent'],
  // The guard floor and the doors that are plain HTTP (/recordings, service endpoints).
  http: ['core', 'db', 'store', 'agent', 'host', 'metrics.ts', 'logger.ts', 'pid-alive.ts'],
  generated: [],
  // The schema, its plugins and resolvers: no door, no guard (the door passes the caller in the context).
  graphql: ['core', 'db', 'store', 'agent', 'host', 'generated', 'metrics.ts', 'logger.ts'],
  // Handlers behind the router: they stand on the guard, never on each other or on the router.
  [GRAPHQL_DOOR]: ['core', 'store', 'host', 'http', 'graphql', 'metrics.ts', 'logger.ts'],
  agui: ['core', 'db', 'store', 'agent', 'host', 'http'],
  chat: ['core', 'db', 'store', 'agent', 'host', 'http'],
  router: ['http', GRAPHQL_DOOR, 'agui', 'chat', 'host', 'metrics.ts', 'logger.ts'],
  // The composition root and its configuration import what they wire.
  'dashboard-static.ts': ['http'],
  'config.ts': ['http', 'agent', 'db', 'core', 'telemetry'],
  'app.ts': ['*'],
  'main.ts': ['*'],
};

function sources(dir: string): string[] {
  return fs.readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
    const p = path.join(dir, e.name);
    return e.isDirectory() ? sources(p) : p.endsWith('.ts') ? [path.relative(SRC, p)] : [];
  });
}

/** A module's imports (type-only ones too: they are arrows of the design): relative ones as paths under src/, and packages. */
function importsOf(file: string, text: string): { modules: string[]; packages: string[] } {
  const specifiers = [...text.matchAll(/(?:\bfrom|\bimport)\s*\(?\s*['"]([^'"]+)['"]/g)].map((m) => m[1]);
  return {
    modules: specifiers.filter((s) => s.startsWith('.')).map((s) => path.normalize(path.join(path.dirname(file), s))),
    packages: specifiers.filter((s) => !s.startsWith('.')),
  };
}

const texts = new Map(sources(SRC).map((file) => [file, fs.readFileSync(path.join(SRC, file), 'utf8')]));

/** Every module's relative imports, as paths under src/. */
function importGraph(): Map<string, string[]> {
  return new Map([...texts].map(([file, text]) => [file, importsOf(file, text).modules]));
}

/**
 * What src/graphql/ may hold: the schema (its builder, the resolvers' context,
 * the printer), plugins/, resolvers (types/) and helpers only they import.
 * Transports — node:http and net, ws, graphql-ws, yoga's server — belong to
 * the GraphQL door (http/graphql/). The door and the rest of src/ take from
 * src/graphql/ only the schema, the context (with its loader) and the plugins.
 */
const SCHEMA_FILES = ['graphql/schema.ts', 'graphql/builder.ts', 'graphql/context.ts', 'graphql/print-schema.ts'];
const GRAPHQL_ENTRIES = ['graphql/schema.ts', 'graphql/context.ts', 'graphql/session-loader.ts'];
const TRANSPORT_PACKAGES = /^(node:)?(http|https|http2|net|tls|dgram)$|^(ws|graphql-ws|graphql-sse)(\/|$)|^@whatwg-node\//;

/** Why each module breaks "src/graphql holds only the schema, its plugins and resolvers" (empty: none does). */
function graphqlRoomBreaches(graph: Map<string, string[]>, packages: Map<string, string[]>): string[] {
  const inGraphql = (f: string) => f.startsWith('graphql/');
  const breaches: string[] = [];
  for (const [file, targets] of graph) {
    if (inGraphql(file)) {
      for (const pkg of packages.get(file) ?? []) {
        if (TRANSPORT_PACKAGES.test(pkg)) breaches.push(`${file} imports a transport (${pkg}): it belongs in ${GRAPHQL_DOOR}/`);
        if (pkg === 'graphql-yoga' && !file.startsWith('graphql/plugins/'))
          breaches.push(`${file} imports graphql-yoga: only plugins/ may (the server is ${GRAPHQL_DOOR}/'s)`);
      }
      const kind = SCHEMA_FILES.includes(file) || /^graphql\/(plugins|types)\//.test(file);
      const usedInside = [...graph].some(([other, t]) => inGraphql(other) && other !== file && t.includes(file));
      if (!kind && !usedInside) breaches.push(`${file} is neither the schema, a plugin, a resolver nor a helper they import: it belongs in its door`);
    } else {
      for (const target of targets) {
        if (inGraphql(target) && !GRAPHQL_ENTRIES.includes(target) && !target.startsWith('graphql/plugins/')) {
          breaches.push(`${file} -> ${target}: outside src/graphql/, only its schema, context and plugins are imported`);
        }
      }
    }
  }
  return breaches;
}

/**
 * Store modules nothing above the store imports: how a log is kept (a fork's
 * shared prefix) and the pieces of the turn read model (store/turn-reads.ts
 * composes them). Resolvers hand the store a session row (store/log-as-of.ts).
 */
const STORE_INTERNALS = ['store/lineage.ts', 'store/fork-cut-times.ts'];

/** Each import of a store internal from outside the store (empty: none). */
function storeInternalsBreaches(graph: Map<string, string[]>): string[] {
  return [...graph].flatMap(([file, targets]) =>
    file.startsWith('store/') ? [] : targets.filter((t) => STORE_INTERNALS.includes(t)).map((t) => `${file} -> ${t}: only the store knows how a log is kept`),
  );
}

/**
 * The rooms that read for a caller — the schema (resolvers, subscriptions), the
 * HTTP doors, /chat and /agui — and what of the store they may not name: the
 * store itself and its parts, which read any tenant's sessions. They read
 * through a tenant's view, `store.forTenant(scope)` (store/tenant-store.ts),
 * and get the host's services as DoorServices, whose store is only that.
 */
const CALLER_ROOMS = /^(graphql|http|chat|agui)\//;
const SYSTEM_STORE_NAMES = new Set([
  'SessionStore',
  'SessionLog',
  'SessionRows',
  'SessionTrees',
  'FileBlobs',
  'SessionSearch',
  'SessionAppends',
  'SessionOwners',
  'Services',
]);

/** The names a module imports from each relative module (`type` and `as` dropped). */
function namedImportsOf(file: string, text: string): Array<{ target: string; name: string }> {
  return [...text.matchAll(/import\s+(?:type\s+)?\{([^}]*)\}\s*from\s*['"](\.[^'"]+)['"]/g)].flatMap((m) =>
    m[1]
      .split(',')
      .map(
        (n) =>
          n
            .trim()
            .replace(/^type\s+/, '')
            .split(/\s+as\s+/)[0],
      )
      .filter(Boolean)
      .map((name) => ({ target: path.normalize(path.join(path.dirname(file), m[2])), name })),
  );
}

/** Each import of the system's store or its parts by a room that reads for a caller (empty: none). */
function systemStoreBreaches(files: Map<string, string>): string[] {
  return [...files].flatMap(([file, text]) =>
    CALLER_ROOMS.test(file)
      ? namedImportsOf(file, text)
          .filter((i) => SYSTEM_STORE_NAMES.has(i.name) && (i.target.startsWith('store/') || i.target === 'host/services.ts'))
          .map((i) => `${file} imports ${i.name}: it reads for a caller, through store.forTenant(scope)`)
      : [],
  );
}

/** A circle of imports, if there is one (depth-first, the path kept). */
function findCycle(graph: Map<string, string[]>): string[] | undefined {
  const state = new Map<string, 'open' | 'done'>();
  const stack: string[] = [];
  const visit = (file: string): string[] | undefined => {
    if (state.get(file) === 'done') return undefined;
    if (state.get(file) === 'open') return [...stack.slice(stack.indexOf(file)), file];
    state.set(file, 'open');
    stack.push(file);
    for (const next of graph.get(file) ?? []) {
      const cycle = visit(next);
      if (cycle) return cycle;
    }
    stack.pop();
    state.set(file, 'done');
    return undefined;
  };
  for (const file of graph.keys()) {
    const cycle = visit(file);
    if (cycle) return cycle;
  }
  return undefined;
}

describe('the rooms of src/', () => {
  const graph = importGraph();

  it('import only the rooms below them', () => {
    expect(graph.size).toBeGreaterThan(100);
    const upward: string[] = [];
    for (const [file, targets] of graph) {
      const from = roomOf(file);
      const allowed = MAY_IMPORT[from];
      expect(allowed, `a new room ${from}: give it a row in MAY_IMPORT (and ARCHITECTURE.md)`).toBeDefined();
      for (const target of targets) {
        const to = roomOf(target);
        if (to !== from && !allowed.includes('*') && !allowed.includes(to)) upward.push(`${file} -> ${target} (${from} -> ${to})`);
      }
    }
    expect(upward).toEqual([]);
  });

  it('src/graphql/ holds only the schema, its plugins and resolvers', () => {
    const packages = new Map([...texts].map(([file, text]) => [file, importsOf(file, text).packages]));
    expect([...graph.keys()].filter((f) => f.startsWith(`${GRAPHQL_DOOR}/`))).toContain(`${GRAPHQL_DOOR}/graphql-handler.ts`);
    expect(graphqlRoomBreaches(graph, packages)).toEqual([]);
  });

  it('the check sees a transport in src/graphql/', () => {
    // Where the fast lane, WebSocket delivery and the handler used to be.
    const graph = new Map([
      ['graphql/schema.ts', ['graphql/types/event.ts']],
      ['graphql/types/event.ts', ['graphql/builder.ts']],
      ['graphql/builder.ts', []],
      ['graphql/fast-lane.ts', ['graphql/context.ts']],
      ['graphql/ws-delivery.ts', ['graphql/event-projection.ts']],
      ['graphql/event-projection.ts', []],
      ['http/http-server.ts', ['graphql/fast-lane.ts']],
    ]);
    const packages = new Map([
      ['graphql/fast-lane.ts', ['node:http', 'graphql-yoga']],
      ['graphql/ws-delivery.ts', ['ws']],
    ]);
    expect(graphqlRoomBreaches(graph, packages)).toEqual([
      'graphql/fast-lane.ts imports a transport (node:http): it belongs in http/graphql/',
      "graphql/fast-lane.ts imports graphql-yoga: only plugins/ may (the server is http/graphql/'s)",
      'graphql/fast-lane.ts is neither the schema, a plugin, a resolver nor a helper they import: it belongs in its door',
      'graphql/ws-delivery.ts imports a transport (ws): it belongs in http/graphql/',
      'graphql/ws-delivery.ts is neither the schema, a plugin, a resolver nor a helper they import: it belongs in its door',
      'http/http-server.ts -> graphql/fast-lane.ts: outside src/graphql/, only its schema, context and plugins are imported',
    ]);
  });

  it("nothing above the store imports how a log is kept or the turn read model's parts", () => {
    expect([...graph.keys()]).toEqual(expect.arrayContaining([...STORE_INTERNALS, 'store/turn-reads.ts', 'store/log-as-of.ts']));
    expect(storeInternalsBreaches(graph)).toEqual([]);
  });

  it('the check sees a resolver reading a lineage or building turns itself', () => {
    // Where Session's log reads and the turn read model used to be.
    const graph = new Map([
      ['graphql/types/agent.ts', ['store/lineage.ts', 'store/fork-cut-times.ts', 'store/session-log.ts']],
      ['graphql/types/files.ts', ['store/log-as-of.ts']],
      ['store/turn-reads.ts', ['store/lineage.ts', 'store/fork-cut-times.ts']],
    ]);
    expect(storeInternalsBreaches(graph)).toEqual([
      'graphql/types/agent.ts -> store/lineage.ts: only the store knows how a log is kept',
      'graphql/types/agent.ts -> store/fork-cut-times.ts: only the store knows how a log is kept',
    ]);
  });

  it("the schema and the doors read the store only through a tenant's view", () => {
    expect(systemStoreBreaches(texts)).toEqual([]);
    // Type-level (npm run typecheck): what a resolver and a door are handed.
    expectTypeOf<Context['store']>().toEqualTypeOf<TenantStore>();
    expectTypeOf<DoorServices['store']>().toEqualTypeOf<TenantStores>();
    expectTypeOf<Context['services']>().toEqualTypeOf<DoorServices>();
    // The view's surface: a new member is a new way to read, to be checked like the rest (store/tenant-store.ts).
    expectTypeOf<keyof TenantStore>().toEqualTypeOf<
      'scope' | 'log' | 'sessions' | 'files' | 'search' | 'getSession' | 'requireSession' | 'check' | 'commonPrefix' | 'append' | 'deletion' | 'reading'
    >();
    expectTypeOf<TenantStore>().not.toMatchTypeOf<Pick<SessionStore, 'transaction'>>();
    expectTypeOf<Services['store']>().toEqualTypeOf<SessionStore>();
  });

  it('the check sees a resolver or a door holding the whole store', () => {
    const files = new Map([
      ['graphql/types/agent.ts', "import type { SessionLog, StoredEvent } from '../../store/session-log.ts';"],
      ['chat/chat-handler.ts', "import type { Services } from '../host/services.ts';\nimport { type SessionStore as S } from '../store/session-store.ts';"],
      ['http/recording-download.ts', "import type { TenantStores } from '../host/services.ts';"],
      ['host/controller.ts', "import type { SessionStore } from '../store/session-store.ts';"],
    ]);
    expect(systemStoreBreaches(files)).toEqual([
      'graphql/types/agent.ts imports SessionLog: it reads for a caller, through store.forTenant(scope)',
      'chat/chat-handler.ts imports Services: it reads for a caller, through store.forTenant(scope)',
      'chat/chat-handler.ts imports SessionStore: it reads for a caller, through store.forTenant(scope)',
    ]);
  });

  it('only the composition root imports the router', () => {
    const importers = [...graph].filter(([, targets]) => targets.includes(ROUTER)).map(([file]) => file);
    expect(importers).toEqual(['app.ts']);
  });

  it('have no circle of imports', () => {
    expect(findCycle(graph)).toBeUndefined();
  });

  it('the check sees a circle and an arrow back up when there is one', () => {
    expect(
      findCycle(
        new Map([
          ['a.ts', ['b.ts']],
          ['b.ts', ['c.ts']],
          ['c.ts', ['a.ts']],
        ]),
      ),
    ).toEqual(['a.ts', 'b.ts', 'c.ts', 'a.ts']);
    expect(MAY_IMPORT.graphql).not.toContain('agui');
    expect(MAY_IMPORT.agui).not.toContain('graphql');
    expect(MAY_IMPORT.http).not.toContain('graphql');
  });
});
