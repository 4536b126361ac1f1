// The store's rooms, checked on the source: the rules ARCHITECTURE.md states
// for src/store hold because a change that breaks them fails here.
import { readdirSync, readFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { describe, expect, it } from 'vitest';

const root = join(import.meta.dirname, '../..');

function sources(dir: string): string[] {
  return readdirSync(join(root, dir), { withFileTypes: true, recursive: true })
    .filter((e) => e.isFile() && e.name.endsWith('.ts'))
    .map((e) => relative(root, join(e.parentPath, e.name)))
    .filter((f) => !f.startsWith('src/generated/'));
}

const where = (files: string[], pattern: RegExp) => files.filter((f) => pattern.test(readFileSync(join(root, f), 'utf8')));

describe('the store split by job', () => {
  const src = sources('src');

  it('names every NOTIFY channel in one module (store/channels.ts)', () => {
    expect(where(src, /'forkline_(events|sessions|deleted|control|work|turns)'/)).toEqual(['src/store/channels.ts']);
  });

  it('writes and compares lease columns only in store/leases.ts', () => {
    expect(where(src, /"lease(Owner|Token|ExpiresAt)"\s*(=|IS\b|<)/)).toEqual(['src/store/leases.ts']);
  });

  it('gives resolvers no Prisma client: the GraphQL layer reads through the store', () => {
    expect(where(sources('src/graphql'), /ctx\.prisma\b|@prisma\/client/)).toEqual([]);
  });

  it('reads no session row with SELECT * (rows name their columns: store/session-rows.ts)', () => {
    expect(where(src, /SELECT \* FROM "Session"/)).toEqual([]);
  });
});
