// A model provider's answer is outside input (docs/operations.md "Threat
// model"): the AI SDK's OpenAI-compatible provider, pointed at a fake server
// speaking Chat Completions streaming SSE, through sendMessage. One answer's
// tool calls are bounded in number (none of an answer past the bound runs),
// one call's whole time is bounded however steadily the provider trickles,
// and names, ids and text carrying NUL, control characters or lone
// surrogates are stored as the log can hold them.
import type http from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DEFAULT_PROVIDER_LIMITS } from '../../src/agent/models/provider-fetch.ts';
import { startTestApp, type TestApp } from '../helpers/app.ts';
import { anyData } from '../helpers/event-data.ts';
import { startFakeProvider, type FakeProvider, type ProviderHandler, type Sent } from '../helpers/fake-provider.ts';
import { drained } from '../../src/http/drained.ts';

const CALL_TIMEOUT_MS = 4000;

type Handler = ProviderHandler;
let fake: FakeProvider;
let handlers: Handler[];
let app: TestApp;

const sse = (data: unknown) => `data: ${typeof data === 'string' ? data : JSON.stringify(data)}\n\n`;
const chunk = (delta: unknown, finish: string | null = null) => ({
  id: 'chatcmpl-1',
  object: 'chat.completion.chunk',
  created: 1,
  model: 'fake-model',
  choices: [{ index: 0, delta, finish_reason: finish }],
});
const start = (res: http.ServerResponse) => res.writeHead(200, { 'content-type': 'text/event-stream' });
const write = async (res: http.ServerResponse, text: string) => {
  if (!res.write(text)) await drained(res);
};
const okText: Handler = async (res) => {
  start(res);
  res.write(sse(chunk({ role: 'assistant', content: 'fine' })));
  res.write(sse(chunk({}, 'stop')));
  res.end(sse('[DONE]'));
};

beforeAll(async () => {
  fake = await startFakeProvider();
  handlers = fake.handlers;
  app = await startTestApp({
    providers: {
      openaiCompatible: { baseUrl: `${fake.origin}/compat/v1`, apiKey: 'sk-compat' },
      // The call-count bound is left at its default: the test shows the default holds.
      limits: { maxResponseBytes: DEFAULT_PROVIDER_LIMITS.maxResponseBytes, idleTimeoutMs: 1500, callTimeoutMs: CALL_TIMEOUT_MS },
    },
    modelRetries: { maxRetries: 1, initialDelayMs: 20, maxDelayMs: 50 },
    // Far beyond what a bounded call takes: a test that ends by it has not been bounded by the limit it tests.
    maxTurnMs: 30_000,
  });
});
afterAll(async () => {
  await app?.close();
  await fake?.close();
});

async function session() {
  const r = await app.ok(`mutation($m: ModelConfigInput!) { createSession(input: { title: "hostile", model: $m }) { id } }`, {
    m: { provider: 'openai-compatible', model: 'fake-model' },
  });
  return r.createSession.id as string;
}
const send = async (id: string, text: string) => {
  await app.ok(`mutation($i: SendMessageInput!) { sendMessage(input: $i) { inputId } }`, { i: { sessionId: id, text } });
  await app.services.host.idle();
};
const log = async (id: string) => app.services.store.log.page(id, -1, 1000);

describe("one answer's tool calls are bounded in number", () => {
  it('10,000 tiny calls in one answer: the answer is given up past the default bound, none runs, the turn fails saying so; the next turn runs', async () => {
    const id = await session();
    handlers.push(async (res, sent) => {
      start(res);
      await write(res, sse(chunk({ role: 'assistant', content: 'calling ' })));
      for (let i = 0; i < 10_000 && !sent.closed; i++) {
        await write(res, sse(chunk({ tool_calls: [{ index: i, id: `c${i}`, type: 'function', function: { name: 'clock', arguments: '{}' } }] })));
      }
      res.end(sse(chunk({}, 'tool_calls')) + sse('[DONE]'));
    }, okText);
    await send(id, 'go');
    const events = await log(id);
    expect(events.filter((e) => e.type === 'tool/result')).toEqual([]);
    const error = events.find((e) => e.type === 'plugin/agent/error');
    expect(anyData(error!).message).toMatch(new RegExp(`more than ${DEFAULT_PROVIDER_LIMITS.maxToolCalls} tool calls \\(FORKLINE_MODEL_MAX_TOOL_CALLS\\)`));
    // What the user saw stream is kept, with no calls.
    const message = events.find((e) => e.type === 'model/message');
    expect([anyData(message!).text, anyData(message!).toolCalls]).toEqual(['calling ', []]);
    expect(anyData(events.at(-1)!).reason).toBe('failed');
    await send(id, 'again');
    expect(anyData((await log(id)).at(-1)!).reason).toBe('completed');
  });
});

describe("one model call's whole time is bounded", () => {
  it('a delta every 100 ms forever (the idle timeout never fires): the call is given up at FORKLINE_MODEL_CALL_TIMEOUT_MS, its connection closed', async () => {
    const id = await session();
    let closed: Sent | undefined;
    handlers.push(async (res, sent) => {
      closed = sent;
      start(res);
      while (!sent.closed) {
        await write(res, sse(chunk({ content: '.' })));
        await new Promise((r) => setTimeout(r, 100));
      }
    });
    const began = Date.now();
    await send(id, 'go');
    expect(Date.now() - began).toBeGreaterThanOrEqual(CALL_TIMEOUT_MS);
    const events = await log(id);
    const error = events.find((e) => e.type === 'plugin/agent/error');
    expect(anyData(error!).message).toMatch(/ran past 4000 ms \(FORKLINE_MODEL_CALL_TIMEOUT_MS\)/);
    expect(anyData(events.find((e) => e.type === 'model/message')!).text).toMatch(/^\.+$/);
    expect(anyData(events.at(-1)!).reason).toBe('failed');
    expect(closed?.closed).toBe(true);
  });
});

describe('names, ids and text from the provider as the log can hold them', () => {
  it('NUL, control characters and lone surrogates in a call name, a call id and text; an unknown finish reason: stored, refused or answered, the turn goes on', async () => {
    const id = await session();
    handlers.push(async (res) => {
      start(res);
      // Lone surrogates written as JSON escapes, as a provider's JSON may carry them.
      res.write(`data: ${JSON.stringify(chunk({ role: 'assistant', content: 'a\u0000b' })).replace('a\\u0000b', 'a\\u0000b\\ud800c')}\n\n`);
      res.write(sse(chunk({ tool_calls: [{ index: 0, id: 'id\u0000one', type: 'function', function: { name: 'clo\u0000ck', arguments: '{}' } }] })));
      res.write(sse(chunk({ tool_calls: [{ index: 1, id: 'id\u0007two', type: 'function', function: { name: 'clock\u001b[31m', arguments: '{}' } }] })));
      res.write(sse(chunk({}, 'space_laser')));
      res.end(sse('[DONE]'));
    }, okText);
    await send(id, 'go');
    const events = await log(id);
    const message = anyData(events.find((e) => e.type === 'model/message')!);
    expect(message.text).toBe('a\ufffdb\ufffdc');
    expect(message.toolCalls.map((c: { id: string; name: string }) => [c.id, c.name])).toEqual([
      ['call_1', 'clo\ufffdck'],
      ['id\u0007two', 'clock\u001b[31m'],
    ]);
    const results = events.filter((e) => e.type === 'tool/result').map((e) => [anyData(e).callId, anyData(e).status, anyData(e).content]);
    expect(results).toEqual([
      ['call_1', 'error', 'not run: the model gave it an id holding a NUL character or an unpaired surrogate'],
      ['id\u0007two', 'error', 'the model was offered no tool named "clock\\u001b[31m": the call did not run'],
    ]);
    expect(anyData(events.at(-1)!).reason).toBe('completed');
  });
});

const callsAnswer =
  (calls: Array<{ id: string; name: string; arguments: string }>): Handler =>
  async (res) => {
    start(res);
    calls.forEach((c, index) =>
      res.write(sse(chunk({ tool_calls: [{ index, id: c.id, type: 'function', function: { name: c.name, arguments: c.arguments } }] }))),
    );
    res.write(sse(chunk({}, 'tool_calls')));
    res.end(sse('[DONE]'));
  };

describe('call ids and arguments the model should not send', () => {
  it('arguments nested 100,000 deep and an id an earlier step used: the deep one answered with an error, the reused one run under a fresh id, the later requests still sent, the turn completes', async () => {
    const id = await session();
    const deep = '['.repeat(100_000) + ']'.repeat(100_000);
    handlers.push(
      callsAnswer([{ id: 'same', name: 'clock', arguments: '{}' }]),
      callsAnswer([
        { id: 'same', name: 'clock', arguments: '{}' },
        { id: 'deep', name: 'note_write', arguments: `{"key":"k","value":${deep}}` },
      ]),
      okText,
    );
    await send(id, 'go');
    const events = await log(id);
    const steps = events.filter((e) => e.type === 'model/message').map((e) => anyData(e).toolCalls.map((c: { id: string }) => c.id));
    expect(steps).toEqual([['same'], ['call_1', 'deep'], []]);
    const results = events.filter((e) => e.type === 'tool/result').map((e) => [anyData(e).callId, anyData(e).status, anyData(e).content]);
    expect(results).toEqual([
      ['same', 'ok', expect.any(String)],
      ['call_1', 'ok', expect.any(String)],
      ['deep', 'error', expect.stringMatching(/^invalid arguments/)],
    ]);
    // Every result id of the session is its own.
    const resultIds = events.filter((e) => e.type === 'tool/result').map((e) => anyData(e).resultId);
    expect(new Set(resultIds).size).toBe(3);
    expect(anyData(events.at(-1)!).reason).toBe('completed');
  });
});
