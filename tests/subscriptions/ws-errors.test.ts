// Errors over graphql-ws: what a real graphql-ws client receives
// carries the error's code and nothing internal (yoga's `extensions.http`,
// the status an HTTP response would take from the error).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Client } from 'graphql-ws';
import { startTestApp, type TestApp } from '../helpers/app.ts';
import { wsClient } from '../helpers/subscribe.ts';
import { DEFAULT_LIMITS } from '../../src/http/security.ts';

let app: TestApp;
let client: Client;
let sessionId: string;

beforeAll(async () => {
  app = await startTestApp();
  client = wsClient(app.url);
  sessionId = (await app.ok('mutation { createSession(input: { title: "ws errors" }) { id } }')).createSession.id;
});
afterAll(async () => {
  await client?.dispose();
  await app?.close();
});

/** The errors the server sent for one operation: an `error` message's list, or a `next` result's errors. */
function errorsOf(query: string, variables: Record<string, unknown> = {}): Promise<Array<{ message: string; extensions?: Record<string, unknown> }>> {
  return new Promise((resolve, reject) => {
    const stop = client.subscribe(
      { query, variables },
      {
        next: (r) => (stop(), r.errors ? resolve(r.errors as any) : reject(new Error(`no errors: ${JSON.stringify(r)}`))),
        error: (e) => (Array.isArray(e) ? resolve(e) : reject(e)),
        complete: () => {},
      },
    );
  });
}

describe('graphql-ws errors', () => {
  const cases = () =>
    [
      ['an unknown field (validation)', 'subscription { nope }', {}],
      [
        'too deep (depth limit)',
        `query($id: ID!) { session(id: $id) {${' parent {'.repeat(DEFAULT_LIMITS.maxDepth)} id${' }'.repeat(DEFAULT_LIMITS.maxDepth)} } }`,
        { id: sessionId },
      ],
      ['a variable of the wrong type', 'query($id: ID!) { session(id: $id) { id } }', { id: { not: 'an id' } }],
      ['a missing required variable (subscription)', 'subscription($id: ID!) { sessionEvents(sessionId: $id) { seq } }', {}],
      [
        'a page size over the cost limit',
        'query($id: ID!, $f: Int) { session(id: $id) { events(first: $f) { edges { node { id } } } } }',
        { id: sessionId, f: 100_000 },
      ],
    ] as const;

  it('carry their code and no internal extensions', async () => {
    for (const [what, query, variables] of cases()) {
      const errors = await errorsOf(query, variables);
      expect(errors.length, what).toBeGreaterThan(0);
      for (const e of errors) expect(e.extensions, `${what}: ${e.message}`).toEqual({ code: 'BAD_USER_INPUT' });
    }
  });
});
