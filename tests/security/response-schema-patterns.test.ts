// A message's response schema and the answer checked against it are the
// caller's (the answer follows the caller's message): a `pattern` that
// backtracks (`^(a+)+$`) against an answer of `a`s and a `!` held the
// process's event loop for a time that grows fourfold with every two more
// `a`s on the JavaScript regular-expression engine (30: about ten seconds,
// 40: hours), every tenant's requests and turns with it. It runs on RE2
// (docs/agents.md "Structured output"): the turn fails as a mismatch at once,
// and a pattern RE2 does not take is refused at the door.
import type http from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp, type TestApp } from '../helpers/app.ts';
import { WAIT_BOUND_MS, servedMeanwhile } from '../helpers/event-loop.ts';
import { anyData } from '../helpers/event-data.ts';
import { startFakeProvider, type FakeProvider } from '../helpers/fake-provider.ts';
import { chatText } from '../helpers/provider-sse.ts';

let fake: FakeProvider;
let app: TestApp;

beforeAll(async () => {
  fake = await startFakeProvider();
  app = await startTestApp({ providers: { openaiCompatible: { baseUrl: `${fake.origin}/compat/v1`, apiKey: 'sk-compat' } } });
});
afterAll(async () => {
  await app?.close();
  await fake?.close();
});

const answer = (text: string) => async (res: http.ServerResponse) => {
  res.writeHead(200, { 'content-type': 'text/event-stream' });
  res.end(chatText([text], { input: 5, output: 5 }).join(''));
};
const SEND = `mutation($i: SendMessageInput!) { sendMessage(input: $i) { inputId } }`;
const schemaWith = (pattern: string) => ({ type: 'object', properties: { word: { type: 'string', pattern } }, required: ['word'] });

async function session() {
  const r = await app.ok(`mutation($m: ModelConfigInput!) { createSession(input: { title: "patterns", model: $m }) { id } }`, {
    m: { provider: 'openai-compatible', model: 'fake-model' },
  });
  return r.createSession.id as string;
}

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
