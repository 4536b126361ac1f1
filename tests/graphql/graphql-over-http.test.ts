// GraphQL over HTTP: graphql-http's audit against the real server,
// status codes for application/graphql-response+json on yoga's path and the
// fast lane alike, and a POST subscription answered 406 leaves nothing open.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { auditServer } from 'graphql-http';
import { startTestApp, type TestApp } from '../helpers/app.ts';
import { createTestDatabase } from '../helpers/db.ts';
import { waitFor } from '../helpers/wait.ts';
import { DEFAULT_LIMITS } from '../../src/http/security.ts';

let fast: TestApp;
let slow: TestApp;
let sessionId = '';

beforeAll(async () => {
  const databaseUrl = await createTestDatabase();
  fast = await startTestApp({ databaseUrl });
  slow = await startTestApp({ databaseUrl, fastLane: false });
  sessionId = (await fast.ok('mutation { createSession(input: { title: "over http" }) { id } }')).createSession.id;
});
afterAll(async () => {
  await fast?.close();
  await slow?.close();
});

const lanes = () =>
  [
    ['fast lane', fast],
    ['yoga', slow],
  ] as const;

async function post(app: TestApp, body: unknown, accept: string) {
  const res = await fetch(app.url, { method: 'POST', headers: { 'content-type': 'application/json', accept }, body: JSON.stringify(body) });
  return { status: res.status, type: res.headers.get('content-type'), body: await res.json() };
}

describe('graphql-http audit', () => {
  it('passes every MUST and SHOULD audit, with and without the fast lane', async () => {
    for (const [lane, app] of lanes()) {
      const results = await auditServer({ url: app.url });
      const failing = results.filter((r) => r.status !== 'ok' && !r.name.startsWith('MAY')).map((r) => `${r.name}: ${'reason' in r ? r.reason : ''}`);
      expect(failing, lane).toEqual([]);
      expect(results.length, lane).toBeGreaterThan(30);
    }
  });
});

describe('application/graphql-response+json', () => {
  const nested = (depth: number) => `query($id: ID!) { session(id: $id) {${' parent {'.repeat(depth)} id${' }'.repeat(depth)} } }`;
  const refused = () =>
    [
      ['a variable of the wrong type', { query: 'query($id: ID!) { session(id: $id) { id } }', variables: { id: { not: 'an id' } } }, /got invalid value/],
      ['a missing required variable', { query: 'query($id: ID!) { session(id: $id) { id } }', variables: {} }, /was not provided/],
      ['null for a non-null variable', { query: 'query($id: ID!) { session(id: $id) { id } }', variables: { id: null } }, /must not be null/],
      [
        'a page size over the limit as a variable',
        { query: 'query($id: ID!, $f: Int) { session(id: $id) { events(first: $f) { edges { node { id } } } } }', variables: { id: sessionId, f: 10_000 } },
        /Cost limit/,
      ],
      ['too deep', { query: nested(DEFAULT_LIMITS.maxDepth), variables: { id: sessionId } }, /depth limit of 12 exceeded/],
      [
        'too many aliases',
        { query: `{ ${Array.from({ length: DEFAULT_LIMITS.maxAliases + 1 }, (_, i) => `a${i}: __typename`).join(' ')} }` },
        /Aliases limit of 30 exceeded/,
      ],
    ] as const;

  it('answers 400 without data to requests refused before execution, on both lanes', async () => {
    for (const [lane, app] of lanes()) {
      for (const [what, body, message] of refused()) {
        const r = await post(app, body, 'application/graphql-response+json');
        expect(r.status, `${lane}: ${what}`).toBe(400);
        expect(r.type).toBe('application/graphql-response+json; charset=utf-8');
        expect(r.body.data, `${lane}: ${what}`).toBeUndefined();
        expect(r.body.errors[0].message, `${lane}: ${what}`).toMatch(message);
        expect(r.body.errors[0].extensions, `${lane}: ${what}`).toEqual({ code: 'BAD_USER_INPUT' });
      }
    }
  });

  it('keeps 200 for the same requests under application/json, and for execution errors with data', async () => {
    for (const [lane, app] of lanes()) {
      for (const [what, body] of refused()) {
        const r = await post(app, body, 'application/json');
        expect(r.status, `${lane}: ${what}`).toBe(200);
        expect(r.body.errors[0].extensions.code).toBe('BAD_USER_INPUT');
      }
      const executed = await post(
        app,
        { query: 'mutation { forkSession(input: { sessionId: "ses_missing", atSeq: 0 }) { cutSeq } }' },
        'application/graphql-response+json',
      );
      expect(executed.status, lane).toBe(200);
      expect(executed.body).toMatchObject({ data: null, errors: [{ extensions: { code: 'SESSION_NOT_FOUND' } }] });
    }
  });
});

describe('subscriptions over POST without a streaming Accept', () => {
  it('answers 406 and leaves no subscription open (forkline_active_subscriptions)', async () => {
    const active = async () => {
      const text = await (await fetch(fast.url.replace(/\/graphql$/, '/metrics'))).text();
      return Number(/^forkline_active_subscriptions (\S+)$/m.exec(text)?.[1]);
    };
    expect(await active()).toBe(0);
    for (let i = 0; i < 5; i++) {
      const r = await fetch(fast.url, {
        method: 'POST',
        headers: { 'content-type': 'application/json', accept: 'application/json' },
        body: JSON.stringify({ query: 'subscription($id: ID!) { sessionEvents(sessionId: $id) { seq } }', variables: { id: sessionId } }),
      });
      expect(r.status).toBe(406);
      await r.arrayBuffer();
    }
    // The gauge still counts subscriptions that really stream.
    const sse = await fetch(fast.url, {
      method: 'POST',
      headers: { 'content-type': 'application/json', accept: 'text/event-stream' },
      body: JSON.stringify({ query: 'subscription($id: ID!) { sessionEvents(sessionId: $id) { seq } }', variables: { id: sessionId } }),
    });
    const reader = sse.body!.getReader();
    await reader.read();
    await waitFor(async () => (await active()) === 1, { what: 'one streaming subscription' });
    await reader.cancel();
    await waitFor(async () => (await active()) === 0, { what: 'no open subscription' });
  });
});
