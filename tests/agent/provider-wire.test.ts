// Every provider through GraphQL against a local fake server speaking its wire
// format (never the network): OpenAI chat completions, OpenAI Responses,
// Anthropic messages, Google generateContent, and an OpenAI-compatible server
// (vLLM, Ollama, llama.cpp). Each answers a turn with streamed text, runs a
// tool call round trip, records the usage the provider reported, maps the
// session's settings, and fails its turn with the provider's error.
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp, type TestApp } from '../helpers/app.ts';
import { providersAt } from '../helpers/fake-provider.ts';
import { waitFor } from '../helpers/wait.ts';
import { ModelCatalog } from '../../src/agent/models/model-catalog.ts';
import type { TurnUpdate } from '../../src/agent/turn-updates.ts';
import { anyData } from '../helpers/event-data.ts';
import {
  anthropicText,
  anthropicToolCall,
  chatText,
  chatToolCall,
  geminiText,
  geminiToolCall,
  responsesText,
  responsesToolCall,
} from '../helpers/provider-sse.ts';

/** A scripted answer: an error's status, headers and body, or a stream's SSE events (written 2 ms apart). */
type Reply = { status?: number; headers?: Record<string, string>; body?: unknown; events?: string[] };
type Received = { path: string; headers: http.IncomingHttpHeaders; body: any };

/** A provider's wire format: how it answers, and where its requests put what the agent sent. */
interface Wire {
  provider: string;
  /** The path prefix its base URL points at. */
  prefix: string;
  text(chunks: string[], usage: { input: number; output: number }): Reply;
  toolCall(call: { id: string; name: string; arguments: string }): Reply;
  error(status: number, message: string): Reply;
  /** Its real answer to a request longer than the model's context window. */
  overflow(): Reply;
  /** Its rate-limit answer (HTTP 429 with its body and headers), asking for a wait of `seconds`. */
  rateLimited(seconds: number): Reply;
  /** The texts of the user's messages a request carries. */
  userTexts(body: any): string[];
  /** The content the request gives the result of a call (by id, or by tool name where the format has no ids). */
  toolResult(body: any, call: { id: string; name: string }): unknown;
  /** The call the request repeats from the model's answer, as the format writes it. */
  toolCallSent(body: any, call: { id: string; name: string }): { name: string; arguments: unknown } | undefined;
  /** The sampling fields of a request: temperature and the answer's token limit. */
  sampling(body: any): { temperature: unknown; maxTokens: unknown };
  authorization(headers: http.IncomingHttpHeaders): string | undefined;
  /** The system text (instructions) the request carries ahead of the conversation. */
  system(body: any): string | undefined;
  /** Where the request asks for structured output: the schema (in the provider's dialect) and the name it goes by, if the format has one. */
  responseSchema(body: any): { schema: any; name?: string } | undefined;
  /** A model for which the SDK asks for structured output in the provider's native shape. */
  structuredModel?: string;
}

const chatCompletions = (provider: string, prefix: string): Wire => ({
  provider,
  prefix,
  text: (chunks, usage) => ({ events: chatText(chunks, usage) }),
  toolCall: (c) => ({ events: chatToolCall(c) }),
  error: (status, message) => ({
    status,
    body: { error: { message, type: 'invalid_request_error', param: null, code: status === 400 ? 'context_length_exceeded' : 'invalid_api_key' } },
  }),
  overflow: () => ({
    status: 400,
    body: {
      error: {
        message:
          "This model's maximum context length is 128000 tokens. However, your messages resulted in 131072 tokens. Please reduce the length of the messages.",
        type: 'invalid_request_error',
        param: 'messages',
        code: 'context_length_exceeded',
      },
    },
  }),
  rateLimited: (s) => ({
    status: 429,
    headers: { 'retry-after-ms': String(s * 1000), 'retry-after': String(s), 'x-ratelimit-remaining-requests': '0' },
    body: { error: { message: 'Rate limit reached for requests', type: 'requests', param: null, code: 'rate_limit_exceeded' } },
  }),
  userTexts: (b) =>
    b.messages.filter((m: any) => m.role === 'user').map((m: any) => (typeof m.content === 'string' ? m.content : m.content.map((p: any) => p.text).join(''))),
  toolResult: (b, c) => b.messages.find((m: any) => m.role === 'tool' && m.tool_call_id === c.id)?.content,
  toolCallSent: (b, c) => {
    const tc = b.messages.flatMap((m: any) => m.tool_calls ?? []).find((t: any) => t.id === c.id);
    return tc && { name: tc.function.name, arguments: JSON.parse(tc.function.arguments) };
  },
  sampling: (b) => ({ temperature: b.temperature, maxTokens: b.max_tokens }),
  authorization: (h) => h.authorization,
  system: (b) => (b.messages[0]?.role === 'system' ? b.messages[0].content : undefined),
  responseSchema: (b) =>
    b.response_format?.type === 'json_schema' ? { schema: b.response_format.json_schema.schema, name: b.response_format.json_schema.name } : undefined,
});

const responses: Wire = {
  provider: 'openai-responses',
  prefix: '/openai/v1',
  text: (chunks, usage) => ({ events: responsesText(chunks, usage) }),
  toolCall: (c) => ({ events: responsesToolCall(c) }),
  error: (status, message) => ({ status, body: { error: { message, type: 'invalid_request_error', param: null, code: null } } }),
  overflow: () => ({
    status: 400,
    body: {
      error: {
        message: 'Your input exceeds the context window of this model. Please adjust your input and try again.',
        type: 'invalid_request_error',
        param: 'input',
        code: 'context_length_exceeded',
      },
    },
  }),
  rateLimited: (s) => ({
    status: 429,
    headers: { 'retry-after-ms': String(s * 1000), 'retry-after': String(s) },
    body: { error: { message: 'Rate limit reached for requests', type: 'requests', param: null, code: 'rate_limit_exceeded' } },
  }),
  userTexts: (b) => b.input.filter((m: any) => m.role === 'user').map((m: any) => m.content.map((p: any) => p.text).join('')),
  toolResult: (b, c) => b.input.find((i: any) => i.type === 'function_call_output' && i.call_id === c.id)?.output,
  toolCallSent: (b, c) => {
    const i = b.input.find((x: any) => x.type === 'function_call' && x.call_id === c.id);
    return i && { name: i.name, arguments: JSON.parse(i.arguments) };
  },
  sampling: (b) => ({ temperature: b.temperature, maxTokens: b.max_output_tokens }),
  authorization: (h) => h.authorization,
  system: (b) => (b.input[0]?.role === 'system' ? b.input[0].content : undefined),
  responseSchema: (b) => (b.text?.format?.type === 'json_schema' ? { schema: b.text.format.schema, name: b.text.format.name } : undefined),
};

const anthropic: Wire = {
  provider: 'anthropic',
  prefix: '/anthropic/v1',
  text: (chunks, usage) => ({ events: anthropicText(chunks, usage) }),
  toolCall: (c) => ({ events: anthropicToolCall(c) }),
  error: (status, message) => ({
    status,
    body: { type: 'error', error: { type: status === 401 ? 'authentication_error' : 'invalid_request_error', message } },
  }),
  overflow: () => ({
    status: 400,
    body: { type: 'error', error: { type: 'invalid_request_error', message: 'prompt is too long: 208310 tokens > 200000 maximum' } },
  }),
  rateLimited: (s) => ({
    status: 429,
    headers: { 'retry-after': String(s), 'anthropic-ratelimit-requests-remaining': '0' },
    body: { type: 'error', error: { type: 'rate_limit_error', message: 'Number of request tokens has exceeded your per-minute rate limit' } },
  }),
  userTexts: (b) =>
    b.messages
      .filter((m: any) => m.role === 'user')
      .flatMap((m: any) => (typeof m.content === 'string' ? [m.content] : m.content.filter((p: any) => p.type === 'text').map((p: any) => p.text))),
  toolResult: (b, c) => {
    const r = b.messages.flatMap((m: any) => (Array.isArray(m.content) ? m.content : [])).find((p: any) => p.type === 'tool_result' && p.tool_use_id === c.id);
    return r && (typeof r.content === 'string' ? r.content : r.content.map((p: any) => p.text).join(''));
  },
  toolCallSent: (b, c) => {
    const u = b.messages.flatMap((m: any) => (Array.isArray(m.content) ? m.content : [])).find((p: any) => p.type === 'tool_use' && p.id === c.id);
    return u && { name: u.name, arguments: u.input };
  },
  sampling: (b) => ({ temperature: b.temperature, maxTokens: b.max_tokens }),
  authorization: (h) => h['x-api-key'] as string | undefined,
  system: (b) => b.system?.map((p: any) => p.text).join(''),
  // Models with Anthropic's structured outputs get output_config.format (older ones a forced "json" tool: the SDK decides).
  responseSchema: (b) => (b.output_config?.format?.type === 'json_schema' ? { schema: b.output_config.format.schema } : undefined),
  structuredModel: 'claude-sonnet-4-5',
};

const google: Wire = {
  provider: 'google',
  prefix: '/google/v1beta',
  text: (chunks, usage) => ({ events: geminiText(chunks, usage) }),
  toolCall: (c) => ({ events: geminiToolCall(c) }),
  error: (status, message) => ({ status, body: { error: { code: status, message, status: status === 400 ? 'INVALID_ARGUMENT' : 'UNAUTHENTICATED' } } }),
  // Google names no wait in a header (its RetryInfo detail is in the body): the backoff's own wait applies.
  overflow: () => ({
    status: 400,
    body: {
      error: { code: 400, message: 'The input token count (1200000) exceeds the maximum number of tokens allowed (1048576).', status: 'INVALID_ARGUMENT' },
    },
  }),
  rateLimited: () => ({
    status: 429,
    body: { error: { code: 429, message: 'Resource has been exhausted (e.g. check quota).', status: 'RESOURCE_EXHAUSTED' } },
  }),
  userTexts: (b) => b.contents.filter((m: any) => m.role === 'user').flatMap((m: any) => m.parts.filter((p: any) => 'text' in p).map((p: any) => p.text)),
  // Google matches a result to its call by the tool's name (its format has no call ids).
  toolResult: (b, c) => b.contents.flatMap((m: any) => m.parts).find((p: any) => p.functionResponse?.name === c.name)?.functionResponse.response.content,
  toolCallSent: (b, c) => {
    const f = b.contents.flatMap((m: any) => m.parts).find((p: any) => p.functionCall?.name === c.name);
    return f && { name: f.functionCall.name, arguments: f.functionCall.args };
  },
  sampling: (b) => ({ temperature: b.generationConfig?.temperature, maxTokens: b.generationConfig?.maxOutputTokens }),
  authorization: (h) => h['x-goog-api-key'] as string | undefined,
  system: (b) => b.systemInstruction?.parts.map((p: any) => p.text).join(''),
  responseSchema: (b) =>
    b.generationConfig?.responseMimeType === 'application/json' && b.generationConfig.responseSchema
      ? { schema: b.generationConfig.responseSchema }
      : undefined,
};

const WIRES: Wire[] = [chatCompletions('openai', '/openai/v1'), responses, anthropic, google, chatCompletions('openai-compatible', '/compat/v1')];

const replies = new Map<string, Reply[]>(WIRES.map((w) => [w.provider, []]));
const received = new Map<string, Received[]>(WIRES.map((w) => [w.provider, []]));
let fake: http.Server;
let app: TestApp;

/** Which provider a request is for: its path, and for the two OpenAI APIs on one base URL, the endpoint. */
const providerOf = (path: string) =>
  path.startsWith('/openai/v1/responses') ? 'openai-responses' : WIRES.find((w) => w.provider !== 'openai-responses' && path.startsWith(w.prefix))?.provider;

beforeAll(async () => {
  fake = http.createServer(async (req, res) => {
    let raw = '';
    for await (const c of req) raw += c;
    const provider = providerOf(req.url!);
    if (!provider) return void res.writeHead(404).end();
    received.get(provider)!.push({ path: req.url!, headers: req.headers, body: JSON.parse(raw) });
    const reply = replies.get(provider)!.shift() ?? { status: 500, body: { error: { message: 'no scripted reply' } } };
    if (reply.status && reply.status !== 200)
      return void res.writeHead(reply.status, { 'content-type': 'application/json', ...reply.headers }).end(JSON.stringify(reply.body));
    res.writeHead(200, { 'content-type': 'text/event-stream' });
    for (const e of reply.events ?? []) {
      res.write(e);
      await new Promise((r) => setTimeout(r, 2));
    }
    res.end();
  });
  await new Promise<void>((r) => fake.listen(0, '127.0.0.1', r));
  const base = `http://127.0.0.1:${(fake.address() as AddressInfo).port}`;
  app = await startTestApp({
    providers: providersAt(base),
    // Short waits where the provider names none (Google): the test does not wait a second per retry.
    modelRetries: { maxRetries: 2, initialDelayMs: 20, maxDelayMs: 100 },
    // The shipped price table, and one model the operator adds (as FORKLINE_MODELS_CONFIG would).
    budget: { models: new ModelCatalog({ 'house-model': { inputUsdPerMTok: 2, outputUsdPerMTok: 8 } }) },
  });
});
afterAll(async () => {
  await app?.close();
  await new Promise((r) => fake.close(r));
});

async function session(
  provider: string,
  settings: Record<string, unknown> = { temperature: 0.2, maxOutputTokens: 300 },
  instructions?: string,
  model = 'fake-model',
) {
  const r = await app.ok(`mutation($m: ModelConfigInput!, $ins: String) { createSession(input: { title: "wire", model: $m, instructions: $ins }) { id } }`, {
    m: { provider, model, settings },
    ins: instructions,
  });
  return r.createSession.id as string;
}
const send = async (id: string, text: string) => {
  await app.ok(`mutation($i: SendMessageInput!) { sendMessage(input: $i) { inputId } }`, { i: { sessionId: id, text } });
  await app.services.host.idle();
};
const log = async (id: string) => app.services.store.log.page(id, -1, 1000);

describe.each(WIRES)('provider $provider over its wire format', (wire) => {
  const queue = (...r: Reply[]) => replies.get(wire.provider)!.push(...r);
  const requests = () => received.get(wire.provider)!;

  it('streams text deltas, persists the answer with the usage the provider reported, and sends the allowed settings', async () => {
    const id = await session(wire.provider);
    const deltas: string[] = [];
    app.turnUpdates.on(id, (u: TurnUpdate) => u.kind === 'TEXT_DELTA' && deltas.push(u.text!));
    queue(wire.text(['Hel', 'lo, ', 'world'], { input: 11, output: 3 }));
    await send(id, 'hi');
    expect(deltas).toEqual(['Hel', 'lo, ', 'world']);
    const events = await log(id);
    expect(events.find((e) => e.type === 'model/message')!.data).toEqual({
      turn: 1,
      step: 1,
      text: 'Hello, world',
      toolCalls: [],
      usage: { inputTokens: 11, outputTokens: 3 },
    });
    expect(events.at(-1)).toMatchObject({ type: 'turn/end', data: { reason: 'completed' } });
    const req = requests().at(-1)!;
    expect(wire.userTexts(req.body)).toEqual(['hi']);
    expect(wire.sampling(req.body)).toEqual({ temperature: 0.2, maxTokens: 300 });
    expect(wire.authorization(req.headers)).toMatch(/sk-/);
  });

  it('sends the instructions first (as the system prompt) in every request; setSessionInstructions changes them for the next request', async () => {
    const id = await session(wire.provider, {}, 'Answer in French.');
    queue(wire.text(['Bonjour'], { input: 5, output: 1 }));
    await send(id, 'hi');
    expect(wire.system(requests().at(-1)!.body)).toBe('Answer in French.');
    expect(wire.userTexts(requests().at(-1)!.body)).toEqual(['hi']);
    const set = await app.ok(`mutation($i: SetSessionInstructionsInput!) { setSessionInstructions(input: $i) { instructions } }`, {
      i: { sessionId: id, instructions: 'Answer in German.' },
    });
    expect(set.setSessionInstructions.instructions).toBe('Answer in German.');
    const call = { id: `call_i_${wire.provider}`, name: 'note_write', arguments: '{"key":"k","value":"v"}' };
    queue(wire.toolCall(call), wire.text(['Guten Tag'], { input: 5, output: 2 }));
    await send(id, 'again');
    // Both steps of the turn send the instructions, once, ahead of the conversation.
    for (const r of requests().slice(-2)) {
      expect(wire.system(r.body)).toBe('Answer in German.');
      expect(wire.userTexts(r.body)).toEqual(['hi', 'again']);
    }
    expect((await log(id)).filter((e) => e.type === 'session/instructions').map((e) => anyData(e).text)).toEqual(['Answer in French.', 'Answer in German.']);
  });

  it('a 429 is tried again after the wait the provider asks for; both attempts are recorded and the turn completes', async () => {
    const id = await session(wire.provider);
    const before = requests().length;
    queue(wire.rateLimited(0), wire.text(['after the wait'], { input: 3, output: 3 }));
    await send(id, 'hi');
    const events = await log(id);
    expect(requests().length - before).toBe(2);
    const retries = events.filter((e) => e.type === 'plugin/agent/retry');
    expect(retries.map((e) => e.data)).toEqual([
      {
        turn: 1,
        step: 1,
        attempt: 1,
        status: 429,
        error: expect.stringMatching(new RegExp(`^${wire.provider} provider: HTTP 429: `)),
        delayMs: wire.provider === 'google' ? 20 : 0,
      },
    ]);
    // The attempt is recorded inside its step, before the answer of the next one.
    const step = events.find((e) => e.type === 'step/start')!.seq;
    const answer = events.find((e) => e.type === 'model/message')!;
    expect(retries[0].seq).toBeGreaterThan(step);
    expect(retries[0].seq).toBeLessThan(answer.seq);
    expect(anyData(answer).text).toBe('after the wait');
    expect(events.at(-1)).toMatchObject({ type: 'turn/end', data: { reason: 'completed' } });
  });

  it('a context overflow is answered by compacting the history and sending the request once more; the turn completes', async () => {
    const id = await session(wire.provider, {});
    queue(wire.text(['first answer'], { input: 5, output: 2 }));
    await send(id, 'first question');
    const before = requests().length;
    queue(wire.overflow(), wire.text(['the summary'], { input: 5, output: 2 }), wire.text(['second answer'], { input: 5, output: 2 }));
    await send(id, 'second question');
    const events = await log(id);
    const sent = requests().slice(before);
    expect(sent).toHaveLength(3);
    // The retried request holds the summary in place of the first turn, then the new question.
    expect(JSON.stringify(sent[2].body)).toContain('the summary');
    expect(JSON.stringify(sent[2].body)).not.toContain('first question');
    expect(wire.userTexts(sent[2].body).at(-1)).toBe('second question');
    const turn2 = events.slice(events.findLastIndex((e) => e.type === 'turn/start'));
    expect(turn2.map((e) => e.type)).toEqual([
      'turn/start',
      'step/start',
      'plugin/compaction/start',
      'surface/replace',
      'plugin/compaction/end',
      'model/message',
      'step/end',
      'turn/end',
    ]);
    expect(anyData(turn2.find((e) => e.type === 'model/message')!).text).toBe('second answer');
    expect(events.at(-1)).toMatchObject({ type: 'turn/end', data: { reason: 'completed' } });
  });

  it("structured output: the schema reaches the request in the provider's shape; a matching answer is stored, a mismatch fails the turn saying why", async () => {
    const id = await session(wire.provider, {}, undefined, wire.structuredModel);
    const schema = {
      type: 'object',
      properties: { city: { type: 'string' }, population: { type: 'integer' } },
      required: ['city', 'population'],
      additionalProperties: false,
    };
    const sendShaped = async (text: string) => {
      const r = await app.ok(`mutation($i: SendMessageInput!) { sendMessage(input: $i) { inputId } }`, {
        i: { sessionId: id, text, responseSchema: schema, responseSchemaName: 'city_facts' },
      });
      await app.services.host.idle();
      return r.sendMessage.inputId as string;
    };
    queue(wire.text(['{"city":"Pa', 'ris","population":2100000}'], { input: 9, output: 8 }));
    await sendShaped('the biggest city of France?');
    const sent = wire.responseSchema(requests().at(-1)!.body);
    expect(sent, 'the request asks for structured output').toBeDefined();
    expect(JSON.stringify(sent!.schema)).toMatch(/city/);
    expect(JSON.stringify(sent!.schema)).toMatch(/population/);
    if (sent!.name !== undefined) expect(sent!.name).toBe('city_facts');
    let events = await log(id);
    expect(anyData(events.find((e) => e.type === 'model/message')!).output).toEqual({ city: 'Paris', population: 2100000 });
    // The input keeps its schema in the log (forks and replays ask the same).
    expect(anyData(events.find((e) => e.type === 'inbox/add')!).responseFormat).toEqual({ schema, name: 'city_facts' });

    queue(wire.text(['{"city": 42}'], { input: 9, output: 4 }));
    await sendShaped('and of Italy?');
    events = await log(id);
    expect(events.slice(-3).map((e) => e.type)).toEqual(['plugin/agent/error', 'step/end', 'turn/end']);
    expect(anyData(events.at(-1)!).reason).toBe('failed');
    const turns = await app.ok(`query($id: ID!) { session(id: $id) { turns { reason structuredOutput error errorCode } } }`, { id });
    expect(turns.session.turns).toEqual([
      { reason: 'completed', structuredOutput: { city: 'Paris', population: 2100000 }, error: null, errorCode: null },
      {
        reason: 'failed',
        structuredOutput: null,
        error: "the answer does not match the response schema: / must have required property 'population'; /city must be string",
        errorCode: 'OUTPUT_SCHEMA_MISMATCH',
      },
    ]);
    // The answer is kept as the model gave it (without an output).
    expect(anyData(events.filter((e) => e.type === 'model/message').at(-1)!)).toMatchObject({ text: '{"city": 42}' });
    expect(anyData(events.filter((e) => e.type === 'model/message').at(-1)!).output).toBeUndefined();
  });

  it('runs a streamed tool call and sends its result back with the call', async () => {
    const id = await session(wire.provider);
    const call = { id: `call_${wire.provider}`, name: 'note_write', arguments: '{"key":"k","value":"v"}' };
    queue(wire.toolCall(call), wire.text(['Saved.'], { input: 40, output: 2 }));
    await send(id, 'save a note');
    const events = await log(id);
    const messages = events.filter((e) => e.type === 'model/message').map(anyData);
    // Google's format has no call ids: the SDK makes one.
    const callId = wire.provider === 'google' ? messages[0].toolCalls[0]?.id : call.id;
    expect(messages[0].toolCalls).toEqual([{ id: callId, name: 'note_write', arguments: call.arguments, effect: 'side-effects' }]);
    expect(messages[0].usage).toEqual({ inputTokens: 20, outputTokens: 7 });
    expect(events.find((e) => e.type === 'tool/result')!.data).toMatchObject({ callId, status: 'ok', content: 'wrote note "k"' });
    expect(messages[1]).toMatchObject({ step: 2, text: 'Saved.' });
    expect(events.at(-1)).toMatchObject({ type: 'turn/end', data: { reason: 'completed' } });
    const second = requests().at(-1)!.body;
    expect(wire.toolCallSent(second, call)).toEqual({ name: 'note_write', arguments: { key: 'k', value: 'v' } });
    expect(wire.toolResult(second, call)).toBe('wrote note "k"');
  });

  it("a provider's error (context too long, a bad key) fails the turn with the provider's reason; the session keeps serving", async () => {
    const id = await session(wire.provider);
    queue(wire.error(400, 'prompt is too long: 250000 tokens > 200000 maximum'));
    await send(id, 'a very long history');
    let events = await log(id);
    expect(events.slice(-3).map((e) => [e.type, anyData(e).reason ?? anyData(e).message])).toEqual([
      ['plugin/agent/error', `${wire.provider} provider: HTTP 400: prompt is too long: 250000 tokens > 200000 maximum`],
      ['step/end', 'failed'],
      ['turn/end', 'failed'],
    ]);
    queue(wire.error(401, 'invalid api key'));
    await send(id, 'again');
    events = await log(id);
    expect(anyData(events.at(-3)!).message).toBe(`${wire.provider} provider: HTTP 401: invalid api key`);
    queue(wire.text(['recovered'], { input: 1, output: 1 }));
    await send(id, 'third');
    events = await log(id);
    expect(events.at(-1)).toMatchObject({ type: 'turn/end', data: { turn: 3, reason: 'completed' } });
  });
});

describe('model settings where a session gets its model', () => {
  const bad = (r: { errors?: Array<{ message: string; extensions?: Record<string, unknown> }> }) => r.errors?.map((e) => [e.extensions?.code, e.message]);

  it('unknown or out-of-bounds settings are BAD_USER_INPUT in createSession, setSessionModel and fork overrides; nothing is written', async () => {
    const create = await app.gql(`mutation { createSession(input: { title: "x", model: { provider: "openai", model: "m", settings: { n: 4 } } }) { id } }`);
    expect(bad(create)).toEqual([['BAD_USER_INPUT', expect.stringMatching(/^model settings: unknown setting "n" \(allowed: temperature, topP/)]]);
    const id = await session('scripted', {});
    const set = await app.gql(
      `mutation($id: ID!) { setSessionModel(sessionId: $id, model: { provider: "anthropic", model: "m", settings: { temperature: 5 } }) { id } }`,
      { id },
    );
    expect(bad(set)).toEqual([['BAD_USER_INPUT', expect.stringMatching(/^model settings: temperature: /)]]);
    await send(id, 'hello');
    const fork = await app.gql(
      `mutation($id: ID!) { forkSession(input: { sessionId: $id, atSeq: 0, model: { provider: "google", model: "m", settings: { service_tier: "flex" } } }) { session { id } } }`,
      { id },
    );
    expect(bad(fork)).toEqual([['BAD_USER_INPUT', expect.stringMatching(/unknown setting "service_tier"/)]]);
    expect((await log(id)).filter((e) => e.type === 'session/model')).toHaveLength(1);
  });

  it('names each refused field; nothing is created', async () => {
    const before = (await app.ok('{ sessions(first: 500) { edges { node { id } } } }')).sessions.edges.length;
    for (const [settings, says] of [
      [{ n: 8 }, '"n"'],
      [{ service_tier: 'priority', temperature: 0.5 }, '"service_tier"'],
      [{ store: true, logprobs: true }, '"store", "logprobs"'],
      [{ model: 'gpt-expensive' }, '"model"'],
      [{ stream: false }, '"stream"'],
      [{ temperature: 5 }, 'temperature'],
      [{ max_tokens: 10_000_000 }, 'max_tokens'],
      [{ top_p: 'high' }, 'top_p'],
      [{ stopSequences: ['a', 'b', 'c', 'd', 'e'] }, 'stopSequences'],
    ] as const) {
      const r = await app.gql(`mutation($m: ModelConfigInput) { createSession(input: { title: "settings", model: $m }) { id } }`, {
        m: { provider: 'openai', model: 'm', settings },
      });
      expect(r.errors?.[0]?.extensions?.code, JSON.stringify(settings)).toBe('BAD_USER_INPUT');
      expect(r.errors?.[0]?.message).toContain(says);
    }
    expect((await app.ok('{ sessions(first: 500) { edges { node { id } } } }')).sessions.edges.length).toBe(before);
  });

  it('the chat-completions names reach the provider as its own fields', async () => {
    const id = await session('openai', { temperature: 0.2, top_p: 0.9, max_tokens: 64, seed: 7, stop: ['END'] });
    replies.get('openai')!.push(chatCompletions('openai', '/openai/v1').text(['ok'], { input: 1, output: 1 }));
    await send(id, 'hi');
    expect(received.get('openai')!.at(-1)!.body).toMatchObject({ model: 'fake-model', temperature: 0.2, top_p: 0.9, max_tokens: 64, seed: 7, stop: ['END'] });
  });

  it('an older log whose session/model holds settings outside the list still runs: they are never sent', async () => {
    const id = await session('openai', {});
    await app.services.store.append(id, [
      { type: 'session/model', data: { provider: 'openai', model: 'fake-model', settings: { temperature: 0.5, n: 4, logit_bias: { 1: 100 } } } },
    ]);
    replies.get('openai')!.push(chatCompletions('openai', '/openai/v1').text(['ok'], { input: 1, output: 1 }));
    await send(id, 'hi');
    const body = received.get('openai')!.at(-1)!.body;
    expect(body.temperature).toBe(0.5);
    expect(body).not.toHaveProperty('n');
    expect(body).not.toHaveProperty('logit_bias');
  });

  it('the openai-compatible provider is known only with a base URL; a provider without a key fails its turn saying so', async () => {
    const { ModelRegistry } = await import('../../src/agent/models/registry.ts');
    expect(new ModelRegistry().names).toEqual(['scripted', 'openai', 'openai-responses', 'anthropic', 'google']);
    expect(new ModelRegistry({ openaiCompatible: { baseUrl: 'http://127.0.0.1:1/v1' } }).names).toContain('openai-compatible');
    const saved = process.env.ANTHROPIC_API_KEY;
    delete process.env.ANTHROPIC_API_KEY;
    try {
      const keyless = new ModelRegistry({ anthropic: { baseUrl: 'http://127.0.0.1:1/v1' } }).resolve('anthropic');
      await expect(
        keyless.complete(
          { provider: 'anthropic', model: 'm', messages: [{ role: 'user', content: 'hi' }], tools: [] },
          { signal: new AbortController().signal, onDelta: () => {} },
        ),
      ).rejects.toThrow(/^anthropic provider: .*API key is missing/);
    } finally {
      if (saved !== undefined) process.env.ANTHROPIC_API_KEY = saved;
    }
  });
});

describe('instructions across forks, edits and variants', () => {
  const openaiReplies = () => replies.get('openai')!;
  const lastSystem = () => chatCompletions('openai', '/openai/v1').system(received.get('openai')!.at(-1)!.body);

  it('a fork inherits the instructions of its cut; an edit or a variant that names new ones replaces them; Session.instructions and modelRequest say so', async () => {
    const id = await session('openai', {}, 'Be brief.');
    openaiReplies().push(chatCompletions('openai', '/openai/v1').text(['ok'], { input: 1, output: 1 }));
    await send(id, 'first');
    const cut = (await log(id)).at(-1)!.seq;
    await app.ok(`mutation($i: SetSessionInstructionsInput!) { setSessionInstructions(input: $i) { id } }`, {
      i: { sessionId: id, instructions: 'Be verbose.' },
    });
    const q = `query($id: ID!) { session(id: $id) { instructions modelRequest { messages } } }`;
    expect((await app.ok(q, { id })).session.instructions).toBe('Be verbose.');

    // A fork at the end of the first turn: the instructions as of then.
    const fork = await app.ok(`mutation($id: ID!, $at: Int!) { forkSession(input: { sessionId: $id, atSeq: $at }) { session { id instructions } } }`, {
      id,
      at: cut,
    });
    expect(fork.forkSession.session.instructions).toBe('Be brief.');
    openaiReplies().push(chatCompletions('openai', '/openai/v1').text(['ok'], { input: 1, output: 1 }));
    await send(fork.forkSession.session.id, 'in the fork');
    expect(lastSystem()).toBe('Be brief.');

    // An edit of the first input that names new instructions; one that names none keeps those of its cut.
    const inputId = anyData((await log(id)).find((e) => e.type === 'inbox/add')!).inputId;
    openaiReplies().push(chatCompletions('openai', '/openai/v1').text(['ok'], { input: 1, output: 1 }));
    const edit = await app.ok(`mutation($i: EditMessageInput!) { editMessage(input: $i) { session { id instructions } } }`, {
      i: { sessionId: id, inputId, text: 'first, edited', instructions: 'Be formal.' },
    });
    await app.services.host.idle();
    expect(edit.editMessage.session.instructions).toBe('Be formal.');
    expect(lastSystem()).toBe('Be formal.');

    // Fan-out variants: one with its own instructions, one with "" (none).
    const fan = await app.ok(`mutation($i: FanOutInput!) { fanOut(input: $i) { children { id instructions modelRequest { messages } } } }`, {
      i: {
        sessionId: id,
        atSeq: cut,
        variants: [
          { title: 'a', instructions: 'Be playful.' },
          { title: 'b', instructions: '' },
        ],
      },
    });
    const [a, b] = fan.fanOut.children;
    expect(a.instructions).toBe('Be playful.');
    expect(b.instructions).toBeNull();
    expect(a.modelRequest.messages[0]).toEqual({ role: 'system', content: 'Be playful.' });
    expect(b.modelRequest.messages.some((m: any) => m.role === 'system')).toBe(false);
  });
});

describe('model call retries', () => {
  const wire = chatCompletions('openai', '/openai/v1');

  it("gives up after the configured retries with the provider's message; a 401 is never tried again", async () => {
    const id = await session('openai', {});
    const before = received.get('openai')!.length;
    replies.get('openai')!.push(wire.rateLimited(0), wire.rateLimited(0), wire.rateLimited(0));
    await send(id, 'hi');
    let events = await log(id);
    expect(received.get('openai')!.length - before).toBe(3);
    expect(events.filter((e) => e.type === 'plugin/agent/retry').map((e) => anyData(e).attempt)).toEqual([1, 2]);
    expect(anyData(events.at(-3)!).message).toMatch(/^openai provider: HTTP 429: Rate limit reached/);
    expect(events.at(-1)).toMatchObject({ type: 'turn/end', data: { reason: 'failed' } });

    replies.get('openai')!.push(wire.error(401, 'invalid api key'));
    await send(id, 'again');
    events = await log(id);
    expect(received.get('openai')!.length - before).toBe(4);
    expect(events.filter((e) => e.type === 'plugin/agent/retry')).toHaveLength(2);
  });

  it('a cancel during the wait stops retrying: the turn ends cancelled and nothing is sent again', async () => {
    const id = await session('openai', {});
    const before = received.get('openai')!.length;
    replies.get('openai')!.push(wire.rateLimited(50));
    await app.ok(`mutation($i: SendMessageInput!) { sendMessage(input: $i) { inputId } }`, { i: { sessionId: id, text: 'hi' } });
    await waitFor(async () => (await log(id)).find((e) => e.type === 'plugin/agent/retry'), { what: 'the recorded retry' });
    await app.ok(`mutation($id: ID!) { cancelTurn(sessionId: $id) { id } }`, { id });
    await app.services.host.idle();
    const events = await log(id);
    expect(events.find((e) => e.type === 'plugin/agent/retry')!.data).toMatchObject({ attempt: 1, status: 429, delayMs: 50_000 });
    expect(events.at(-1)).toMatchObject({ type: 'turn/end', data: { reason: 'cancelled' } });
    expect(received.get('openai')!.length - before).toBe(1);
  });
});

describe('cost from the price table', () => {
  // A model of each provider's the table prices (USD per million tokens in / out), and the operator's own.
  const priced: Array<[provider: string, model: string, usdIn: number, usdOut: number]> = [
    ['openai', 'gpt-4o-mini', 0.15, 0.6],
    ['openai-responses', 'gpt-4.1-mini-2025-04-14', 0.4, 1.6],
    ['anthropic', 'claude-haiku-4-5-20251001', 1, 5],
    ['google', 'gemini-2.0-flash', 0.1, 0.4],
    ['openai-compatible', 'house-model', 2, 8],
  ];
  const q = `query($id: ID!) { session(id: $id) { totals { inputTokens outputTokens costUsd } turns { usage { costUsd } } } }`;

  it.each(priced)('%s %s: each answer records its cost; Session.totals and each turn sum it', async (provider, model, usdIn, usdOut) => {
    const wire = WIRES.find((w) => w.provider === provider)!;
    const id = await session(provider, {}, undefined, model);
    replies.get(provider)!.push(wire.text(['one'], { input: 1000, output: 500 }), wire.text(['two'], { input: 3000, output: 100 }));
    await send(id, 'first');
    await send(id, 'second');
    const cost = (i: number, o: number) => (i * usdIn + o * usdOut) / 1e6;
    const messages = (await log(id)).filter((e) => e.type === 'model/message');
    expect(anyData(messages[0]).usage.costUsd).toBeCloseTo(cost(1000, 500), 9);
    const s = (await app.ok(q, { id })).session;
    expect(s.totals).toMatchObject({ inputTokens: 4000, outputTokens: 600 });
    expect(s.totals.costUsd).toBeCloseTo(cost(4000, 600), 9);
    expect(s.turns.map((t: any) => t.usage.costUsd)).toEqual([expect.closeTo(cost(1000, 500), 9), expect.closeTo(cost(3000, 100), 9)]);
  });

  it('a model without a price has tokens but no cost (null, not 0)', async () => {
    const id = await session('openai', {});
    replies.get('openai')!.push(chatCompletions('openai', '/openai/v1').text(['x'], { input: 10, output: 10 }));
    await send(id, 'hi');
    const s = (await app.ok(q, { id })).session;
    expect(s.totals).toEqual({ inputTokens: 10, outputTokens: 10, costUsd: null });
    expect(s.turns[0].usage.costUsd).toBeNull();
  });
});

describe('compactSession and the provider', () => {
  const wire = anthropic;
  const compact = (id: string) => app.gql(`mutation($i: CompactSessionInput!) { compactSession(input: $i) { summarySeq } }`, { i: { sessionId: id } });

  it("a summary the provider refuses is MODEL_ERROR with the provider's message, never INTERNAL_SERVER_ERROR", async () => {
    const id = await session('anthropic', {});
    replies.get('anthropic')!.push(wire.text(['hello'], { input: 5, output: 1 }));
    await send(id, 'hi');
    replies.get('anthropic')!.push(wire.error(401, 'invalid x-api-key'));
    const r = await compact(id);
    expect(r.errors?.map((e: any) => [e.extensions?.code, e.message])).toEqual([['MODEL_ERROR', 'anthropic provider: HTTP 401: invalid x-api-key']]);
  });

  it("a summary request that overflows is sent again in smaller parts; one that still overflows is MODEL_ERROR with the provider's message", async () => {
    const id = await session('anthropic', {});
    replies.get('anthropic')!.push(wire.text(['hello'], { input: 5, output: 1 }));
    await send(id, 'hi');
    replies.get('anthropic')!.push(wire.overflow(), wire.text(['short summary'], { input: 5, output: 1 }));
    const ok = await compact(id);
    expect(ok.errors).toBeUndefined();
    const events = await log(id);
    expect(anyData(events.find((e) => e.type === 'surface/replace')!).content).toBe('short summary');

    replies.get('anthropic')!.push(wire.overflow(), wire.overflow(), wire.overflow(), wire.overflow());
    const refused = await compact(id);
    expect(refused.errors?.map((e: any) => [e.extensions?.code, e.message])).toEqual([
      ['MODEL_ERROR', 'anthropic provider: HTTP 400: prompt is too long: 208310 tokens > 200000 maximum'],
    ]);
  });
});
