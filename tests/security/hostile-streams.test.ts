// The two streams users' own clients read, /chat (the AI SDK's UI message
// stream) and /agui (AG-UI), against hostile model output and hostile
// requests, read with the clients' own parsers (the `ai` package's
// readUIMessageStream, @ag-ui/client's HttpAgent): one event is held to
// FORKLINE_MAX_RESPONSE_BYTES as a GraphQL subscription event is
// (subscription-payloads.test.ts) and one over it ends the stream saying so;
// a model's huge delta reaches the client whole, in pieces; text built to
// break the framing (control characters, `data: [DONE]`, line separators)
// arrives as the model wrote it; a call streamed without end fails its turn
// at the provider's limit, and both streams say so; a path the door cannot
// decode is a 400.
import type http from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { readUIMessageStream, type UIMessage, type UIMessageChunk } from 'ai';
import { HttpAgent } from '@ag-ui/client';
import { startTestApp, type TestApp } from '../helpers/app.ts';
import { chatChunk, sse } from '../helpers/provider-sse.ts';
import { startFakeProvider, type FakeProvider, type ProviderHandler } from '../helpers/fake-provider.ts';

const MAX = 64 * 1024;
const MODEL_MAX_RESPONSE_BYTES = 256 * 1024;

type Handler = ProviderHandler;
let fake: FakeProvider;
let handlers: Handler[];
let app: TestApp;
let chatUrl: string;
let aguiUrl: string;

beforeAll(async () => {
  fake = await startFakeProvider();
  handlers = fake.handlers;
  app = await startTestApp({
    security: { maxResponseBytes: MAX },
    providers: {
      openai: { baseUrl: `${fake.origin}/openai/v1`, apiKey: 'sk-openai' },
      limits: { maxResponseBytes: MODEL_MAX_RESPONSE_BYTES, idleTimeoutMs: 10_000 },
    },
    modelRetries: { maxRetries: 0, initialDelayMs: 20, maxDelayMs: 50 },
  });
  chatUrl = app.url.replace(/\/graphql$/, '/chat');
  aguiUrl = app.url.replace(/\/graphql$/, '/agui');
});
afterAll(async () => {
  await app?.close();
  await fake?.close();
});

const openaiSession = async () =>
  (await app.ok(`mutation { createSession(input: { title: "hostile model", model: { provider: "openai", model: "fake-model" } }) { id } }`)).createSession
    .id as string;

let ids = 0;
/** POST /chat with one user message: the stream's data lines as sent (their JSON), whether it ended with [DONE]. */
async function chat(chatId: string, text: string) {
  const res = await fetch(chatUrl, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ id: chatId, messages: [{ id: `u${++ids}`, role: 'user', parts: [{ type: 'text', text }] }], trigger: 'submit-message' }),
  });
  expect(res.status).toBe(200);
  const data = (await res.text())
    .split('\n\n')
    .filter(Boolean)
    .map((frame) => frame.replace(/^data: /, ''));
  const done = data.at(-1) === '[DONE]';
  const lines = done ? data.slice(0, -1) : data;
  const chunks = lines.map((l) => JSON.parse(l) as UIMessageChunk & Record<string, any>);
  // The message the AI SDK's own reader makes of them (an error part, or a chunk it cannot apply, is in `errors`).
  const errors: unknown[] = [];
  let message: UIMessage | undefined;
  const stream = new ReadableStream<UIMessageChunk>({
    start(c) {
      for (const chunk of chunks) c.enqueue(chunk);
      c.close();
    },
  });
  for await (const m of readUIMessageStream({ stream, onError: (e) => errors.push(e), terminateOnError: false })) message = m;
  return { lines, chunks, done, message: message!, errors };
}

/** POST /agui with one user message, raw: each SSE event's JSON as sent. */
async function aguiRaw(threadId: string, text: string) {
  const res = await fetch(aguiUrl, {
    method: 'POST',
    headers: { 'content-type': 'application/json', accept: 'text/event-stream' },
    body: JSON.stringify({
      threadId,
      runId: `run-${++ids}`,
      state: {},
      tools: [],
      context: [],
      forwardedProps: {},
      messages: [{ id: `m${ids}`, role: 'user', content: text }],
    }),
  });
  const lines = (await res.text())
    .split('\n\n')
    .filter(Boolean)
    .map((frame) => frame.replace(/^data: /, ''));
  return { lines, events: lines.map((l) => JSON.parse(l) as Record<string, any>) };
}

/** An AG-UI run through @ag-ui/client, which applies the events to its messages itself. */
async function aguiClient(threadId: string, text: string) {
  const agent = new HttpAgent({ url: aguiUrl, threadId });
  agent.addMessage({ id: `m${++ids}`, role: 'user', content: text });
  const events: Array<Record<string, any>> = [];
  let error: unknown;
  await agent.runAgent({ runId: `run-${ids}` }, { onEvent: ({ event }) => void events.push(event as Record<string, any>) }).catch((e) => (error = e));
  const answer = agent.messages.filter((m) => m.role === 'assistant').at(-1);
  return { events, error, text: typeof answer?.content === 'string' ? answer.content : undefined };
}

const bytes = (line: string) => Buffer.byteLength(line);

/** A provider answer: the text, or one call of note_write with its arguments, then the finish. */
const answerWith =
  (answer: { text?: string; arguments?: string }): Handler =>
  async (res) => {
    res.writeHead(200, { 'content-type': 'text/event-stream' });
    if (answer.text !== undefined) res.write(sse(chatChunk({ role: 'assistant', content: answer.text })));
    if (answer.arguments !== undefined)
      res.write(
        sse(
          chatChunk({
            role: 'assistant',
            tool_calls: [{ index: 0, id: 'call_1', type: 'function', function: { name: 'note_write', arguments: answer.arguments } }],
          }),
        ),
      );
    res.write(
      sse(chatChunk({}, answer.arguments !== undefined ? 'tool_calls' : 'stop', { usage: { prompt_tokens: 1, completion_tokens: 1, total_tokens: 2 } })),
    );
    res.end(sse('[DONE]'));
  };

describe('one event over FORKLINE_MAX_RESPONSE_BYTES', () => {
  // The model calls note_write with arguments of 100 KB (then answers): the call's input is one event.
  const bigCall = JSON.stringify({ key: 'k', value: 'v'.repeat(100_000) });

  it('ends a /chat answer with an error part naming the limit; nothing over it is sent; the session holds the call', async () => {
    const id = await openaiSession();
    handlers.push(answerWith({ arguments: bigCall }), answerWith({ text: 'noted' }));
    const { lines, chunks, done, errors } = await chat(id, 'note it');
    expect(Math.max(...lines.map(bytes))).toBeLessThanOrEqual(MAX);
    const limit = /over the limit of 65536 \(FORKLINE_MAX_RESPONSE_BYTES\)/;
    expect(chunks.find((c) => c.type === 'error')?.errorText).toMatch(limit);
    expect(errors.map(String)).toEqual([expect.stringMatching(limit)]);
    expect(chunks.at(-1)).toMatchObject({ type: 'finish', finishReason: 'error' });
    expect(done).toBe(true);
    await app.services.host.idle();
    const calls = (await app.services.store.log.page(id, -1, 100)).flatMap((e) =>
      e.type === 'model/message' ? (e.data as { toolCalls: Array<{ arguments: string }> }).toolCalls : [],
    );
    expect(calls.map((c) => c.arguments)).toEqual([bigCall]);
  });

  it('ends an AG-UI run with RUN_ERROR RESPONSE_TOO_LARGE; nothing over it is sent', async () => {
    const id = await openaiSession();
    handlers.push(answerWith({ arguments: bigCall }), answerWith({ text: 'noted' }));
    const { lines, events } = await aguiRaw(id, 'note it');
    expect(Math.max(...lines.map(bytes))).toBeLessThanOrEqual(MAX);
    expect(events.at(-1)).toMatchObject({ type: 'RUN_ERROR', code: 'RESPONSE_TOO_LARGE' });
    expect(events.at(-1)!.message).toMatch(/over the limit of 65536 \(FORKLINE_MAX_RESPONSE_BYTES\)/);
    await app.services.host.idle();
  });
});

describe("a model's huge delta", () => {
  // One delta of 150,000 characters (over the limit as one event).
  const word = 'w'.repeat(150_000);

  it('reaches a /chat client whole, in text-delta parts each under the limit', async () => {
    const id = await openaiSession();
    handlers.push(answerWith({ text: word }));
    const { lines, chunks, message, errors } = await chat(id, 'go');
    expect(errors).toEqual([]);
    expect(Math.max(...lines.map(bytes))).toBeLessThanOrEqual(MAX);
    expect(chunks.filter((c) => c.type === 'text-delta').length).toBeGreaterThan(1);
    expect(message.parts.filter((p) => p.type === 'text').map((p) => (p as { text: string }).text)).toEqual([word]);
    expect(chunks.at(-1)).toMatchObject({ type: 'finish', finishReason: 'stop' });
  });

  it('reaches an AG-UI client whole, in TEXT_MESSAGE_CONTENT events each under the limit', async () => {
    const id = await openaiSession();
    handlers.push(answerWith({ text: word }));
    const raw = await aguiRaw(id, 'go');
    expect(Math.max(...raw.lines.map(bytes))).toBeLessThanOrEqual(MAX);
    expect(raw.events.at(-1)).toMatchObject({ type: 'RUN_FINISHED' });
    handlers.push(answerWith({ text: word }));
    const run = await aguiClient(await openaiSession(), 'go');
    expect(run.error).toBeUndefined();
    expect(run.text).toBe(word);
  });
});

describe('model text made to break the framing', () => {
  const deltas = ['Line one\r\n\r\n', 'data: [DONE]\n\n', 'event: error\rdata: {"type":"finish"}\n', '\u2028\u2029 tab\t bell\u0007 esc\u001b[31m', ' 😀 end'];
  const stream = (res: http.ServerResponse) => {
    res.writeHead(200, { 'content-type': 'text/event-stream' });
    res.write(sse(chatChunk({ role: 'assistant', content: '' })));
    for (const content of deltas) res.write(sse(chatChunk({ content })));
    res.write(sse(chatChunk({}, 'stop', { usage: { prompt_tokens: 1, completion_tokens: 1, total_tokens: 2 } })));
    res.end(sse('[DONE]'));
    return Promise.resolve();
  };

  it('reaches a /chat client and an AG-UI client exactly as the model wrote it, the answer ending once', async () => {
    const id = await openaiSession();
    handlers.push(stream);
    const answer = await chat(id, 'go');
    expect(answer.errors).toEqual([]);
    expect(answer.message.parts.filter((p) => p.type === 'text').map((p) => (p as { text: string }).text)).toEqual([deltas.join('')]);
    expect(answer.chunks.filter((c) => c.type === 'finish')).toEqual([expect.objectContaining({ finishReason: 'stop' })]);
    expect(answer.done).toBe(true);

    handlers.push(stream);
    const run = await aguiClient(id, 'again');
    expect(run.error).toBeUndefined();
    expect(run.text).toBe(deltas.join(''));
    expect(run.events.filter((e) => e.type === 'RUN_FINISHED')).toHaveLength(1);
  });
});

describe('a tool call the model streams without end', () => {
  const endless: Handler = async (res, sent) => {
    res.writeHead(200, { 'content-type': 'text/event-stream' });
    res.write(
      sse(
        chatChunk({
          role: 'assistant',
          tool_calls: [{ index: 0, id: 'call_1', type: 'function', function: { name: 'note_write', arguments: '{"key":"k","value":"' } }],
        }),
      ),
    );
    while (!sent.closed) {
      const more = sse(chatChunk({ tool_calls: [{ index: 0, function: { arguments: 'z'.repeat(1000) } }] }));
      if (!res.write(more))
        await new Promise<void>((resolve) => {
          const done = () => (res.off('drain', done), res.off('close', done), resolve());
          res.on('drain', done).on('close', done);
        });
    }
  };
  const limit = new RegExp(`passed ${MODEL_MAX_RESPONSE_BYTES} bytes \\(FORKLINE_MODEL_MAX_RESPONSE_BYTES\\)`);

  it('fails its turn at the provider limit: the /chat answer ends with an error part saying so', async () => {
    const id = await openaiSession();
    handlers.push(endless);
    const { chunks, done, errors } = await chat(id, 'go');
    expect(chunks.find((c) => c.type === 'error')?.errorText).toMatch(limit);
    expect(errors.map(String)).toEqual([expect.stringMatching(limit)]);
    expect(chunks.some((c) => c.type === 'tool-input-available')).toBe(false);
    expect(done).toBe(true);
  });

  it('fails its turn at the provider limit: the AG-UI run ends with RUN_ERROR saying so', async () => {
    const id = await openaiSession();
    handlers.push(endless);
    const run = await aguiClient(id, 'go');
    const last = run.events.at(-1)!;
    expect(last).toMatchObject({ type: 'RUN_ERROR', code: 'FAILED' });
    expect(last.message).toMatch(limit);
    expect(run.events.some((e) => e.type === 'TOOL_CALL_START')).toBe(false);
  });
});

describe('GET /chat/<id>/stream with a path it cannot decode', () => {
  it.each(['%E0%A4%A', '%ZZ', '%C0%AF'])('%s: 400 BAD_USER_INPUT, not a 500', async (segment) => {
    const res = await fetch(`${chatUrl}/${segment}/stream`);
    expect(res.status).toBe(400);
    expect((await res.json()).errors[0].extensions.code).toBe('BAD_USER_INPUT');
  });
});

describe("another tenant's waiting turn, named by its ids", () => {
  const A = { authorization: 'Bearer hostile-streams-token-a' };
  const B = { authorization: 'Bearer hostile-streams-token-b' };
  let secured: TestApp;
  beforeAll(async () => {
    secured = await startTestApp({
      security: {
        apiTokens: new Map([
          ['hostile-streams-token-a', 'tenant-a'],
          ['hostile-streams-token-b', 'tenant-b'],
        ]),
      },
    });
  });
  afterAll(() => secured?.close());

  it('cannot be resumed, decided or followed from B over /agui or /chat: not found, and nothing is written', async () => {
    const scope = { tenant: 'tenant-a' };
    const id = (await secured.services.controller.createSession(scope, { title: 'waits' })).id;
    await secured.services.controller.setSessionToolApproval(scope, id, ['note_write']);
    await secured.services.controller.sendMessage(scope, id, '!call note_write {"key":"k","value":"v"}');
    const status = async () => (await secured.gql(`query($id: ID!) { session(id: $id) { status pendingApprovals { callId } } }`, { id }, A)).data.session;
    await expect.poll(async () => (await status()).status, { timeout: 15_000 }).toBe('WAITING');
    const [{ callId }] = (await status()).pendingApprovals as Array<{ callId: string }>;
    const countBefore = (await secured.services.store.requireSession(scope, id)).eventCount;
    const base = secured.url.replace(/\/graphql$/, '');

    // AG-UI: a resume on A's thread, and one on B's own thread naming A's call.
    const resume = async (threadId: string) => {
      const res = await fetch(`${base}/agui`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', accept: 'text/event-stream', ...B },
        body: JSON.stringify({
          threadId,
          runId: `resume-${threadId}`,
          state: {},
          tools: [],
          context: [],
          forwardedProps: {},
          messages: [],
          resume: [{ interruptId: callId, status: 'resolved', payload: { approved: true } }],
        }),
      });
      const events = (await res.text())
        .split('\n\n')
        .filter(Boolean)
        .map((f) => JSON.parse(f.replace(/^data: /, '')) as Record<string, any>);
      return events.at(-1);
    };
    expect(await resume(id)).toMatchObject({ type: 'RUN_ERROR', code: 'SESSION_NOT_FOUND' });
    const own = (await secured.services.controller.createSession({ tenant: 'tenant-b' }, { title: 'b' })).id;
    expect(await resume(own)).toMatchObject({ type: 'RUN_ERROR', code: 'BAD_USER_INPUT' });

    // /chat: the approval response useChat would send for A's call, and a resume of A's answer.
    const decided = await fetch(`${base}/chat`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', ...B },
      body: JSON.stringify({
        id,
        trigger: 'submit-message',
        messages: [
          {
            id: 'ans_x',
            role: 'assistant',
            parts: [{ type: 'dynamic-tool', toolCallId: callId, state: 'approval-responded', approval: { id: callId, approved: true } }],
          },
        ],
      }),
    });
    expect(decided.status).toBe(404);
    expect((await decided.json()).errors[0].extensions.code).toBe('SESSION_NOT_FOUND');
    const followed = await fetch(`${base}/chat/${id}/stream`, { headers: B });
    expect(followed.status).toBe(404);
    await followed.body?.cancel();

    expect((await status()).status).toBe('WAITING');
    expect((await secured.services.store.requireSession(scope, id)).eventCount).toBe(countBefore);
  });
});
