// Issue 30, done when: a 200,000-event session forked at its end and continued
// with a provider model — a local fake OpenAI-compatible server that rejects
// requests over its context window with the provider's real error — answers:
// automatic compaction ran first, and every request the server received fits.
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp, type TestApp } from '../helpers/app.ts';
import type { NewEvent } from '../../src/core/events.ts';
import { COMPACTION_HEADER } from '../../src/agent/compaction.ts';

const WINDOW = 16_000;
const EVENTS = 200_000;

let app: TestApp;
let fake: http.Server;
let base: string;
const received: Array<{ tokens: number; messages: any[]; rejected: boolean }> = [];

/** The server's own count: four characters a token, four per message (what its tokenizer would roughly say). */
const tokensOf = (messages: any[]) =>
  messages.reduce((n, m) => n + 4 + Math.ceil((typeof m.content === 'string' ? m.content : JSON.stringify(m.content ?? '')).length / 4), 0);

const chunk = (delta: unknown, finish: string | null = null, usage?: unknown) =>
  `data: ${JSON.stringify({ id: 'c1', object: 'chat.completion.chunk', created: 1, model: 'fake', choices: [{ index: 0, delta, finish_reason: finish }], ...(usage ? { usage } : {}) })}\n\n`;

beforeAll(async () => {
  fake = http.createServer(async (req, res) => {
    let raw = '';
    for await (const c of req) raw += c;
    const body = JSON.parse(raw);
    const tokens = tokensOf(body.messages);
    const rejected = tokens > WINDOW;
    received.push({ tokens, messages: body.messages, rejected });
    if (rejected) {
      // OpenAI's answer to a request over the window, as vLLM and OpenAI send it.
      res.writeHead(400, { 'content-type': 'application/json' });
      return void res.end(JSON.stringify({
        error: {
          message: `This model's maximum context length is ${WINDOW} tokens. However, your messages resulted in ${tokens} tokens. Please reduce the length of the messages.`,
          type: 'invalid_request_error',
          param: 'messages',
          code: 'context_length_exceeded',
        },
      }));
    }
    const last = body.messages.at(-1);
    const lastText = typeof last.content === 'string' ? last.content : last.content.map((p: any) => p.text).join('');
    const text = lastText.startsWith(COMPACTION_HEADER) ? `summary ${received.length}: long history of questions and answers` : `answer to: ${lastText}`;
    res.writeHead(200, { 'content-type': 'text/event-stream' });
    res.write(chunk({ role: 'assistant', content: '' }));
    res.write(chunk({ content: text }));
    res.write(chunk({}, 'stop', { prompt_tokens: tokens, completion_tokens: 12, total_tokens: tokens + 12 }));
    res.end('data: [DONE]\n\n');
  });
  await new Promise<void>((r) => fake.listen(0, '127.0.0.1', r));
  base = `http://127.0.0.1:${(fake.address() as AddressInfo).port}`;
  app = await startTestApp({ providers: { openaiCompatible: { baseUrl: `${base}/v1`, apiKey: 'sk-compat' } } });
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
      for (; seq + batch.length < events; ) batch.push({ type: 'session/title', data: { title: `long ${seq + batch.length}` } });
    }
    await app.services.store.append(id, batch);
    seq += batch.length;
  }
  return id;
}

describe('a 200,000-event session continued by a provider model', () => {
  it('compacts automatically first; every request the provider received fits its window', async () => {
    const parent = await longSession(EVENTS);
    const { session } = await app.ok(`query($id: ID!) { session(id: $id) { eventCount } }`, { id: parent });
    expect(session.eventCount).toBe(EVENTS);

    // The fake server refuses what does not fit, in OpenAI's words.
    const refused = await fetch(`${base}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'fake', messages: [{ role: 'user', content: 'x'.repeat(WINDOW * 5) }] }),
    });
    expect(refused.status).toBe(400);
    expect((await refused.json()).error.code).toBe('context_length_exceeded');
    received.length = 0;

    const fork = await app.ok(
      `mutation($i: ForkSessionInput!) { forkSession(input: $i) { cutSeq session { id firstLiveSeq } } }`,
      { i: { sessionId: parent, atSeq: EVENTS - 1, model: { provider: 'openai-compatible', model: 'fake-16k', contextTokens: WINDOW }, message: 'what should I do next?' } },
    );
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
    const answer = own.find((e) => e.type === 'model/message');
    expect(answer?.data).toMatchObject({ text: 'answer to: what should I do next?' });
    expect(own.at(-1)).toMatchObject({ type: 'turn/end', data: { reason: 'completed' } });
    expect(own.some((e) => e.type === 'plugin/agent/error')).toBe(false);

    // Every request fitted: the summary's parts, then the turn's own request.
    expect(received.length).toBeGreaterThan(2);
    expect(received.filter((r) => r.rejected)).toEqual([]);
    for (const r of received) expect(r.tokens).toBeLessThanOrEqual(WINDOW);
    const turnRequest = received.at(-1)!;
    expect(turnRequest.messages.map((m) => m.role)).toEqual(['system', 'user']);
    expect(turnRequest.messages[0].content).toMatch(new RegExp(`^Summary of earlier conversation \\(events 0\\.\\.${lastTurnEnd}\\):\\nsummary \\d+`));
  }, 300_000);
});
