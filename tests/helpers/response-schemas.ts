// What the response-schema tests share (over HTTP: tests/security/response-schema-patterns.test.ts; over graphql-ws:
// tests/subscriptions/ws-response-schema.test.ts): a session on the fake provider, the message that asks for a
// schema, a schema of one patterned word, and the provider's answer.
import type http from 'node:http';
import type { TestApp } from './app.ts';
import { chatText } from './provider-sse.ts';

export const SEND = `mutation($i: SendMessageInput!) { sendMessage(input: $i) { inputId } }`;

/** An object schema of one required string `word` matching `pattern`. */
export const schemaWith = (pattern: string) => ({ type: 'object', properties: { word: { type: 'string', pattern } }, required: ['word'] });

/** The fake provider's streamed answer `text`. */
export const answer = (text: string) => async (res: http.ServerResponse) => {
  res.writeHead(200, { 'content-type': 'text/event-stream' });
  res.end(chatText([text], { input: 5, output: 5 }).join(''));
};

/** A session whose model is the fake provider's (startFakeProvider, as `openaiCompatible`). */
export async function fakeModelSession(app: TestApp, title: string): Promise<string> {
  const r = await app.ok(`mutation($t: String!, $m: ModelConfigInput!) { createSession(input: { title: $t, model: $m }) { id } }`, {
    t: title,
    m: { provider: 'openai-compatible', model: 'fake-model' },
  });
  return r.createSession.id as string;
}
