// How a model provider's answer ends, as an attacker (or a proxy cutting
// connections) controls it (docs/operations.md "Threat model"): each format as
// its server streams it, read by the AI SDK's own provider packages, through
// turns sent with sendMessage. A response that ends cleanly before the
// provider said why the answer ended is not a whole answer: none of its calls
// runs and the turn fails saying so. A rate limit that asks for a day's wait
// is not waited for. An error that echoes the key it was sent does not put the
// key in the session's log.
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { REDACTED } from '../../src/core/secrets.ts';
import { agentTurns } from '../helpers/agent-turns.ts';
import { providersAt } from '../helpers/fake-provider.ts';
import { startTestApp, type TestApp } from '../helpers/app.ts';
import { anyData } from '../helpers/event-data.ts';
import { anthropicText, anthropicToolCall, chatText, chatToolCall, responsesToolCall, sse, type WireCall } from '../helpers/provider-sse.ts';

const COMPAT_KEY = 'sk-compat-0123456789abcdef';

type Handler = (res: http.ServerResponse) => void;
const handlers: Handler[] = [];
let fake: http.Server;
let app: TestApp;

beforeAll(async () => {
  fake = http.createServer(async (req, res) => {
    for await (const _ of req);
    const handler = handlers.shift();
    if (!handler) return void res.writeHead(500, { 'content-type': 'application/json' }).end('{"error":{"message":"no scripted reply"}}');
    handler(res);
  });
  await new Promise<void>((r) => fake.listen(0, '127.0.0.1', r));
  const base = `http://127.0.0.1:${(fake.address() as AddressInfo).port}`;
  app = await startTestApp({
    providers: providersAt(base, { openaiCompatible: COMPAT_KEY }),
    modelRetries: { maxRetries: 1, initialDelayMs: 20, maxDelayMs: 50 },
  });
});
afterAll(async () => {
  await app?.close();
  fake?.closeAllConnections();
  await new Promise((r) => fake?.close(r));
});

const { create, turn: send, log, tail } = agentTurns(() => app, 'endings');
const streamed = (events: string[]) => (res: http.ServerResponse) => res.writeHead(200, { 'content-type': 'text/event-stream' }).end(events.join(''));

const call: WireCall = { id: 'call_1', name: 'note_write', arguments: '{"key":"k","value":"written"}' };

/** Each format's answer making `call`, less the events that say why it ended: what a connection cut between events leaves. */
const CUT: Array<{ provider: string; events: string[]; says?: string }> = [
  // Chat Completions: the chunk with `finish_reason` and `[DONE]`.
  { provider: 'openai', events: chatToolCall(call).slice(0, -2) },
  // The SDK's OpenAI-compatible provider refuses such a stream itself, in its own words.
  { provider: 'openai-compatible', events: chatToolCall(call).slice(0, -2), says: 'Response stream ended without a finish reason.' },
  // Responses: `response.completed`.
  { provider: 'openai-responses', events: responsesToolCall(call).slice(0, -1) },
  // Anthropic: `message_delta` (its stop_reason) and `message_stop`.
  { provider: 'anthropic', events: anthropicToolCall(call).slice(0, -2) },
  // Gemini: the call in an event with no `finishReason`.
  {
    provider: 'google',
    events: [sse({ candidates: [{ content: { role: 'model', parts: [{ functionCall: { name: call.name, args: JSON.parse(call.arguments) } }] } }] })],
  },
];

describe('a response that ends before the provider said why the answer ended', () => {
  it.each(CUT)('$provider: its tool call never runs; the step and the turn fail saying the answer is incomplete', async ({ provider, events: cut, says }) => {
    const id = await create({ provider, model: 'fake-model' });
    handlers.push(streamed(cut));
    await send(id, 'go');
    const events = await log(id);
    expect(events.filter((e) => e.type === 'tool/result')).toEqual([]);
    expect(events.filter((e) => e.type === 'model/message').flatMap((e) => anyData(e).toolCalls ?? [])).toEqual([]);
    expect(await tail(id, 3)).toEqual([
      ['plugin/agent/error', `${provider} provider: ${says ?? 'the response ended before the answer did (no finish reason came): the answer is incomplete'}`],
      ['step/end', 'failed'],
      ['turn/end', 'failed'],
    ]);
  });

  it('anthropic: the text that streamed is kept as the step message, marked by the failure, not as a whole answer', async () => {
    const id = await create({ provider: 'anthropic', model: 'fake-model' });
    handlers.push(streamed(anthropicText(['The answer is ', '4'], { input: 3, output: 2 }).slice(0, -3)));
    await send(id, 'go');
    expect(await tail(id, 4)).toEqual([
      ['model/message', 'The answer is 4'],
      ['plugin/agent/error', 'anthropic provider: the response ended before the answer did (no finish reason came): the answer is incomplete'],
      ['step/end', 'failed'],
      ['turn/end', 'failed'],
    ]);
  });

  it('an unknown finish reason is a reason: the answer is whole', async () => {
    const id = await create({ provider: 'openai', model: 'fake-model' });
    const events = chatText(['fine'], { input: 3, output: 1 });
    handlers.push(
      streamed([
        ...events.slice(0, -2),
        sse({
          id: 'chatcmpl-1',
          object: 'chat.completion.chunk',
          created: 1,
          model: 'fake-model',
          choices: [{ index: 0, delta: {}, finish_reason: 'space_laser' }],
        }),
      ]),
    );
    await send(id, 'go');
    expect(await tail(id, 2)).toEqual([
      ['step/end', 'completed'],
      ['turn/end', 'completed'],
    ]);
  });
});

describe('a rate limit that asks for a long wait', () => {
  it('429 with Retry-After of a day: the retry waits the backoff, not a day, and the turn completes', async () => {
    const id = await create({ provider: 'openai', model: 'fake-model' });
    handlers.push(
      (res) => void res.writeHead(429, { 'content-type': 'application/json', 'retry-after': '86400' }).end('{"error":{"message":"slow down"}}'),
      streamed(chatText(['fine'], { input: 3, output: 1 })),
    );
    const began = Date.now();
    await send(id, 'go');
    expect(Date.now() - began).toBeLessThan(10_000);
    const retry = (await log(id)).find((e) => e.type === 'plugin/agent/retry');
    expect(anyData(retry!)).toMatchObject({ attempt: 1, status: 429, delayMs: 20 });
    expect(await tail(id, 1)).toEqual([['turn/end', 'completed']]);
  });
});

describe("a provider's error that echoes the key it was sent", () => {
  it("openai-compatible: a 500 and then a 401 naming the key: the retry and the failure say the provider's words with the key cut out; no event holds it", async () => {
    const id = await create({ provider: 'openai-compatible', model: 'fake-model' });
    const echo = (status: number) => (res: http.ServerResponse) =>
      void res
        .writeHead(status, { 'content-type': 'application/json' })
        .end(JSON.stringify({ error: { message: `Incorrect API key provided: ${COMPAT_KEY}. Bearer ${COMPAT_KEY}` } }));
    handlers.push(echo(500), echo(401));
    await send(id, 'go');
    const events = await log(id);
    expect(JSON.stringify(events)).not.toContain(COMPAT_KEY);
    expect(anyData(events.find((e) => e.type === 'plugin/agent/retry')!).error).toBe(
      `openai-compatible provider: HTTP 500: Incorrect API key provided: ${REDACTED}. Bearer ${REDACTED}`,
    );
    expect(await tail(id, 3)).toEqual([
      ['plugin/agent/error', `openai-compatible provider: HTTP 401: Incorrect API key provided: ${REDACTED}. Bearer ${REDACTED}`],
      ['step/end', 'failed'],
      ['turn/end', 'failed'],
    ]);
  });
});
