// A message's response schema sent over graphql-ws (sendMessage as a
// WebSocket operation, as a browser or an SDK on one socket sends it) meets the
// same schema worker as over HTTP (docs/agents.md "Structured output"): a
// backtracking pattern checks the answer in linear time (the turn fails as a
// mismatch), a pattern RE2 does not take and a schema past the worker's time
// bound are BAD_USER_INPUT, and a tenant past its budget is RATE_LIMITED with
// `retryAfterSeconds`. What the WebSocket client sees is what an HTTP client
// sees, message and extensions, less the HTTP status and Retry-After header.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Client } from 'graphql-ws';
import { startTestApp, type TestApp } from '../helpers/app.ts';
import { startFakeProvider, type FakeProvider } from '../helpers/fake-provider.ts';
import { SEND, answer, fakeModelSession, schemaWith } from '../helpers/response-schemas.ts';
import { wsClient } from '../helpers/subscribe.ts';

let fake: FakeProvider;
let app: TestApp;
let client: Client;

beforeAll(async () => {
  fake = await startFakeProvider();
  app = await startTestApp({
    providers: { openaiCompatible: { baseUrl: `${fake.origin}/compat/v1`, apiKey: 'sk-compat' } },
    // As tests/security/response-schema-patterns.test.ts: a costly schema is refused by the bound before RE2's heap runs out.
    schemaTimeBoundMs: 1500,
  });
  client = wsClient(app.url);
});
afterAll(async () => {
  await client?.dispose();
  await app?.close();
  await fake?.close();
});

type GqlError = { message: string; extensions?: Record<string, unknown> };
interface Outcome {
  data?: any;
  errors?: GqlError[];
}

/** Large counted classes RE2 builds out (0.1–0.2 s a pattern): past the worker's 1.5 s bound; `n` makes each schema new. */
const costly = (n: number) => ({
  type: 'object',
  properties: Object.fromEntries(Array.from({ length: 100 }, (_, i) => [`p${i}`, { type: 'string', pattern: `^[\\x{0}-\\x{10ffff}]{${1000 - n - i}}$` }])),
});
/** sendMessage as a graphql-ws operation: its one result (data or errors), or the errors of an `error` message. */
function sendOverWs(input: Record<string, unknown>): Promise<Outcome> {
  return new Promise((resolve, reject) => {
    let result: Outcome | undefined;
    client.subscribe(
      { query: SEND, variables: { i: input } },
      {
        next: (r) => void (result = r as Outcome),
        error: (e) => (Array.isArray(e) ? resolve({ errors: e as GqlError[] }) : reject(e)),
        complete: () => (result ? resolve(result) : reject(new Error('completed without a result'))),
      },
    );
  });
}

/** sendMessage over HTTP: the body, the status and the Retry-After header. */
async function sendOverHttp(input: Record<string, unknown>): Promise<Outcome & { status: number; retryAfter: string | null }> {
  const res = await fetch(app.url, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ query: SEND, variables: { i: input } }),
  });
  return { ...((await res.json()) as Outcome), status: res.status, retryAfter: res.headers.get('retry-after') };
}

const session = () => fakeModelSession(app, 'ws patterns');

describe('a response schema sent over graphql-ws', () => {
  it('with a backtracking pattern: the message is taken and the turn fails as a mismatch, as over HTTP', async () => {
    const id = await session();
    fake.handlers.push(answer(JSON.stringify({ word: `${'a'.repeat(30)}!` })));
    const sent = await sendOverWs({ sessionId: id, text: 'the word, please', responseSchema: schemaWith('^(a+)+$') });
    expect(sent.errors).toBeUndefined();
    expect(sent.data.sendMessage.inputId).toMatch(/^in_/);
    await app.services.host.idle();
    const turns = await app.ok(`query($id: ID!) { session(id: $id) { turns { reason errorCode error } } }`, { id });
    expect(turns.session.turns).toEqual([
      { reason: 'failed', errorCode: 'OUTPUT_SCHEMA_MISMATCH', error: 'the answer does not match the response schema: /word must match pattern "^(a+)+$"' },
    ]);
  });

  it('with a pattern RE2 does not take: the same BAD_USER_INPUT error, message and extensions, as over HTTP', async () => {
    const id = await session();
    for (const pattern of ['^(?=a)a$', '^(a)\\1$']) {
      const input = { sessionId: id, text: 'hi', responseSchema: schemaWith(pattern) };
      const [ws, overHttp] = [await sendOverWs(input), await sendOverHttp(input)];
      expect(ws.errors?.[0]?.extensions?.code, pattern).toBe('BAD_USER_INPUT');
      expect(ws.errors?.[0]?.message).toMatch(/not a valid JSON Schema/);
      expect(ws.errors).toEqual(overHttp.errors);
    }
  });

  it('past the worker time bound, then past the tenant budget: the same errors and extensions as over HTTP, less the status', async () => {
    const id = await session();
    // Past the bound: BAD_USER_INPUT, the same error a schema as costly gets over HTTP (each spends 1.5 s of the 5 s budget).
    const ws = await sendOverWs({ sessionId: id, text: 'hi', responseSchema: costly(0) });
    const overHttp = await sendOverHttp({ sessionId: id, text: 'hi', responseSchema: costly(1) });
    expect(ws.errors?.[0]?.extensions?.code).toBe('BAD_USER_INPUT');
    expect(ws.errors?.[0]?.message).toMatch(/took more than 1500 ms/);
    expect(ws.errors).toEqual(overHttp.errors);

    // Spent: new schemas are RATE_LIMITED, with the seconds to wait, over either door.
    const codes: unknown[] = [];
    for (let n = 2; n < 12 && !codes.includes('RATE_LIMITED'); n++)
      codes.push((await sendOverWs({ sessionId: id, text: 'hi', responseSchema: costly(n) })).errors?.[0]?.extensions?.code);
    expect(codes.at(-1)).toBe('RATE_LIMITED');
    expect(codes.slice(0, -1).every((c) => c === 'BAD_USER_INPUT')).toBe(true);

    const fresh = { sessionId: id, text: 'hi', responseSchema: schemaWith('^fresh') };
    const [wsLimited, httpLimited] = [await sendOverWs(fresh), await sendOverHttp(fresh)];
    expect(httpLimited.status).toBe(429);
    const seconds = Number(httpLimited.retryAfter);
    expect(seconds).toBeGreaterThan(0);
    expect(httpLimited.errors?.[0]).toEqual({
      message: `this tenant's response schemas took too long to compile this minute; retry in ${seconds} s`,
      extensions: { code: 'RATE_LIMITED', retryAfterSeconds: seconds },
      path: ['sendMessage'],
    });
    // The two were asked a moment apart: the seconds left may differ by one, nothing else.
    const wsError = wsLimited.errors?.[0];
    const wsSeconds = wsError?.extensions?.retryAfterSeconds as number;
    expect([seconds, seconds + 1]).toContain(wsSeconds);
    expect(wsError).toEqual({
      message: `this tenant's response schemas took too long to compile this minute; retry in ${wsSeconds} s`,
      extensions: { code: 'RATE_LIMITED', retryAfterSeconds: wsSeconds },
      path: ['sendMessage'],
    });
  });
});
