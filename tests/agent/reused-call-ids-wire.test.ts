// A call id reused across steps (docs/contract.md#append-rules: ids are unique
// per step only; external runners, imported recordings and some servers repeat
// them) with both calls answered: what each provider is sent, through the AI
// SDK's own provider packages, against fake servers that refuse what the real
// APIs refuse (tests/helpers/provider-rules.ts): Anthropic refuses two `tool_use`
// blocks with one id, Responses pairs outputs by call_id, Gemini pairs results
// with calls by order and name, Chat Completions answers each assistant
// message's calls by the tool messages right after it.
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Conversation } from '../../src/core/model-request.ts';
import type { NewEvent } from '../../src/core/events.ts';
import type { ToolDefinition } from '../../src/core/chat.ts';
import { LanguageChatModel } from '../../src/agent/models/language-model.ts';
import { providersOf } from '../../src/agent/models/providers.ts';
import { withSeqs } from '../spec/reference-log.ts';
import { anthropicText, chatText, geminiText, responsesText } from '../helpers/provider-sse.ts';
import { refusalBody, wireRefusal } from '../helpers/provider-rules.ts';

type Body = any;
/** Why the real API refuses this request body (its 400's message), if it does (tests/helpers/provider-rules.ts). */
const refusals = wireRefusal;

/** The results a request carries, as [the id (or name) it answers, its text], in order. */
const resultsSent: Record<string, (b: Body) => Array<[string, string]>> = {
  anthropic: (b) =>
    b.messages
      .flatMap((m: any) => (Array.isArray(m.content) ? m.content : []))
      .filter((p: any) => p.type === 'tool_result')
      .map((p: any) => [p.tool_use_id, typeof p.content === 'string' ? p.content : p.content.map((x: any) => x.text).join('')]),
  'openai-responses': (b) => b.input.filter((i: any) => i.type === 'function_call_output').map((i: any) => [i.call_id, i.output]),
  google: (b) =>
    b.contents
      .flatMap((c: any) => c.parts.filter((p: any) => p.functionResponse))
      .map((p: any) => [p.functionResponse.name, p.functionResponse.response.content]),
  openai: (b) => b.messages.filter((m: any) => m.role === 'tool').map((m: any) => [m.tool_call_id, m.content]),
};

/** The ids of the calls a request carries, in order. */
const callsSent: Record<string, (b: Body) => string[]> = {
  anthropic: (b) =>
    b.messages
      .flatMap((m: any) => (Array.isArray(m.content) ? m.content : []))
      .filter((p: any) => p.type === 'tool_use')
      .map((p: any) => p.id),
  'openai-responses': (b) => b.input.filter((i: any) => i.type === 'function_call').map((i: any) => i.call_id),
  google: (b) => b.contents.flatMap((c: any) => c.parts.filter((p: any) => p.functionCall)).map((p: any) => p.functionCall.name),
  openai: (b) => b.messages.flatMap((m: any) => (m.tool_calls ?? []).map((c: any) => c.id)),
};

const usage = { input: 5, output: 1 };
const answers: Record<string, string[]> = {
  anthropic: anthropicText(['ok'], usage),
  'openai-responses': responsesText(['ok'], usage),
  google: geminiText(['ok'], usage),
  openai: chatText(['ok'], usage),
};

let server: http.Server;
let base = '';
const received: Array<{ path: string; body: Body }> = [];
beforeAll(async () => {
  server = http.createServer((req, res) => {
    let raw = '';
    req.on('data', (c) => (raw += c));
    req.on('end', () => {
      const body = JSON.parse(raw) as Body;
      received.push({ path: req.url ?? '', body });
      const provider = req.url!.startsWith('/anthropic')
        ? 'anthropic'
        : req.url!.startsWith('/google')
          ? 'google'
          : req.url!.includes('/responses')
            ? 'openai-responses'
            : 'openai';
      const refusal = refusals[provider as keyof typeof refusals](body);
      if (refusal) {
        res.writeHead(400, { 'content-type': 'application/json' });
        res.end(JSON.stringify(refusalBody(provider, refusal)));
        return;
      }
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      for (const e of answers[provider]) res.write(e);
      res.end();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});
afterAll(() => server.close());

/** One turn whose steps 1 and 2 each call `clock` under the id `call_0` and get its result, then step 3 asks the model again. */
function reusedIdLog(): NewEvent[] {
  const step = (n: number): NewEvent[] => [
    { type: 'step/start', data: { turn: 1, step: n } },
    { type: 'model/message', data: { turn: 1, step: n, text: '', toolCalls: [{ id: 'call_0', name: 'clock', arguments: '{}' }] } },
    { type: 'tool/result', data: { turn: 1, step: n, callId: 'call_0', resultId: `r_${n}`, status: 'ok', content: `time of step ${n}` } },
    { type: 'step/end', data: { turn: 1, step: n, reason: 'completed' } },
  ];
  return [
    { type: 'inbox/add', data: { inputId: 'in_1', text: 'what time is it, twice?' } },
    { type: 'inbox/remove', data: { inputId: 'in_1', reason: 'taken' } },
    { type: 'turn/start', data: { turn: 1, inputId: 'in_1' } },
    ...step(1),
    ...step(2),
  ];
}

describe('two answered calls with one id in different steps, as each provider is sent them', () => {
  for (const provider of ['anthropic', 'openai-responses', 'google', 'openai']) {
    it(`${provider}: the request is accepted, each call once, each result after its own call`, async () => {
      const families = providersOf({
        openai: { baseUrl: `${base}/openai/v1`, apiKey: 'sk-openai' },
        anthropic: { baseUrl: `${base}/anthropic/v1`, apiKey: 'sk-anthropic' },
        google: { baseUrl: `${base}/google/v1beta`, apiKey: 'sk-google' },
      });
      const family = families.get(provider)!;
      const model = new LanguageChatModel({
        provider,
        languageModel: family.languageModel,
        prompt: family.prompt,
        retries: { maxRetries: 0, initialDelayMs: 1, maxDelayMs: 1 },
      });
      const messages = new Conversation().applyAll(withSeqs(reusedIdLog())).messages();
      const tools: ToolDefinition[] = [{ name: 'clock', description: 'the time', parameters: { type: 'object', properties: {} }, effect: 'read-only' }];
      const from = received.length;
      const answer = await model.complete({ provider, model: 'fake-model', messages, tools }, { signal: new AbortController().signal, onDelta: () => {} });
      expect(answer.text).toBe('ok');
      const body = received.at(-1)!.body;
      expect(received.length).toBe(from + 1);
      expect(refusals[provider as keyof typeof refusals](body)).toBeUndefined();
      if (provider === 'google') {
        // Gemini sends no ids: the calls and results pair by name and order.
        expect(callsSent[provider](body)).toEqual(['clock', 'clock']);
        expect(resultsSent[provider](body)).toEqual([
          ['clock', 'time of step 1'],
          ['clock', 'time of step 2'],
        ]);
      } else {
        // The first call keeps its id; the reused one goes by an id derived from its step, and its result follows it.
        expect(callsSent[provider](body)).toEqual(['call_0', 'call_0_t1s2']);
        expect(resultsSent[provider](body)).toEqual([
          ['call_0', 'time of step 1'],
          ['call_0_t1s2', 'time of step 2'],
        ]);
      }
    });
  }
});
