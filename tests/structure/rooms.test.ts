// The structure drawn from imports (ARCHITECTURE.md): arrows between rooms run
// one way, down — core ← store ← agent/host ← http's guard ← graphql/agui ←
// the router (http/http-server.ts) ← the composition root — and no module
// imports itself back through a circle. A new import that runs back up fails here.
import fs from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';

const SRC = path.resolve(import.meta.dirname, '../../src');
const ROUTER = 'http/http-server.ts';

/** A module's room: its folder under src/, the router apart from the rest of http/, a top-level file by its name. */
function roomOf(file: string): string {
  if (file === ROUTER) return 'router';
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
  // Handlers behind the router: they stand on the guard, never on each other or on the router.
  graphql: ['core', 'db', 'store', 'agent', 'host', 'http', 'generated', 'metrics.ts', 'logger.ts'],
  agui: ['core', 'db', 'store', 'agent', 'host', 'http'],
  router: ['http', 'graphql', 'agui', 'host', 'metrics.ts', 'logger.ts'],
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

/** Every module's relative imports (type-only ones too: they are arrows of the design), as paths under src/. */
function importGraph(): Map<string, string[]> {
  const graph = new Map<string, string[]>();
  for (const file of sources(SRC)) {
    const text = fs.readFileSync(path.join(SRC, file), 'utf8');
    const targets = [...text.matchAll(/(?:\bfrom|\bimport)\s*\(?\s*['"](\.{1,2}\/[^'"]+)['"]/g)].map((m) => path.normalize(path.join(path.dirname(file), m[1])));
    graph.set(file, targets);
  }
  return graph;
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

  it('only the composition root imports the router', () => {
    const importers = [...graph].filter(([, targets]) => targets.includes(ROUTER)).map(([file]) => file);
    expect(importers).toEqual(['app.ts']);
  });

  it('have no circle of imports', () => {
    expect(findCycle(graph)).toBeUndefined();
  });

  it('the check sees a circle and an arrow back up when there is one', () => {
    expect(findCycle(new Map([['a.ts', ['b.ts']], ['b.ts', ['c.ts']], ['c.ts', ['a.ts']]]))).toEqual(['a.ts', 'b.ts', 'c.ts', 'a.ts']);
    expect(MAY_IMPORT.graphql).not.toContain('agui');
    expect(MAY_IMPORT.agui).not.toContain('graphql');
    expect(MAY_IMPORT.http).not.toContain('graphql');
  });
});
