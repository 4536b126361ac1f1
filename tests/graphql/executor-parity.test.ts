// The hot reads' fast path (the HTTP fast lane, graphql-jit, the DateTime
// scalar writing strings: http/graphql/fast-lane.ts, graphql/plugins/jit.ts,
// graphql/builder.ts) answers exactly as graphql-js's executor behind yoga:
// the same documents sent to a server with the fast path and to one with
// neither the fast lane nor the JIT (same database) get the same status and
// the same JSON — data, nulls, aliases, fragments, @include/@skip, variables
// and their defaults, errors, the query-cost limit and the response-size
// ceiling. Byte for byte where there are no errors; with errors graphql-jit
// writes `data` before `errors`, graphql-js after.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { execute } from 'graphql';
import type { Plugin } from 'graphql-yoga';
import { startTestApp, type TestApp } from '../helpers/app.ts';
import { createTestDatabase } from '../helpers/db.ts';

/** Registered after the JIT's plugin: its executor replaces the compiled query. */
const standardExecutor: Plugin = { onExecute: ({ setExecuteFn }) => setExecuteFn(execute) };
const limits = { maxCost: 20_000, maxResponseBytes: 3_000 };

let fast: TestApp;
let standard: TestApp;
let root = '';
let child = '';

beforeAll(async () => {
  const databaseUrl = await createTestDatabase();
  fast = await startTestApp({ databaseUrl, security: limits });
  standard = await startTestApp({ databaseUrl, security: limits, fastLane: false, yogaPlugins: [standardExecutor] });
  root = (await fast.ok('mutation { createSession(input: { title: "parity \\"root\\" é ✓" }) { id } }')).createSession.id;
  child = (await fast.ok('mutation($id: ID!) { forkSession(input: { sessionId: $id, atSeq: 0 }) { session { id } } }', { id: root })).forkSession.session.id;
});
afterAll(async () => {
  await fast?.close();
  await standard?.close();
});

async function answer(app: TestApp, query: string, variables?: Record<string, unknown>) {
  const res = await fetch(app.url, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ query, variables }) });
  // Request ids of masked errors are random; everything else must match byte for byte.
  const body = (await res.text()).replace(/"requestId":"[^"]+"/g, '"requestId":"…"');
  return { status: res.status, body, json: JSON.parse(body) as { errors?: unknown } };
}

const EVENT_FIELDS = 'id seq type data inherited synthetic createdAt sessionId';

describe('the fast path and the standard executor', () => {
  it('answer every read the same', async () => {
    const cases: Array<[string, Record<string, unknown>?]> = [
      // The hot reads.
      [
        `query($id: ID!, $after: Int) { session(id: $id) { events(afterSeq: $after, first: 100) { edges { node { ${EVENT_FIELDS} } } } } }`,
        { id: child, after: -1 },
      ],
      ['{ sessions(first: 50) { edges { node { id title eventCount turnCount parent { id } } } } }'],
      // Dates, cursors and page info.
      [
        '{ sessions(first: 5) { edges { cursor node { id createdAt updatedAt status lastTurnFailed forkedAtSeq } } pageInfo { hasNextPage hasPreviousPage startCursor endCursor } } }',
      ],
      // Nulls: a missing session, a root's parent, an absent title.
      ['query($id: ID!) { session(id: $id) { id parent { id title } } missing: session(id: "ses_missing") { id } }', { id: root }],
      // Aliases, fragments (named and inline), @include/@skip by variables, defaults.
      [
        `query($id: ID!, $withData: Boolean!, $skipType: Boolean = true, $n: Int = 2) {
           a: session(id: $id) { ...S events(first: $n) { edges { node { ...E d: data @include(if: $withData) t: type @skip(if: $skipType) } } } }
           b: session(id: $id) { ... on Session { i: id c: createdAt } }
         }
         fragment S on Session { id eventCount createdAt parent { id createdAt } }
         fragment E on Event { seq createdAt at: createdAt }`,
        { id: child, withData: true },
      ],
      [
        'query($id: ID!, $withData: Boolean!) { session(id: $id) { events(first: 1) { edges { node { seq data @include(if: $withData) type @skip(if: $withData) } } } } }',
        { id: root, withData: false },
      ],
      // Errors: arguments refused in a resolver, a bad cursor, an unknown id where a session is required.
      ['query($id: ID!) { session(id: $id) { id events(afterSeq: -5, first: 2) { edges { node { seq } } } } }', { id: root }],
      ['query($id: ID!) { session(id: $id) { id events(after: "nope", first: 2) { edges { node { seq } } } } }', { id: root }],
      ['{ sessions(first: 501) { edges { node { id } } } }'],
      ['{ sessions(first: 2, last: 2) { edges { node { id } } } }'],
      // Variables coerced before execution (graphql-jit's refusal of a missing or
      // mistyped variable has no `locations`, graphql-js's has: not compared here).
      ['query($id: ID!) { session(id: $id) { id } }', { id: 5 }],
      // The query-cost limit, and the response-size ceiling (3,000 bytes here).
      ['{ sessions(first: 500) { edges { node { id children(first: 500) { edges { node { id } } } } } } }'],
      [
        `query($id: ID!) { session(id: $id) { ${Array.from({ length: 20 }, (_, i) => `e${i}: events(first: 2) { edges { node { ${EVENT_FIELDS} } } }`).join(' ')} } }`,
        { id: child },
      ],
    ];
    for (const [query, variables] of cases) {
      const [a, b] = [await answer(fast, query, variables), await answer(standard, query, variables)];
      expect({ status: a.status, json: a.json }, query).toEqual({ status: b.status, json: b.json });
      if (!a.json.errors) expect(a.body, query).toBe(b.body);
    }
    // The cases above do reach what they are meant to: data, errors, both limits.
    const byStart = (start: string) => cases.find(([q]) => q.startsWith(start))!;
    const hot = await answer(fast, ...cases[0]);
    const refused = await answer(fast, ...byStart('query($id: ID!) { session(id: $id) { id events(afterSeq: -5'));
    const costly = await answer(fast, ...byStart('{ sessions(first: 500)'));
    const large = await answer(fast, ...cases[cases.length - 1]);
    expect(JSON.parse(hot.body).data.session.events.edges.length).toBeGreaterThan(0);
    expect(hot.body).toMatch(/"createdAt":"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z"/);
    expect(refused.body).toContain('BAD_USER_INPUT');
    expect(costly.body).toContain('Query Cost limit');
    expect(large.body).toContain('RESPONSE_TOO_LARGE');
  });
});
