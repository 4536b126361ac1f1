// An events page reads the events' data only when its selection asks for it
// (graphql/events-connection.ts eventPageShape): `events { edges { node { seq
// type } } }` on a log of megabyte events is a statement without the data
// column, whole pages of it (no byte budget cuts it), while a page that asks
// for `data` — directly or through a fragment — still reads it, held to
// FORKLINE_PAGE_BYTES. Statements are taken from the service's pool (onQuery).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp, type TestApp } from '../helpers/app.ts';
import { eventStatements } from '../helpers/event-statements.ts';

const EVENTS = 50;
const MB = 1024 * 1024;
/** Small enough that a page of these events with their data is cut: three fit. */
const PAGE_BYTES = 3 * MB;
let app: TestApp;
let sessionId: string;
let forkId: string;
const statements = eventStatements();

beforeAll(async () => {
  app = await startTestApp({ pageBytes: PAGE_BYTES, onQuery: statements.onQuery });
  const scope = { tenant: 'local' };
  sessionId = (await app.services.store.createSession(scope, { title: 'big events' })).id;
  // Each event ~1 MB of data that does not compress (Postgres would otherwise store it in a few kB).
  let x = 0x9e3779b9;
  const filler = () =>
    Array.from({ length: MB / 8 }, () => {
      x = (Math.imul(x, 1103515245) + 12345) >>> 0;
      return x.toString(36).padStart(8, '0').slice(-8);
    }).join('');
  for (let i = 0; i < EVENTS; i += 5)
    await app.services.store.append(
      sessionId,
      Array.from({ length: 5 }, (_, j) => ({ type: 'plugin/test/blob', data: { n: i + j, filler: filler() } })),
    );
  // A fork reads its first half from the parent's rows: a page over both segments is one statement too.
  forkId = (await app.services.store.fork(scope, sessionId, 24)).session.id;
  await app.services.store.append(forkId, [{ type: 'plugin/test/blob', data: { n: 'own', filler: 'small' } }]);
}, 120_000);
afterAll(() => app?.close());

const run = (query: string, variables: Record<string, unknown>) => statements.run(app, query, variables);

const readsData = (sql: string) => /\bdata\b/.test(sql);

describe('an events page without `data` in its selection', () => {
  it('reads no data from Postgres and is not cut by the page bytes: 50 events of 1 MB in one page', async () => {
    const { data, sql } = await run(
      'query($id: ID!) { session(id: $id) { events(afterSeq: 0, first: 50) { edges { node { id seq type createdAt } } pageInfo { hasNextPage } } } }',
      {
        id: sessionId,
      },
    );
    const events = data.session.events;
    expect(events.edges.map((e: any) => e.node.seq)).toEqual(Array.from({ length: EVENTS }, (_, i) => i + 1)); // seq 0 is the session's creation
    expect(events.edges.every((e: any) => e.node.type === 'plugin/test/blob')).toBe(true);
    expect(events.pageInfo.hasNextPage).toBe(false);
    expect(sql.length).toBe(1);
    // Counted, not measured: no statement reads `data` (the 50 MB this page would otherwise hold; the process's RSS,
    // which the collector and everything else in it move, is not asserted).
    expect(sql.filter(readsData), sql.join('\n')).toEqual([]);
  });

  it('backwards, filtered by type or origin, and through a fork: no data read', async () => {
    const queries: Array<[string, Record<string, unknown>, number]> = [
      ['query($id: ID!) { session(id: $id) { events(last: 50) { edges { node { seq } } } } }', { id: sessionId }, EVENTS],
      ['query($id: ID!) { session(id: $id) { events(first: 50, types: ["plugin/test/blob"]) { edges { node { seq } } } } }', { id: sessionId }, EVENTS],
      ['query($id: ID!) { session(id: $id) { events(last: 50, types: ["plugin/test/blob"]) { edges { node { seq } } } } }', { id: sessionId }, EVENTS],
      ['query($id: ID!) { session(id: $id) { events(first: 50, origin: INHERITED) { edges { node { seq inherited } } } } }', { id: forkId }, 25],
      ['query($id: ID!) { session(id: $id) { events(first: 50) { edges { node { seq synthetic } } } } }', { id: forkId }, 27],
      // None here: the statement is what is checked.
      ['query($id: ID!) { session(id: $id) { events(first: 50, origin: SYNTHETIC) { edges { node { __typename seq } } } } }', { id: forkId }, 0],
    ];
    for (const [query, variables, count] of queries) {
      const { data, sql } = await run(query, variables);
      expect(data.session.events.edges.length, query).toBe(count);
      expect(sql.filter(readsData), `${query}\n${sql.join('\n')}`).toEqual([]);
    }
  });
});

describe('an events page with `data` in its selection', () => {
  it.each([
    ['directly', '{ edges { node { seq data } } pageInfo { hasNextPage } }', ''],
    ['through a fragment', '{ edges { node { seq ...Blob } } pageInfo { hasNextPage } }', 'fragment Blob on Event { data }'],
    ['through a fragment on the connection', '{ ...Page }', 'fragment Page on EventConnection { edges { node { seq data } } pageInfo { hasNextPage } }'],
  ])('%s: reads it, held to the page bytes', async (_how, selection, fragment) => {
    const { data, sql } = await run(`query($id: ID!) { session(id: $id) { events(afterSeq: 0, first: 50) ${selection} } } ${fragment}`, { id: sessionId });
    const events = data.session.events;
    expect(events.edges.length).toBeGreaterThan(0);
    expect(events.edges.length).toBeLessThanOrEqual(PAGE_BYTES / MB + 1); // the budget, plus the event that passes it
    expect(events.pageInfo.hasNextPage).toBe(true);
    expect(events.edges.map((e: any) => e.node.data.n + 1)).toEqual(events.edges.map((e: any) => e.node.seq));
    expect(events.edges[0].node.data.filler.length).toBe(MB);
    expect(sql.some(readsData)).toBe(true);
  });
});
