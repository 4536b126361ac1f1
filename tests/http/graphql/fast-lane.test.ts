// The fast lane (http/graphql/fast-lane.ts) answers exactly as yoga does: the same
// requests sent to a server with it and to one without it (same database) get
// the same status, content type, extra headers and body. And it really serves
// the common requests: yoga's request hooks never see them.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Plugin } from 'graphql-yoga';
import { startTestApp, type TestApp } from '../../helpers/app.ts';
import { createTestDatabase } from '../../helpers/db.ts';
import { waitFor } from '../../helpers/wait.ts';
import { assertFastLaneSafe, regularMediaType } from '../../../src/http/graphql/fast-lane.ts';
import { graphqlHandler } from '../../../src/http/graphql/graphql-handler.ts';
import { Guard } from '../../../src/http/guard.ts';
import { perDocument } from '../../../src/graphql/plugins/per-document.ts';
import type { ApiTokens } from '../../../src/host/api-tokens.ts';

let fast: TestApp;
let slow: TestApp;
let seenByYoga = 0;
const countYogaRequests: Plugin = { onRequest: () => void seenByYoga++ };
/** What plugins see of the context's `request` (method, path, a header), per server. */
const seenRequests = { fast: [] as unknown[], slow: [] as unknown[] };
const seeRequest = (into: unknown[]): Plugin => ({
  onContextBuilding: ({ context }) => {
    const { request } = context as unknown as { request: Request };
    into.push([request.method, new URL(request.url).pathname, request.headers.get('x-probe')]);
  },
});
let sessionId = '';

beforeAll(async () => {
  const databaseUrl = await createTestDatabase();
  // On the allow-list: it counts what yoga sees, and is meant to miss the fast lane.
  fast = await startTestApp({ databaseUrl, yogaPlugins: [countYogaRequests, seeRequest(seenRequests.fast)], fastLaneAllowed: [countYogaRequests] });
  slow = await startTestApp({ databaseUrl, yogaPlugins: [seeRequest(seenRequests.slow)], fastLane: false });
  sessionId = (await fast.ok('mutation { createSession(input: { title: "lane" }) { id } }')).createSession.id;
});
afterAll(async () => {
  await fast?.close();
  await slow?.close();
  await fastGuarded?.close();
  await slowGuarded?.close();
});

// The same pair with the guard's rules on: tokens (environment and stored, with scopes), CORS origins, rate limits.
const ADMIN = 'lane-admin-0123456789abcdef';
const LIMITED = 'lane-limited-0123456789abcdef';
const ALLOWED_ORIGIN = 'https://allowed.example';
const BURST = 40;
let fastGuarded: TestApp;
let slowGuarded: TestApp;
let readOnly = '';

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
      {
        body: json(
          'query($id: ID!) { session(id: $id) { id title eventCount events(first: 3) { edges { cursor node { id seq type data inherited synthetic } } pageInfo { hasNextPage endCursor } } } }',
          { id: sessionId },
        ),
      },
      {
        body: json(
          '{ sessions(first: 2) { edges { cursor node { id title parent { id } } } pageInfo { hasNextPage hasPreviousPage startCursor endCursor } } }',
        ),
      },
      { body: json('query A { __typename } query B { sessions(first: 1) { edges { node { id } } } }', undefined, { operationName: 'B' }) },
      // Errors of every origin: arguments, variables, resolvers, validation, syntax, the operation name.
      { body: json('{ sessions(first: -1) { edges { node { id } } } }') },
      { body: json('query($f: Int) { sessions(first: $f) { edges { node { id } } } }', { f: 'many' }) },
      { body: json('query($id: ID!) { session(id: $id) { id } }', {}) },
      { body: json(`{ session(id: "${sessionId}") { events(after: "nope") { edges { node { id } } } } }`) },
      { body: json('mutation { sendMessage(input: { sessionId: "ses_missing", text: "hi" }) { inputId } }') },
      { body: json('{ nope }') },
      {
        body: json(
          '{ sessions(first: 500) { edges { node { children(first: 500) { edges { node { children(first: 500) { edges { node { id } } } } } } } } } }',
        ),
      },
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
      // Browsers without configured CORS origins: a foreign Origin on a (preflighted) JSON POST, and a null one.
      { body: json('{ __typename }'), headers: { origin: 'https://elsewhere.example' } },
      { body: json('mutation { createSession(input: { title: "from elsewhere" }) { title } }'), headers: { origin: 'https://elsewhere.example' } },
      { body: json('{ __typename }'), headers: { origin: 'null' } },
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
      json(
        '{ sessions(first: 3) { edges { cursor node { id title eventCount turnCount status createdAt forkedAtSeq parent { id title } } } pageInfo { hasNextPage endCursor } } }',
      ),
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

  it('answers as yoga does for tokens, CORS origins and rate limits', async () => {
    const databaseUrl = fast.db.url;
    const security = {
      apiTokens: new Map([
        [ADMIN, 'alpha'],
        [LIMITED, 'alpha'],
      ]),
      corsOrigins: [ALLOWED_ORIGIN],
      // A bucket per token: LIMITED runs out within the test, ADMIN does not; nothing refills meanwhile.
      rateLimit: { perSecond: 0.001, burst: BURST },
    };
    let guardedSeenByYoga = 0;
    const count: Plugin = { onRequest: () => void guardedSeenByYoga++ };
    fastGuarded = await startTestApp({ databaseUrl, security, yogaPlugins: [count], fastLaneAllowed: [count] });
    slowGuarded = await startTestApp({ databaseUrl, security, fastLane: false });
    const created = await fastGuarded.gql(
      'mutation($input: CreateApiTokenInput!) { createApiToken(input: $input) { secret token { id } } }',
      { input: { name: 'lane-reader', scopes: ['READ'] } },
      { authorization: `Bearer ${ADMIN}` },
    );
    expect(created.errors).toBeUndefined();
    readOnly = created.data.createApiToken.secret;
    const as = (token: string, headers: Record<string, string> = {}) => ({ authorization: `Bearer ${token}`, ...headers });
    const query = json('{ sessions(first: 1) { edges { node { __typename } } } }');
    const mutation = json('mutation { sendMessage(input: { sessionId: "ses_missing", text: "hi" }) { inputId } }');
    const sent: Sent[] = [
      { body: query, headers: as(ADMIN) },
      { body: mutation, headers: as(ADMIN) },
      { body: query, headers: as('not-a-token') },
      { body: query },
      { body: query, headers: as(readOnly) },
      { body: mutation, headers: as(readOnly) },
      { body: json('mutation { createSession(input: { title: "read only" }) { id } }'), headers: as(readOnly) },
      { body: query, headers: as(ADMIN, { origin: ALLOWED_ORIGIN }) },
      { body: query, headers: as(ADMIN, { origin: 'https://refused.example' }) },
      { body: mutation, headers: as(ADMIN, { origin: 'https://refused.example' }) },
    ];
    for (const s of sent) {
      const [a, b] = [await answer(fastGuarded, s), await answer(slowGuarded, s)];
      expect(a, `${s.body} ${JSON.stringify(s.headers)}`).toEqual(b);
    }
    // The fast lane served the requests it could (a valid token, no cross-origin request); yoga the rest.
    const before = guardedSeenByYoga;
    for (const s of [sent[0], sent[1], sent[4], sent[5], sent[6]]) await answer(fastGuarded, s);
    expect(guardedSeenByYoga - before).toBe(0);
    expect((await answer(fastGuarded, sent[4])).status).toBe(200);
    expect((await answer(fastGuarded, sent[6])).body).toContain('FORBIDDEN');
    // The same requests until the bucket is empty: the same answers, then the same 429.
    const statuses: number[] = [];
    for (let i = 0; i < BURST + 2; i++) {
      const s = { body: i % 2 ? query : mutation, headers: as(LIMITED) };
      const [a, b] = [await answer(fastGuarded, s), await answer(slowGuarded, s)];
      expect(a, `request ${i}`).toEqual(b);
      statuses.push(a.status);
    }
    expect(statuses.slice(0, BURST).every((s) => s === 200)).toBe(true);
    expect(statuses.slice(BURST)).toEqual([429, 429]);
    // A revoked stored token, once each process has seen the revocation: the same refusal.
    const revoked = await fastGuarded.gql('mutation($id: ID!) { revokeApiToken(id: $id) { id } }', { id: created.data.createApiToken.token.id }, as(ADMIN));
    expect(revoked.errors).toBeUndefined();
    await waitFor(async () => (await answer(fastGuarded, sent[4])).status === 401 && (await answer(slowGuarded, sent[4])).status === 401, {
      what: 'the revocation seen by both servers',
      intervalMs: 250,
    });
    for (const s of [sent[4], sent[5], { body: query, headers: as(readOnly, { origin: ALLOWED_ORIGIN }) }]) {
      const [a, b] = [await answer(fastGuarded, s), await answer(slowGuarded, s)];
      expect(a, `revoked: ${s.body}`).toEqual(b);
      expect(a.status).toBe(401);
    }
  });

  it("gives plugins the context's request as yoga does: method, URL and headers", async () => {
    const probe = (app: TestApp) =>
      fetch(app.url, { method: 'POST', headers: { 'content-type': 'application/json', 'x-probe': 'p-1' }, body: JSON.stringify({ query: '{ __typename }' }) });
    const before = seenByYoga;
    seenRequests.fast.length = seenRequests.slow.length = 0;
    expect((await probe(fast)).status).toBe(200);
    expect((await probe(slow)).status).toBe(200);
    expect(seenByYoga).toBe(before); // the fast lane served it
    expect(seenRequests.fast).toEqual([['POST', '/graphql', 'p-1']]);
    expect(seenRequests.fast).toEqual(seenRequests.slow);
  });

  it('refuses to start beside a plugin with request-level hooks that is not on its allow-list', () => {
    const apiTokens = { inUse: false } as unknown as ApiTokens;
    const handler = (opts: Partial<Parameters<typeof graphqlHandler>[0]>) =>
      graphqlHandler({ services: {} as never, guard: new Guard({ host: '127.0.0.1', apiTokens }), log: () => {}, ...opts });
    const withHook = (hook: string): Plugin =>
      hook.startsWith('instrumentation.') ? { instrumentation: { [hook.slice(16)]: (_: unknown, wrapped: () => void) => wrapped() } } : { [hook]: () => {} };
    const hooks = [
      'onRequest',
      'onRequestParse',
      'onParams',
      'onExecutionResult',
      'onResultProcess',
      'onResponse',
      'instrumentation.request',
      'instrumentation.requestParse',
      'instrumentation.operation',
      'instrumentation.resultProcess',
    ];
    for (const hook of hooks) {
      const plugin = withHook(hook);
      expect(() => handler({ plugins: [plugin] }), hook).toThrow(new RegExp(`fast lane.*${hook.replace('.', '\\.')}.*allow-list`));
      expect(() => handler({ plugins: [plugin], fastLaneAllowed: [plugin] })).not.toThrow();
      expect(() => handler({ plugins: [plugin], fastLane: false })).not.toThrow();
      // Added by another plugin when yoga starts: fenced all the same, even when the one adding it is allowed.
      const adder: Plugin = { onPluginInit: ({ addPlugin }) => addPlugin(plugin) };
      expect(() => handler({ plugins: [adder], fastLaneAllowed: [adder] }), `${hook} added at init`).toThrow(
        new RegExp(`fast lane.*${hook.replace('.', '\\.')}.*allow-list`),
      );
      expect(() => handler({ plugins: [adder], fastLaneAllowed: [plugin] })).not.toThrow();
    }
    // Operation-level hooks run on the fast lane too (it runs yoga's envelop pipeline), envelop's instrumentation with them.
    const operationLevel: Plugin = {
      onExecute: () => {},
      onParse: () => {},
      onValidate: () => {},
      onSubscribe: () => {},
      onContextBuilding: () => {},
      instrumentation: { execute: (_, w) => w(), parse: (_, w) => w() },
    };
    expect(() => assertFastLaneSafe([operationLevel], [])).not.toThrow();
    expect(() => handler({ plugins: [operationLevel] })).not.toThrow();
  });

  it('skips parse and validation hooks for a text that passed them, only while every such hook answers by the document alone', async () => {
    const counting = () => {
      const seen = { validations: 0 };
      return { seen, plugin: { onValidate: () => void seen.validations++ } as Plugin };
    };
    const marked = counting();
    const unmarked = counting();
    const apps = [
      await startTestApp({ databaseUrl: fast.db.url, yogaPlugins: [perDocument(marked.plugin)] }),
      await startTestApp({ databaseUrl: fast.db.url, yogaPlugins: [unmarked.plugin] }),
    ];
    try {
      const query = '{ sessions(first: 2) { edges { node { id title } } } }';
      for (let i = 0; i < 3; i++) for (const app of apps) expect((await app.ok(query)).sessions.edges.length).toBeGreaterThan(0);
      expect(marked.seen.validations).toBe(1);
      expect(unmarked.seen.validations).toBe(3);
      // A text that failed is not remembered: every request with it meets the hooks again (and yoga words its error).
      for (let i = 0; i < 2; i++) {
        const before = marked.seen.validations;
        expect((await apps[0].gql('{ nope }')).errors?.[0].extensions?.code).toBe('BAD_USER_INPUT');
        expect(marked.seen.validations).toBeGreaterThan(before);
      }
    } finally {
      await Promise.all(apps.map((app) => app.close()));
    }
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
