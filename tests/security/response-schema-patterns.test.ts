// A message's response schema and the answer checked against it are the
// caller's (the answer follows the caller's message): a `pattern` that
// backtracks (`^(a+)+$`) against an answer of `a`s and a `!` held the
// process's event loop for a time that grows fourfold with every two more
// `a`s on the JavaScript regular-expression engine (30: about ten seconds,
// 40: hours), every tenant's requests and turns with it. It runs on RE2
// (docs/agents.md "Structured output"): the turn fails as a mismatch at once,
// and a pattern RE2 does not take is refused at the door.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp, type TestApp } from '../helpers/app.ts';
import { WAIT_BOUND_MS, servedMeanwhile } from '../helpers/event-loop.ts';
import { anyData } from '../helpers/event-data.ts';
import { startFakeProvider, type FakeProvider } from '../helpers/fake-provider.ts';
import { SEND, answer, fakeModelSession, schemaWith } from '../helpers/response-schemas.ts';

let fake: FakeProvider;
let app: TestApp;

beforeAll(async () => {
  fake = await startFakeProvider();
  app = await startTestApp({
    providers: { openaiCompatible: { baseUrl: `${fake.origin}/compat/v1`, apiKey: 'sk-compat' } },
    // Shorter than the 2 s default: a schema this test makes costly is refused sooner.
    schemaTimeBoundMs: 1500,
  });
});
afterAll(async () => {
  await app?.close();
  await fake?.close();
});

const session = () => fakeModelSession(app, 'patterns');

describe("a response schema's patterns", () => {
  it('check an answer made to backtrack in linear time: the turn fails as a mismatch, and the next one is answered', async () => {
    const id = await session();
    // 30, not 40: on the engine that backtracks this test fails in seconds rather than hanging for hours.
    fake.handlers.push(answer(JSON.stringify({ word: `${'a'.repeat(30)}!` })));
    const { waitedMs } = await servedMeanwhile(app.url, async () => {
      await app.ok(SEND, { i: { sessionId: id, text: 'the word, please', responseSchema: schemaWith('^(a+)+$') } });
      await app.services.host.idle();
    });
    expect(waitedMs).toBeLessThan(WAIT_BOUND_MS);
    const turns = await app.ok(`query($id: ID!) { session(id: $id) { turns { reason errorCode error } } }`, { id });
    expect(turns.session.turns).toEqual([
      { reason: 'failed', errorCode: 'OUTPUT_SCHEMA_MISMATCH', error: 'the answer does not match the response schema: /word must match pattern "^(a+)+$"' },
    ]);

    // The same schema, an answer that matches: stored as the turn's output.
    fake.handlers.push(answer(JSON.stringify({ word: 'aaaa' })));
    await app.ok(SEND, { i: { sessionId: id, text: 'again', responseSchema: schemaWith('^(a+)+$') } });
    await app.services.host.idle();
    const log = await app.services.store.log.page(id, -1, 1000);
    expect(anyData(log.filter((e) => e.type === 'model/message').at(-1)!).output).toEqual({ word: 'aaaa' });
  });

  it("that take long to compile do not hold the process: the schema worker's time bound refuses the schema", async () => {
    const id = await session();
    // Each a large counted class (RE2 builds it out: 0.1–0.2 s a pattern), 100 of them in 7 KB of schema: 10 s and more on the event loop.
    const properties = Object.fromEntries(Array.from({ length: 100 }, (_, i) => [`p${i}`, { type: 'string', pattern: `^[\\x{0}-\\x{10ffff}]{${1000 - i}}$` }]));
    const { result, waitedMs } = await servedMeanwhile(app.url, () =>
      app.gql(SEND, { i: { sessionId: id, text: 'hi', responseSchema: { type: 'object', properties } } }),
    );
    expect(result.errors?.[0]?.extensions?.code).toBe('BAD_USER_INPUT');
    // 100 such patterns are within the pattern engine's heap (about 250 fill it): the bound refuses it.
    expect(result.errors?.[0]?.message).toMatch(/took more than 1500 ms/);
    expect(waitedMs).toBeLessThan(WAIT_BOUND_MS);
    // The process goes on: a plain schema is taken.
    fake.handlers.push(answer(JSON.stringify({ word: 'ok' })));
    await app.ok(SEND, { i: { sessionId: id, text: 'again', responseSchema: schemaWith('^o') } });
    await app.services.host.idle();
    const turns = await app.ok(`query($id: ID!) { session(id: $id) { turns { reason structuredOutput } } }`, { id });
    expect(turns.session.turns).toEqual([{ reason: 'completed', structuredOutput: { word: 'ok' } }]);
  });

  it("are not run on a string longer than the pattern engine's heap holds: the turn fails as a mismatch saying why, and the next is checked", async () => {
    const id = await session();
    // 3 MiB of `a`s: RE2's fixed heap cannot take it (the schema worker failed with the engine's abort).
    fake.handlers.push(answer(JSON.stringify({ word: 'a'.repeat(3 * 1024 * 1024) })));
    await app.ok(SEND, { i: { sessionId: id, text: 'a long word', responseSchema: schemaWith('^a+$') } });
    await app.services.host.idle();
    // Another session (this one's next turn would compact the 3 MiB first): a long word within the bound is checked.
    const next = await session();
    fake.handlers.push(answer(JSON.stringify({ word: 'a'.repeat(100_000) })));
    await app.ok(SEND, { i: { sessionId: next, text: 'a shorter one', responseSchema: schemaWith('^a+$') } });
    await app.services.host.idle();
    const turns = async (sessionId: string) =>
      (await app.ok(`query($id: ID!) { session(id: $id) { turns { reason errorCode error } } }`, { id: sessionId })).session.turns;
    expect(await turns(id)).toEqual([
      {
        reason: 'failed',
        errorCode: 'OUTPUT_SCHEMA_MISMATCH',
        error: 'the answer does not match the response schema: a string of 3145728 characters is longer than the 262144 a pattern is checked against',
      },
    ]);
    expect(await turns(next)).toEqual([{ reason: 'completed', errorCode: null, error: null }]);
  });

  it('that RE2 does not take (lookaround, backreferences) are refused at the door: BAD_USER_INPUT, nothing written', async () => {
    const id = await session();
    const before = (await app.services.store.log.page(id, -1, 1000)).length;
    for (const pattern of ['^(?=a)a$', '^(a)\\1$']) {
      const r = await app.gql(SEND, { i: { sessionId: id, text: 'hi', responseSchema: schemaWith(pattern) } });
      expect(r.errors?.[0]?.extensions?.code, pattern).toBe('BAD_USER_INPUT');
      expect(r.errors?.[0]?.message).toMatch(/not a valid JSON Schema/);
    }
    expect(await app.services.store.log.page(id, -1, 1000)).toHaveLength(before);
  });
});

describe("a tenant's response schemas", () => {
  // Last in this file: it spends the tenant's budget for the minute.
  it("that keep taking long to compile spend the tenant's budget: new schemas are RATE_LIMITED until the minute ends", async () => {
    const id = await session();
    const costly = (n: number) => ({
      type: 'object',
      properties: Object.fromEntries(Array.from({ length: 100 }, (_, i) => [`p${i}`, { type: 'string', pattern: `^[\\x{0}-\\x{10ffff}]{${900 - n - i}}$` }])),
    });
    // Each refused compile counts the whole bound (1,500 ms) against the budget (5,000 ms a minute).
    const codes: string[] = [];
    for (let n = 0; n < 12 && !codes.includes('RATE_LIMITED'); n++) {
      const r = await app.gql(SEND, { i: { sessionId: id, text: 'hi', responseSchema: costly(n) } });
      codes.push(r.errors?.[0]?.extensions?.code);
    }
    expect(codes.at(-1)).toBe('RATE_LIMITED');
    expect(codes.slice(0, -1).every((c) => c === 'BAD_USER_INPUT')).toBe(true);
    // A plain schema not compiled yet waits for the minute too (the refusal says when), one compiled before does not.
    const fresh = await app.gql(SEND, { i: { sessionId: id, text: 'hi', responseSchema: schemaWith('^fresh') } });
    expect(fresh.errors?.[0]?.extensions?.code).toBe('RATE_LIMITED');
    expect(fresh.errors?.[0]?.message).toMatch(/retry in \d+ s/);
    fake.handlers.push(answer(JSON.stringify({ word: 'ok' })));
    await app.ok(SEND, { i: { sessionId: id, text: 'again', responseSchema: schemaWith('^o') } });
    await app.services.host.idle();
  });
});
