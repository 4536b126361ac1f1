// Unknown tokens cost the database nothing once their address is throttled
// (docs/operations.md "Threat model"): a token shaped like a stored one is
// looked up (one statement) before the request gate settles the caller, so a
// client trying random tokens made one statement per request even while the
// auth throttle answered it 429 — over HTTP and graphql-ws alike.
import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp, type TestApp } from '../helpers/app.ts';
import { wsClient } from '../helpers/subscribe.ts';

const ADMIN = 'lookups-bootstrap-0123456789abcdef';
const MAX_FAILURES = 3;
let app: TestApp;
let lookups = 0;

beforeAll(async () => {
  app = await startTestApp({
    security: { apiTokens: new Map([[ADMIN, 'lookups']]), rateLimit: false, authFailures: { max: MAX_FAILURES, windowMs: 60_000 } },
    onQuery: (sql) => void (/FROM "ApiToken"/.test(sql) && /digest/.test(sql) && lookups++),
  });
});
afterAll(() => app?.close());

/** A token of a stored token's shape that no one holds. */
const randomToken = () => `fkt_${randomBytes(32).toString('base64url')}`;

const post = async (token: string) =>
  (
    await fetch(app.url, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${token}` },
      body: '{"query":"{ __typename }"}',
    })
  ).status;

/** The close code of a graphql-ws connection that offers `token`. */
function wsClose(token: string): Promise<number> {
  return new Promise((resolve) => {
    const client = wsClient(app.url, {
      connectionParams: { authorization: `Bearer ${token}` },
      on: { closed: (e: unknown) => resolve((e as { code: number }).code) },
    } as never);
    client.subscribe({ query: '{ __typename }' }, { next: () => {}, error: () => {}, complete: () => {} });
  });
}

describe('random stored-shaped tokens', () => {
  it('are looked up until their address is throttled, then refused 429 without a statement, over HTTP and graphql-ws', async () => {
    const before = lookups;
    for (let i = 0; i < MAX_FAILURES; i++) expect(await post(randomToken())).toBe(401);
    expect(lookups - before).toBe(MAX_FAILURES);
    const throttled = lookups;
    for (let i = 0; i < 10; i++) expect(await post(randomToken())).toBe(429);
    expect(await wsClose(randomToken())).toBe(4429);
    expect(lookups).toBe(throttled);
  });
});
