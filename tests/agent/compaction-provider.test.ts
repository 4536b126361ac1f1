// A 200,000-event session forked at its end and continued
// with a provider model — a local fake server per wire format (OpenAI-compatible
// chat completions, Anthropic messages, Google generateContent) that rejects
// requests over its context window with that provider's real error — answers:
// automatic compaction ran first, and every request the server received fits.
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp, type TestApp } from '../helpers/app.ts';
import type { NewEvent } from '../../src/core/events.ts';
import { COMPACTION_HEADER } from '../../src/agent/compaction.ts';

const WINDOW = 16_000;
const EVENTS = 200_000;

type Msg = { role: string; text: string };
interface Wire {
  provider: string;
  prefix: string;
  /** The request's messages, system text included, as plain texts. */
  messages(body: any): Msg[];
  /** The provider's own answer to a request over its window (status 400). */
  tooLong(tokens: number): unknown;
  /** A streamed answer (SSE lines). */
  answer(text: string, tokens: number): string[];
}

const textOfParts = (c: any): string => (typeof c === 'string' ? c : (c ?? []).map((p: any) => p.text ?? '').join(''));
const data = (d: unknown, event?: string) => `${event ? `event: ${event}\n` : ''}data: ${typeof d === 'string' ? d : JSON.stringify(d)}\n\n`;

const WIRES: Wire[] = [
  {
    provider: 'openai-compatible',
    prefix: '/compat/v1',
    messages: (b) => b.messages.map((m: any) => ({ role: m.role, text: textOfParts(m.content) })),
    // OpenAI's (and vLLM's) answer to a request over the window.
    tooLong: (tokens) => ({
      error: {
        message: `This model's maximum context length is ${WINDOW} tokens. However, your messages resulted in ${tokens} tokens. Please reduce the length of the messages.`,
        type: 'invalid_request_error',
        param: 'messages',
        code: 'context_length_exceeded',
      },
    }),
    answer: (text, tokens) => {
      const chunk = (delta: unknown, finish: string | null = null, usage?: unknown) =>
        data({
          id: 'c1',
          object: 'chat.completion.chunk',
          created: 1,
          model: 'fake',
          choices: [{ index: 0, delta, finish_reason: finish }],
          ...(usage ? { usage } : {}),
        });
      return [
        chunk({ role: 'assistant', content: '' }),
        chunk({ content: text }),
        chunk({}, 'stop', { prompt_tokens: tokens, completion_tokens: 12, total_tokens: tokens + 12 }),
        data('[DONE]'),
      ];
    },
  },
  {
    provider: 'anthropic',
    prefix: '/anthropic/v1',
    messages: (b) => [
      ...(b.system ? [{ role: 'system', text: textOfParts(b.system) }] : []),
      ...b.messages.map((m: any) => ({ role: m.role, text: textOfParts(m.content) })),
    ],
    tooLong: (tokens) => ({ type: 'error', error: { type: 'invalid_request_error', message: `prompt is too long: ${tokens} tokens > ${WINDOW} maximum` } }),
    answer: (text, tokens) => [
      data(
        {
          type: 'message_start',
          message: {
            id: 'msg_1',
            type: 'message',
            role: 'assistant',
            model: 'fake',
            content: [],
            stop_reason: null,
            usage: { input_tokens: tokens, output_tokens: 1 },
          },
        },
        'message_start',
      ),
      data({ type: 'content_block_start', index: 0, content_block: { type: 'text', text: '' } }, 'content_block_start'),
      data({ type: 'content_block_delta', index: 0, delta: { type: 'text_delta', text } }, 'content_block_delta'),
      data({ type: 'content_block_stop', index: 0 }, 'content_block_stop'),
      data({ type: 'message_delta', delta: { stop_reason: 'end_turn', stop_sequence: null }, usage: { output_tokens: 12 } }, 'message_delta'),
      data({ type: 'message_stop' }, 'message_stop'),
    ],
  },
  {
    provider: 'google',
    prefix: '/google/v1beta',
    messages: (b) => [
      ...(b.systemInstruction ? [{ role: 'system', text: textOfParts(b.systemInstruction.parts) }] : []),
      ...b.contents.map((m: any) => ({ role: m.role === 'model' ? 'assistant' : m.role, text: textOfParts(m.parts) })),
    ],
    tooLong: (tokens) => ({
      error: { code: 400, message: `The input token count (${tokens}) exceeds the maximum number of tokens allowed (${WINDOW}).`, status: 'INVALID_ARGUMENT' },
    }),
    answer: (text, tokens) => [
      data({
        candidates: [{ content: { role: 'model', parts: [{ text }] }, finishReason: 'STOP' }],
        usageMetadata: { promptTokenCount: tokens, candidatesTokenCount: 12, totalTokenCount: tokens + 12 },
      }),
    ],
  },
];

let app: TestApp;
let fake: http.Server;
let base: string;
const received = new Map<string, Array<{ tokens: number; messages: Msg[]; rejected: boolean }>>(WIRES.map((w) => [w.provider, []]));

/** The server's own count: four characters a token, four per message (what its tokenizer would roughly say). */
const tokensOf = (messages: Msg[]) => messages.reduce((n, m) => n + 4 + Math.ceil(m.text.length / 4), 0);

beforeAll(async () => {
  fake = http.createServer(async (req, res) => {
    let raw = '';
    for await (const c of req) raw += c;
    const wire = WIRES.find((w) => req.url!.startsWith(w.prefix));
    if (!wire) return void res.writeHead(404).end();
    const messages = wire.messages(JSON.parse(raw));
    const tokens = tokensOf(messages);
    const rejected = tokens > WINDOW;
    const log = received.get(wire.provider)!;
    log.push({ tokens, messages, rejected });
    if (rejected) return void res.writeHead(400, { 'content-type': 'application/json' }).end(JSON.stringify(wire.tooLong(tokens)));
    const lastText = messages.at(-1)!.text;
    const text = lastText.startsWith(COMPACTION_HEADER) ? `summary ${log.length}: long history of questions and answers` : `answer to: ${lastText}`;
    res.writeHead(200, { 'content-type': 'text/event-stream' });
    for (const line of wire.answer(text, tokens)) res.write(line);
    res.end();
  });
  await new Promise<void>((r) => fake.listen(0, '127.0.0.1', r));
  base = `http://127.0.0.1:${(fake.address() as AddressInfo).port}`;
  app = await startTestApp({
    providers: {
      openaiCompatible: { baseUrl: `${base}/compat/v1`, apiKey: 'sk-compat' },
      anthropic: { baseUrl: `${base}/anthropic/v1`, apiKey: 'sk-anthropic' },
      google: { baseUrl: `${base}/google/v1beta`, apiKey: 'sk-google' },
    },
  });
}, 60_000);

afterAll(async () => {
  await app?.close();
  await new Promise((r) => fake?.close(r));
});

/** A long session, built fast: whole turns appended in batches through the store. */
async function longSession(events: number): Promise<string> {
  const { id } = await app.services.store.createSession({ tenant: 'local' }, { title: 'long' });
  let seq = 1; // the title
  let turn = 0;
  while (seq < events) {
    const batch: NewEvent[] = [];
    for (let i = 0; i < 1000 && seq + batch.length < events - 6; i++) {
      turn++;
      const inputId = `in_${turn}`;
      batch.push(
        { type: 'inbox/add', data: { inputId, text: `question ${turn} about the garden` } },
        { type: 'inbox/remove', data: { inputId, reason: 'taken' } },
        { type: 'turn/start', data: { turn, inputId } },
        { type: 'step/start', data: { turn, step: 1 } },
        { type: 'model/message', data: { turn, step: 1, text: `answer ${turn}: water the roses`, toolCalls: [] } },
        { type: 'step/end', data: { turn, step: 1, reason: 'completed' } },
        { type: 'turn/end', data: { turn, reason: 'completed' } },
      );
    }
    if (batch.length === 0) {
      // Pad to the exact length with titles.
      for (; seq + batch.length < events;) batch.push({ type: 'session/title', data: { title: `long ${seq + batch.length}` } });
    }
    await app.services.store.append(id, batch);
    seq += batch.length;
  }
  return id;
}

let parent: string;

describe('a 200,000-event session continued by a provider model', () => {
  beforeAll(async () => {
    parent = await longSession(EVENTS);
    const { session } = await app.ok(`query($id: ID!) { session(id: $id) { eventCount } }`, { id: parent });
    expect(session.eventCount).toBe(EVENTS);
  }, 120_000);

  it("the fake OpenAI-compatible server refuses a request over its window, in OpenAI's words", async () => {
    const refused = await fetch(`${base}/compat/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'fake', messages: [{ role: 'user', content: 'x'.repeat(WINDOW * 5) }] }),
    });
    expect(refused.status).toBe(400);
    expect((await refused.json()).error.code).toBe('context_length_exceeded');
    received.get('openai-compatible')!.length = 0;
  });

  for (const wire of WIRES) {
    it(`${wire.provider}: compacts automatically first; every request the provider received fits its window`, async () => {
      const fork = await app.ok(`mutation($i: ForkSessionInput!) { forkSession(input: $i) { cutSeq session { id firstLiveSeq } } }`, {
        i: {
          sessionId: parent,
          atSeq: EVENTS - 1,
          model: { provider: wire.provider, model: 'fake-16k', contextTokens: WINDOW },
          message: 'what should I do next?',
        },
      });
      const child = fork.forkSession.session.id as string;
      await app.services.host.idle();

      const own = await app.services.store.log.range(child, fork.forkSession.session.firstLiveSeq - 1, EVENTS + 1000);
      const types = own.map((e) => e.type);
      // The compaction came first (before the turn started), then the turn answered.
      const start = types.indexOf('plugin/compaction/start');
      expect(start).toBeGreaterThanOrEqual(0);
      expect(types.slice(start, start + 3)).toEqual(['plugin/compaction/start', 'surface/replace', 'plugin/compaction/end']);
      expect(types.indexOf('turn/start')).toBeGreaterThan(start + 2);
      const lastTurnEnd = (await app.services.store.log.lastOfType(parent, 'turn/end'))!.seq;
      expect(own.find((e) => e.type === 'plugin/compaction/end')?.data).toMatchObject({ fromSeq: 0, toSeq: lastTurnEnd, reason: 'automatic' });
      expect(own.find((e) => e.type === 'plugin/agent/error')).toBeUndefined();
      expect(own.find((e) => e.type === 'model/message')?.data).toMatchObject({ text: 'answer to: what should I do next?' });
      expect(own.at(-1)).toMatchObject({ type: 'turn/end', data: { reason: 'completed' } });

      // Every request fitted: the summary's parts, then the turn's own request.
      const got = received.get(wire.provider)!;
      expect(got.length).toBeGreaterThan(2);
      expect(got.filter((r) => r.rejected).map((r) => r.tokens)).toEqual([]);
      const turnRequest = got.at(-1)!;
      expect(turnRequest.messages.map((m) => m.role)).toEqual(['system', 'user']);
      expect(turnRequest.messages[0].text).toMatch(new RegExp(`^Summary of earlier conversation \\(events 0\\.\\.${lastTurnEnd}\\):\\nsummary \\d+`));
    }, 300_000);
  }
});
