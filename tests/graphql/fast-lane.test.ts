// The fast lane (graphql/fast-lane.ts) answers exactly as yoga does: the same
// requests sent to a server with it and to one without it (same database) get
// the same status, content type, extra headers and body. And it really serves
// the common requests: yoga's request hooks never see them.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Plugin } from 'graphql-yoga';
import { startTestApp, type TestApp } from '../helpers/app.ts';
import { createTestDatabase } from '../helpers/db.ts';
import { regularMediaType } from '../../src/graphql/fast-lane.ts';

let fast: TestApp;
let slow: TestApp;
let seenByYoga = 0;
const countYogaRequests: Plugin = { onRequest: () => void seenByYoga++ };
let sessionId = '';

beforeAll(async () => {
  const databaseUrl = await createTestDatabase();
  // On the allow-list: it counts what yoga sees, and is meant to miss the fast lane.
  fast = await startTestApp({ databaseUrl, yogaPlugins: [countYogaRequests], fastLaneAllowed: [countYogaRequests] });
  slow = await startTestApp({ databaseUrl, fastLane: false });
  sessionId = (await fast.ok('mutation { createSession(input: { title: "lane" }) { id } }')).createSession.id;
});
afterAll(async () => {
  await fast?.close();
  await slow?.close();
});

interface Sent {
  body: string;
  headers?: Record<string, string>;
}

const json = (query: string, variables?: unknown, extra: Record<string, unknown> = {}) => JSON.stringify({ query, variables, ...extra });

async function answer(app: TestApp, { body, headers = {} }: Sent) {
  const res = await fetch(app.url, { method: 'POST', headers: { 'content-type': 'application/json', ...headers }, body });
  const text = await res.text();
  const extra = [...res.headers].filter(([k]) => !['date', 'connection', 'keep-alive', 'content-length', 'transfer-encoding'].includes(k));
  // Request ids of masked errors are random; everything else must match byte for byte.
  return { status: res.status, headers: Object.fromEntries(extra), body: text.replace(/"requestId":"[^"]+"/g, '"requestId":"…"') };
}

describe('the fast lane', () => {
  it('answers every kind of request exactly as yoga does', async () => {
    const sent: Sent[] = [
      { body: json('{ __typename }') },
      { body: json('query($id: ID!) { session(id: $id) { id title eventCount events(first: 3) { edges { cursor node { id seq type data inherited synthetic } } pageInfo { hasNextPage endCursor } } } }', { id: sessionId }) },
      { body: json('{ sessions(first: 2) { edges { cursor node { id title parent { id } } } pageInfo { hasNextPage hasPreviousPage startCursor endCursor } } }') },
      { body: json('query A { __typename } query B { sessions(first: 1) { edges { node { id } } } }', undefined, { operationName: 'B' }) },
      // Errors of every origin: arguments, variables, resolvers, validation, syntax, the operation name.
      { body: json('{ sessions(first: -1) { edges { node { id } } } }') },
      { body: json('query($f: Int) { sessions(first: $f) { edges { node { id } } } }', { f: 'many' }) },
      { body: json('query($id: ID!) { session(id: $id) { id } }', {}) },
      { body: json(`{ session(id: "${sessionId}") { events(after: "nope") { edges { node { id } } } } }`) },
      { body: json('mutation { sendMessage(input: { sessionId: "ses_missing", text: "hi" }) { inputId } }') },
      { body: json('{ nope }') },
      { body: json('{ sessions(first: 500) { edges { node { children(first: 500) { edges { node { children(first: 500) { edges { node { id } } } } } } } } } }') },
      { body: json(`{ ${Array.from({ length: 40 }, (_, i) => `a${i}: sessions(first: 1) { edges { node { id } } }`).join(' ')} }`) },
      { body: json(`{ ${'__typename '.repeat(3000)} }`) },
      { body: json(`query { ${'session(id: "x") { parent { '.repeat(8)}id${' } }'.repeat(8)} }`) },
      { body: json('{ sessions(first: 1) { ') },
      { body: json('query A { __typename } query B { __typename }') },
      { body: json('query A { __typename }', undefined, { operationName: 'Z' }) },
      { body: json('subscription($id: ID!) { sessionEvents(sessionId: $id) { seq } }', { id: sessionId }), headers: { accept: 'application/json' } },
      // Accept headers: yoga's negotiation decides the content type and the status of request errors.
      { body: json('{ nope }'), headers: { accept: 'application/graphql-response+json' } },
      { body: json('{ __typename }'), headers: { accept: 'application/graphql-response+json, application/json' } },
      { body: json('{ __typename }'), headers: { accept: 'application/json;charset=latin1' } },
      { body: json('{ __typename }'), headers: { accept: 'text/html' } },
      { body: json('{ __typename }'), headers: { accept: 'application/json, text/event-stream' } },
      // Bodies yoga refuses.
      { body: '{"query": "{ __typename }", "extra": 1}' },
      { body: '[{"query": "{ __typename }"}]' },
      { body: '{"query": 5}' },
      { body: '{"query": "{ __typename }", "variables": [1]}' },
      { body: 'not json' },
      { body: '' },
      { body: json('{ __typename }', undefined, { extensions: { persistedQuery: { version: 1, sha256Hash: 'abc' } } }) },
      { body: json('{ __typename }'), headers: { 'content-type': 'text/plain' } },
      { body: json('query($t: String) { __typename s: sessions(first: 1, status: IDLE) { edges { node { title } } } }', { t: 'bad \u0000 text' }) },
    ];
    for (const s of sent) {
      const [a, b] = [await answer(fast, s), await answer(slow, s)];
      expect(a, s.body).toEqual(b);
    }
  });

  it('writes exactly what JSON.stringify writes, escapes included', async () => {
    const title = 'quote " backslash \\ newline \n tab \t é 😀 line-sep \u2028 ctrl \u0001 </script>';
    const id = (await fast.ok('mutation($t: String) { createSession(input: { title: $t }) { id } }', { t: title })).createSession.id;
    await fast.services.store.append(id, [{ type: 'plugin/test/note', data: { text: title, n: 1.5, big: 2 ** 53, neg: -0, nested: [null, true, { a: [] }] } }]);
    const queries = [
      json('{ sessions(first: 3) { edges { cursor node { id title eventCount turnCount status createdAt forkedAtSeq parent { id title } } } pageInfo { hasNextPage endCursor } } }'),
      json('query($id: ID!) { session(id: $id) { id title events(first: 5) { edges { node { id seq type data inherited synthetic createdAt } } } } }', { id }),
      json('query($id: ID!) { node(id: $id) { id ... on Session { title } } }', { id }),
    ];
    for (const body of queries) {
      const { body: text } = await answer(fast, { body });
      const value = JSON.parse(text);
      expect(value.errors).toBeUndefined();
      expect(text).toBe(JSON.stringify(value));
    }
  });

  it('serves plain queries and mutations without yoga, and leaves the rest to it', async () => {
    const before = seenByYoga;
    for (let i = 0; i < 20; i++) await fast.ok('{ sessions(first: 5) { edges { node { id } } } }');
    await fast.ok('mutation { createSession(input: { title: "fast" }) { id } }');
    expect(seenByYoga - before).toBe(0);
    await fast.gql('{ nope }');
    await fetch(`${fast.url}?query=${encodeURIComponent('{ __typename }')}`, { headers: { 'x-graphql-yoga-csrf': '1' } });
    expect(seenByYoga - before).toBe(2);
  });

  it('picks the media type yoga picks', () => {
    expect(regularMediaType(undefined)).toBe('application/json');
    expect(regularMediaType('*/*')).toBe('application/json');
    expect(regularMediaType('application/graphql-response+json, application/json')).toBe('application/graphql-response+json');
    expect(regularMediaType('application/json, application/graphql-response+json')).toBe('application/json');
    expect(regularMediaType('text/html')).toBeNull();
    expect(regularMediaType('application/json; charset=latin1')).toBeNull();
    expect(regularMediaType('text/event-stream')).toBeNull();
  });
});
