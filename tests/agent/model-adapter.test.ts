// The model adapter (agent/models/language-model.ts) against the AI SDK's own
// mock language model, the conversion of the agent's conversation into the
// SDK's messages (prompt.ts), and the settings allow-list (settings.ts). No
// server, no database.
import { describe, expect, it } from 'vitest';
import { APICallError, type LanguageModelV3StreamPart } from '@ai-sdk/provider';
import { MockLanguageModelV3, convertArrayToReadableStream } from 'ai/test';
import { LanguageChatModel, MAX_ANSWER_CHARS } from '../../src/agent/models/language-model.ts';
import { toPrompt, toTools } from '../../src/agent/models/prompt.ts';
import { callSettings, settingsProblem } from '../../src/agent/models/settings.ts';
import { ContextOverflowError, ModelError } from '../../src/agent/models/model.ts';
import type { ChatMessage, ModelRequest } from '../../src/core/chat.ts';
import { buildModelMessages } from '../../src/core/model-request.ts';
import type { LogEvent } from '../../src/core/events.ts';

const usage = (input: number, output: number) => ({
  inputTokens: { total: input, noCache: input, cacheRead: undefined, cacheWrite: undefined },
  outputTokens: { total: output, text: output, reasoning: undefined },
});
const streamOf = (parts: LanguageModelV3StreamPart[]) => ({ stream: convertArrayToReadableStream(parts) });
const request = (over: Partial<ModelRequest> = {}): ModelRequest => ({
  provider: 'mock',
  model: 'm1',
  messages: [{ role: 'user', content: 'hi' }],
  tools: [],
  ...over,
});
const run = (model: MockLanguageModelV3, req = request()) => {
  const deltas: string[] = [];
  const chat = new LanguageChatModel({ provider: 'mock', languageModel: () => model });
  return chat.complete(req, { signal: new AbortController().signal, onDelta: (t) => deltas.push(t) }).then((answer) => ({ answer, deltas }));
};

describe('the model adapter', () => {
  it('streams text deltas and returns the whole answer with the usage the model reported', async () => {
    const model = new MockLanguageModelV3({
      doStream: streamOf([
        { type: 'stream-start', warnings: [] },
        { type: 'text-start', id: 't' },
        { type: 'text-delta', id: 't', delta: 'Hel' },
        { type: 'text-delta', id: 't', delta: 'lo' },
        { type: 'text-end', id: 't' },
        { type: 'finish', finishReason: { unified: 'stop', raw: 'stop' }, usage: usage(12, 2) },
      ]),
    });
    const { answer, deltas } = await run(model);
    expect(deltas).toEqual(['Hel', 'lo']);
    expect(answer).toEqual({ text: 'Hello', toolCalls: [], usage: { inputTokens: 12, outputTokens: 2 } });
  });

  it("returns tool calls with their arguments as the model wrote them, a name no offered tool goes by marked; calls the provider ran itself are not the agent's", async () => {
    const model = new MockLanguageModelV3({
      doStream: streamOf([
        { type: 'tool-call', toolCallId: 'c1', toolName: 'note_write', input: '{"key": "k", "value": "v"}' },
        { type: 'tool-call', toolCallId: 'c2', toolName: 'clock', input: '' },
        { type: 'tool-call', toolCallId: 'c3', toolName: 'web_search', input: '{}', providerExecuted: true },
        { type: 'tool-call', toolCallId: 'c4', toolName: 'Clock', input: '{}' },
        { type: 'finish', finishReason: { unified: 'tool-calls', raw: undefined }, usage: usage(5, 9) },
      ]),
    });
    const tool = (name: string) => ({ name, description: name, parameters: { type: 'object', properties: {} }, effect: 'read-only' as const });
    const { answer } = await run(model, request({ tools: [tool('note_write'), tool('clock')] }));
    expect(answer.toolCalls).toEqual([
      { id: 'c1', name: 'note_write', arguments: '{"key": "k", "value": "v"}' },
      { id: 'c2', name: 'clock', arguments: '{}' },
      { id: 'c4', name: 'Clock', arguments: '{}', unoffered: true },
    ]);
  });

  it("sends the model the converted conversation, the tools, and only the allowed settings under the SDK's names", async () => {
    const model = new MockLanguageModelV3({ doStream: streamOf([{ type: 'finish', finishReason: { unified: 'stop', raw: undefined }, usage: usage(1, 0) }]) });
    const { answer } = await run(
      model,
      request({
        settings: { temperature: 0.2, max_tokens: 100, stop: 'END', n: 3, topP: 7 },
        tools: [{ name: 'clock', description: 'the time', parameters: { type: 'object', properties: {} }, effect: 'read-only' }],
      }),
    );
    expect(answer).toEqual({ text: '', toolCalls: [], usage: { inputTokens: 1, outputTokens: 0 } });
    const call = model.doStreamCalls[0];
    expect(call.prompt).toEqual([{ role: 'user', content: [{ type: 'text', text: 'hi' }] }]);
    expect(call.tools).toEqual([{ type: 'function', name: 'clock', description: 'the time', inputSchema: { type: 'object', properties: {} } }]);
    expect(call.toolChoice).toEqual({ type: 'auto' });
    // n is not allowed and topP is out of bounds (an older log may hold either): neither is sent.
    expect({ temperature: call.temperature, maxOutputTokens: call.maxOutputTokens, stopSequences: call.stopSequences, topP: call.topP }).toEqual({
      temperature: 0.2,
      maxOutputTokens: 100,
      stopSequences: ['END'],
      topP: undefined,
    });
    expect(call).not.toHaveProperty('n');
  });

  it('a provider error, thrown or streamed, is a ModelError naming the provider and the HTTP status', async () => {
    const http400 = new APICallError({
      message: "Invalid value for 'temperature': must be at most 2",
      url: 'http://fake/v1/chat/completions',
      requestBodyValues: {},
      statusCode: 400,
    });
    const thrown = new MockLanguageModelV3({
      doStream: async () => {
        throw http400;
      },
    });
    await expect(run(thrown)).rejects.toThrow(new ModelError("mock provider: HTTP 400: Invalid value for 'temperature': must be at most 2"));
    // A full context is a ModelError too, of its own kind (the agent compacts and retries it).
    const overflow = new MockLanguageModelV3({
      doStream: async () => {
        throw new APICallError({
          message: "This model's maximum context length is 8192 tokens",
          url: 'http://fake/v1/chat/completions',
          requestBodyValues: {},
          statusCode: 400,
        });
      },
    });
    const overflowErr = await run(overflow).catch((e: unknown) => e);
    expect(overflowErr).toBeInstanceOf(ContextOverflowError);
    expect(overflowErr).toBeInstanceOf(ModelError);
    expect((overflowErr as Error).message).toBe("mock provider: HTTP 400: This model's maximum context length is 8192 tokens");
    const streamed = new MockLanguageModelV3({
      doStream: streamOf([
        { type: 'text-delta', id: 't', delta: 'part' },
        { type: 'error', error: { type: 'overloaded_error', message: 'Overloaded' } },
      ]),
    });
    await expect(run(streamed)).rejects.toThrow(new ModelError('mock provider: Overloaded'));
    const broken = new MockLanguageModelV3({
      doStream: async () => {
        throw new TypeError('fetch failed');
      },
    });
    await expect(run(broken)).rejects.toBeInstanceOf(ModelError);
  });

  it('a stop (abort) is not a model error: the agent tells them apart by its own signal', async () => {
    const stop = new AbortController();
    const model = new MockLanguageModelV3({
      doStream: async ({ abortSignal }) => {
        stop.abort('cancel');
        abortSignal!.throwIfAborted();
        return streamOf([]);
      },
    });
    const chat = new LanguageChatModel({ provider: 'mock', languageModel: () => model });
    await expect(chat.complete(request(), { signal: stop.signal, onDelta: () => {} })).rejects.not.toBeInstanceOf(ModelError);
  });
});

describe('what one answer may hold', () => {
  it('text and call arguments past MAX_ANSWER_CHARS end the call with a ModelError naming the limit; the deltas past it are never streamed', async () => {
    const mib = 'x'.repeat(1024 * 1024);
    const model = new MockLanguageModelV3({
      doStream: streamOf([
        { type: 'stream-start', warnings: [] },
        { type: 'tool-call', toolCallId: 'c1', toolName: 'note_write', input: `{"value":"${mib}"}` },
        ...Array.from({ length: 8 }, (): LanguageModelV3StreamPart => ({ type: 'text-delta', id: 't', delta: mib })),
        { type: 'finish', finishReason: { unified: 'stop', raw: 'stop' }, usage: usage(1, 1) },
      ]),
    });
    const deltas: string[] = [];
    const chat = new LanguageChatModel({ provider: 'mock', languageModel: () => model });
    const done = chat.complete(request(), { signal: new AbortController().signal, onDelta: (t) => deltas.push(t) });
    await expect(done).rejects.toThrow(`mock provider: the answer passed ${MAX_ANSWER_CHARS} characters of text and call arguments and was cut off`);
    await expect(done).rejects.toBeInstanceOf(ModelError);
    expect(deltas.join('').length + mib.length + 12).toBeLessThanOrEqual(MAX_ANSWER_CHARS);
  });
});

describe("the conversation as the SDK's messages", () => {
  let seq = 0;
  const ev = (type: string, data: unknown): LogEvent => ({ seq: seq++, type, data }) as LogEvent;
  const log = [
    ev('inbox/add', { inputId: 'i1', text: 'save and read' }),
    ev('turn/start', { turn: 1, inputId: 'i1' }),
    ev('step/start', { turn: 1, step: 1 }),
    ev('model/message', {
      turn: 1,
      step: 1,
      text: '',
      toolCalls: [
        { id: 'c1', name: 'note_write', arguments: '{"key":"k","value":"v"}' },
        { id: 'c2', name: 'note_read', arguments: 'not-json' },
        { id: 'c3', name: 'clock', arguments: '{}' },
      ],
    }),
    ev('tool/result', { turn: 1, step: 1, callId: 'c1', resultId: 'r1', status: 'ok', content: 'wrote note "k"' }),
    ev('tool/result', { turn: 1, step: 1, callId: 'c2', resultId: 'r2', status: 'error', content: 'arguments are not valid JSON: not-json' }),
    ev('step/end', { turn: 1, step: 1, reason: 'completed' }),
    ev('step/start', { turn: 1, step: 2 }),
    ev('model/message', { turn: 1, step: 2, text: 'Saved.', toolCalls: [] }),
    ev('step/end', { turn: 1, step: 2, reason: 'completed' }),
    ev('turn/end', { turn: 1, reason: 'completed' }),
  ];

  it('user text, assistant text and calls (answered ones only), results and errors', () => {
    const messages = buildModelMessages(log, { system: 'be brief' });
    expect(toPrompt(messages)).toEqual([
      { role: 'system', content: 'be brief' },
      { role: 'user', content: [{ type: 'text', text: 'save and read' }] },
      {
        role: 'assistant',
        content: [
          // c3 never got a result: chat APIs reject calls without answers (model-request.ts leaves it out).
          { type: 'tool-call', toolCallId: 'c1', toolName: 'note_write', input: { key: 'k', value: 'v' } },
          { type: 'tool-call', toolCallId: 'c2', toolName: 'note_read', input: {} },
        ],
      },
      { role: 'tool', content: [{ type: 'tool-result', toolCallId: 'c1', toolName: 'note_write', output: { type: 'text', value: 'wrote note "k"' } }] },
      {
        role: 'tool',
        content: [
          {
            type: 'tool-result',
            toolCallId: 'c2',
            toolName: 'note_read',
            output: { type: 'error-text', value: 'Error: arguments are not valid JSON: not-json' },
          },
        ],
      },
      { role: 'assistant', content: [{ type: 'text', text: 'Saved.' }] },
    ]);
  });

  it('converts each message once: a later request of the conversation hands out the same objects', () => {
    const first = buildModelMessages(log);
    const a = toPrompt(first);
    const b = toPrompt([...first, { role: 'user', content: 'next' }]);
    expect(b.slice(0, a.length).every((m, i) => m === a[i])).toBe(true);
  });

  it("reuses an earlier request's prompt only as far as the messages are the same objects", () => {
    const user = (content: string): ChatMessage => ({ role: 'user', content });
    const first = [user('a'), { role: 'assistant', content: 'x' } as ChatMessage, user('b')];
    const a = toPrompt(first);
    // The same conversation with its second message replaced (a re-render): the prompt follows the new one.
    const second = [first[0], { role: 'assistant', content: 'y' } as ChatMessage, first[2], user('c')];
    const b = toPrompt(second);
    expect(b[0]).toBe(a[0]);
    expect(b.slice(1).map((m) => (m.content[0] as { text: string }).text)).toEqual(['y', 'b', 'c']);
    expect(toPrompt([...second, user('d')]).map((m) => (m.content[0] as { text: string }).text)).toEqual(['a', 'y', 'b', 'c', 'd']);
  });

  it('a system message after the conversation began (a summary) stays one, or becomes user text for providers that take system text only first', () => {
    const messages: ChatMessage[] = [
      { role: 'system', content: 'rules' },
      { role: 'user', content: 'a' },
      { role: 'system', content: 'Summary of earlier conversation' },
      { role: 'user', content: 'b' },
    ];
    expect(toPrompt(messages).map((m) => m.role)).toEqual(['system', 'user', 'system', 'user']);
    expect(toPrompt(messages, { systemOnlyAtStart: true })).toEqual([
      { role: 'system', content: 'rules' },
      { role: 'user', content: [{ type: 'text', text: 'a' }] },
      { role: 'user', content: [{ type: 'text', text: 'Summary of earlier conversation' }] },
      { role: 'user', content: [{ type: 'text', text: 'b' }] },
    ]);
  });

  it('tools as function tools with their JSON Schema', () => {
    expect(toTools([{ name: 'x', description: 'd', parameters: { type: 'object' }, effect: 'side-effects' }])).toEqual([
      { type: 'function', name: 'x', description: 'd', inputSchema: { type: 'object' } },
    ]);
  });
});

describe('model settings', () => {
  it("allows sampling fields within bounds, under the SDK's names or the chat-completions ones", () => {
    expect(
      settingsProblem({ temperature: 0.5, topP: 0.9, topK: 40, maxOutputTokens: 512, seed: 7, stopSequences: ['x'], presencePenalty: 0, frequencyPenalty: 1 }),
    ).toBeUndefined();
    expect(settingsProblem({ top_p: 0.9, max_tokens: 10, stop: ['a', 'b'], presence_penalty: 0.1, frequency_penalty: 0.1, top_k: 3 })).toBeUndefined();
    expect(callSettings({ top_p: 0.9, max_tokens: 10, stop: 'a' })).toEqual({ topP: 0.9, maxOutputTokens: 10, stopSequences: ['a'] });
  });

  it('names what it refuses: unknown fields, values out of bounds, one setting under two names', () => {
    expect(settingsProblem({ n: 2, service_tier: 'flex' })).toMatch(/^unknown settings "n", "service_tier" \(allowed: temperature, topP/);
    expect(settingsProblem({ temperature: 9 })).toMatch(/^temperature: /);
    expect(settingsProblem({ maxOutputTokens: 1.5 })).toMatch(/^maxOutputTokens: /);
    expect(settingsProblem({ topP: 0.5, top_p: 0.5 })).toBe('setting "topP" given twice (under two names)');
  });
});
