// The query cost estimate (graphql/query-cost.ts), without a server: a
// fragment costs what its selections cost in place, page sizes multiply,
// event data weighs more than a scalar, an object of its parent's row weighs
// its leaves, Session.recording is counted, and the
// client's own operations stay far below the limit.
import fs from 'node:fs';
import path from 'node:path';
import { parse } from 'graphql';
import { describe, expect, it } from 'vitest';
import { schema } from '../../src/graphql/schema.ts';
import { operationCost, queryCost } from '../../src/graphql/query-cost.ts';
import { DEFAULT_LIMITS } from '../../src/http/security.ts';
import { PROJECT_ROOT } from '../helpers/process.ts';

const cost = (text: string, variables?: Record<string, unknown>, operationName?: string) => queryCost(schema, parse(text), operationName, variables);
const summary = 'id title status eventCount parent { id title }';

describe('the cost estimate', () => {
  it('charges a fragment, spread or inline, exactly what its selections cost written in place', () => {
    const inline = cost(`{ sessions(first: 500) { edges { node { ${summary} } } pageInfo { hasNextPage } } }`);
    expect(cost(`{ sessions(first: 500) { edges { node { ...S } } pageInfo { hasNextPage } } } fragment S on Session { ${summary} }`)).toBe(inline);
    expect(cost(`{ sessions(first: 500) { edges { node { ... on Session { ${summary} } } } pageInfo { hasNextPage } } }`)).toBe(inline);
    // A fragment on the connection itself (what client/operations/sessions.graphql shares), and nested fragments.
    expect(
      cost(
        `{ sessions(first: 500) { ...Page } } fragment Page on SessionConnection { edges { node { ...S } } pageInfo { hasNextPage } } fragment S on Session { ${summary} }`,
      ),
    ).toBe(inline);
    // The same fragment spread twice costs twice.
    expect(
      cost(
        `{ a: sessions(first: 500) { ...P } b: sessions(first: 500) { ...P } } fragment P on SessionConnection { edges { node { ${summary} } } pageInfo { hasNextPage } }`,
      ),
    ).toBe(2 * inline);
  });

  it("prices an object made of its parent's row (Session.model) as its leaves, like the row's scalars", () => {
    const page = (fields: string) => cost(`{ sessions(first: 100) { edges { node { id ${fields} } } } }`);
    expect(page('model { provider model }')).toBe(page('title status'));
    expect(page('parent { id title }')).toBeGreaterThan(page('title status'));
  });

  it('multiplies by page sizes, from literals, variables, defaults', () => {
    const page = (n: string) => `{ sessions(first: ${n}) { edges { node { id } } } }`;
    expect(cost(page('10'))).toBe(10 * cost(page('1')));
    expect(cost('query($n: Int) { sessions(first: $n) { edges { node { id } } } }', { n: 10 })).toBe(cost(page('10')));
    expect(cost('query($n: Int = 10) { sessions(first: $n) { edges { node { id } } } }')).toBe(cost(page('10')));
  });

  it("charges for what a page of events may carry: ten aliased pages of 500 events' data are over the limit", () => {
    const pages = (n: number) =>
      `query($id: ID!) { session(id: $id) { ${Array.from({ length: n }, (_, i) => `p${i}: events(first: 500) { edges { node { data } } }`).join(' ')} } }`;
    expect(cost(pages(10))).toBeGreaterThan(DEFAULT_LIMITS.maxCost);
    expect(cost(pages(1))).toBeLessThan(DEFAULT_LIMITS.maxCost / 2);
    expect(cost('{ session(id: "s") { events(first: 500) { edges { node { data } } } } }')).toBeGreaterThan(
      cost('{ session(id: "s") { events(first: 500) { edges { node { type } } } } }'),
    );
  });

  it('counts Session.recording reads with the page sizes around them, through fragments', () => {
    const once = (text: string) => operationCost(schema, parse(text), undefined, {}).once;
    expect(once('{ session(id: "s") { recording } }')).toEqual({ 'Session.recording': 1 });
    expect(once('{ session(id: "s") { a: recording b: recording c: recording } }')).toEqual({ 'Session.recording': 3 });
    expect(once('{ sessions(first: 10) { edges { node { ...R } } } } fragment R on Session { recording }')).toEqual({ 'Session.recording': 10 });
    expect(once('{ a: session(id: "s") { ...R } b: session(id: "t") { ...R } } fragment R on Session { recording }')).toEqual({ 'Session.recording': 2 });
    expect(once('{ session(id: "s") { id } }')).toEqual({});
  });

  it("keeps every one of the client's operations far below the limit, at the largest page (500)", () => {
    const dir = path.join(PROJECT_ROOT, 'client/operations');
    const text = fs
      .readdirSync(dir)
      .filter((f) => f.endsWith('.graphql'))
      .map((f) => fs.readFileSync(path.join(dir, f), 'utf8'))
      .join('\n');
    const document = parse(text);
    const costs: Record<string, number> = {};
    for (const d of document.definitions) {
      if (d.kind !== 'OperationDefinition' || !d.name) continue;
      costs[d.name.value] = queryCost(schema, document, d.name.value, { first: 500, last: 500 });
    }
    console.log(costs);
    expect(Object.keys(costs).length).toBeGreaterThan(5);
    for (const [name, c] of Object.entries(costs)) expect(c, name).toBeLessThan(DEFAULT_LIMITS.maxCost);
  });
});
