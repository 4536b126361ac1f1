// POST /chat and GET /chat/<id>/stream (docs/api.md, "useChat") driven by the
// AI SDK's own client side: DefaultChatTransport sends the requests and parses
// every chunk with the protocol's schema, readUIMessageStream builds the
// message from them (and fails on any part it cannot apply).
import fs from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DefaultChatTransport, readUIMessageStream, type UIMessage, type UIMessageChunk } from 'ai';
import { startTestApp, type TestApp } from '../helpers/app.ts';
import { PROJECT_ROOT } from '../helpers/process.ts';
import { anyData } from '../helpers/event-data.ts';
import type { AnswerMetadata } from '../../src/chat/ui-message-stream.ts';
import { DEFAULT_MAX_REQUEST_KEYS, DEFAULT_MAX_REQUEST_MESSAGES, DEFAULT_MAX_REQUEST_VALUES, tooManyMessages } from '../../src/core/resent-conversation.ts';
import { MAX_JSON_TEXT_DEPTH, jsonTextPast } from '../../src/core/storable.ts';

let app: TestApp;
let api: string;

beforeAll(async () => {
  app = await startTestApp({
    security: {
      apiTokens: new Map([
        ['token-a', 'tenant-a'],
        ['token-b', 'tenant-b'],
      ]),
    },
  });
  api = app.url.replace(/\/graphql$/, '/chat');
});
afterAll(async () => {
  await app?.close();
});

const auth = (token = 'token-a') => ({ authorization: `Bearer ${token}` });
const transport = (token?: string) => new DefaultChatTransport({ api, headers: auth(token) });
let ids = 0;
const user = (text: string): UIMessage => ({ id: `u${++ids}`, role: 'user', parts: [{ type: 'text', text }] });

type Metadata = AnswerMetadata;

/** Every chunk of a stream, and the message readUIMessageStream makes of them (terminating on any error it meets). */
async function collect(
  stream: ReadableStream<UIMessageChunk>,
  terminateOnError = true,
  /** The message the stream goes on with (an answer continued after an approval). */
  continued?: UIMessage<Metadata>,
): Promise<{ chunks: UIMessageChunk[]; message: UIMessage<Metadata>; errors: unknown[] }> {
  const chunks: UIMessageChunk[] = [];
  const errors: unknown[] = [];
  const [a, b] = stream.tee();
  const reading = (async () => {
    const reader = a.getReader();
    for (let r = await reader.read(); !r.done; r = await reader.read()) chunks.push(r.value);
  })();
  let message: UIMessage<Metadata> | undefined;
  for await (const m of readUIMessageStream<UIMessage<Metadata>>({ message: continued, stream: b, onError: (e) => errors.push(e), terminateOnError }))
    message = m;
  await reading;
  return { chunks, message: message!, errors };
}

async function send(chatId: string, messages: UIMessage[], token?: string) {
  return collect(await transport(token).sendMessages({ chatId, messages, trigger: 'submit-message', messageId: undefined, abortSignal: undefined }));
}

const storedLog = async (sessionId: string) => (await app.services.store.log.page(sessionId, -1, 10_000)).map((e) => ({ ...e, data: anyData(e) }));

describe('POST /chat', () => {
  it('streams a turn with text, two tool calls and an error result as parts readUIMessageStream applies', async () => {
    const { chunks, message, errors } = await send('chat-tools', [user('what time is it\n!call clock {}\n!call sleep {"ms": -5}')]);
    expect(errors).toEqual([]);
    const types = chunks.map((c) => c.type).filter((t, i, all) => !(t === 'text-delta' && all[i - 1] === 'text-delta'));
    expect(types).toEqual([
      'start',
      'message-metadata',
      'start-step',
      'tool-input-available',
      'tool-input-available',
      'tool-output-available',
      'tool-output-error',
      'finish-step',
      'start-step',
      'text-start',
      'text-delta',
      'text-end',
      'finish-step',
      'finish',
    ]);
    const sessionId = message.metadata!.sessionId;
    expect(sessionId).toMatch(/^ses_chat/);
    const log = await storedLog(sessionId);
    const answers = log.filter((e) => e.type === 'model/message');
    const results = log.filter((e) => e.type === 'tool/result');
    expect(results.map((r) => r.data.status)).toEqual(['ok', 'error']);

    // The message: both calls with their input and outcome, then the stored answer's text, whole.
    const tools = message.parts.filter((p) => p.type === 'dynamic-tool');
    expect(tools).toEqual([
      expect.objectContaining({
        toolName: 'clock',
        toolCallId: answers[0].data.toolCalls[0].id,
        state: 'output-available',
        input: {},
        output: results[0].data.content,
      }),
      expect.objectContaining({
        toolName: 'sleep',
        toolCallId: answers[0].data.toolCalls[1].id,
        state: 'output-error',
        input: { ms: -5 },
        errorText: results[1].data.content,
      }),
    ]);
    const text = message.parts
      .filter((p) => p.type === 'text')
      .map((p) => (p as { text: string }).text)
      .join('');
    expect(text).toBe(answers[1].data.text);
    expect(message.id).toBe(`ans_${log.find((e) => e.type === 'inbox/add')!.data.inputId}`);
    expect(message.metadata).toMatchObject({
      chatId: 'chat-tools',
      sessionId,
      turn: 1,
      reason: 'completed',
      usage: { inputTokens: expect.any(Number), outputTokens: expect.any(Number) },
    });
  });

  it('ends a failed turn with an error part carrying the agent’s message', async () => {
    const stream = await transport().sendMessages({
      chatId: 'failing',
      messages: [user('!fail the model is down')],
      trigger: 'submit-message',
      messageId: undefined,
      abortSignal: undefined,
    });
    const { chunks, errors } = await collect(stream, false);
    expect(chunks.slice(-2)).toEqual([
      { type: 'error', errorText: expect.stringContaining('the model is down') },
      expect.objectContaining({ type: 'finish', finishReason: 'error', messageMetadata: expect.objectContaining({ reason: 'failed' }) }),
    ]);
    expect(errors).toHaveLength(1); // readUIMessageStream reports it as the stream's error
  });

  it('speaks the protocol on the wire: its header, SSE data lines and [DONE]', async () => {
    const res = await fetch(api, {
      method: 'POST',
      headers: { 'content-type': 'application/json', ...auth() },
      body: JSON.stringify({ id: 'wire', messages: [user('hello')], trigger: 'submit-message' }),
    });
    expect(res.status).toBe(200);
    expect(res.headers.get('x-vercel-ai-ui-message-stream')).toBe('v1');
    expect(res.headers.get('content-type')).toBe('text/event-stream');
    const body = await res.text();
    const lines = body.split('\n\n').filter(Boolean);
    expect(lines.every((l) => l.startsWith('data: '))).toBe(true);
    expect(lines.at(-1)).toBe('data: [DONE]');
    expect(JSON.parse(lines.at(-2)!.slice(6))).toMatchObject({ type: 'finish', finishReason: 'stop' });
  });

  it('keeps a chat in one session per tenant, and never answers another tenant’s', async () => {
    const first = await send('shared-name', [user('one')]);
    const second = await send('shared-name', [user('one'), user('two')]);
    expect(second.message.metadata!.sessionId).toBe(first.message.metadata!.sessionId);
    expect(second.message.metadata!.turn).toBe(2);
    const other = await send('shared-name', [user('three')], 'token-b');
    expect(other.message.metadata!.sessionId).not.toBe(first.message.metadata!.sessionId);

    // A session id names that session: the caller's own, else not found.
    const own = await send(first.message.metadata!.sessionId, [user('four')]);
    expect(own.message.metadata).toMatchObject({ sessionId: first.message.metadata!.sessionId, turn: 3 });
    const res = await fetch(api, {
      method: 'POST',
      headers: { 'content-type': 'application/json', ...auth('token-b') },
      body: JSON.stringify({ id: first.message.metadata!.sessionId, messages: [user('x')] }),
    });
    expect(res.status).toBe(404);
    expect((await res.json()).errors[0].extensions.code).toBe('SESSION_NOT_FOUND');
    const resumed = await fetch(`${api}/${first.message.metadata!.sessionId}/stream`, { headers: auth('token-b') });
    expect(resumed.status).toBe(404);
    const anonymous = await fetch(api, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ id: 'x', messages: [user('x')] }),
    });
    expect(anonymous.status).toBe(401);
  });

  it('refuses what is not a chat request', async () => {
    const post = (body: string, type = 'application/json') => fetch(api, { method: 'POST', headers: { 'content-type': type, ...auth() }, body });
    expect((await post('{')).status).toBe(400);
    expect((await post(JSON.stringify({ id: 'x', messages: [] }))).status).toBe(400);
    expect((await post(JSON.stringify({ id: 'x', messages: [{ role: 'user', parts: [{ type: 'text', text: 'a' }] }], trigger: 'nope' }))).status).toBe(400);
    expect((await post('{}', 'text/plain')).status).toBe(415);
    expect((await fetch(api, { headers: auth() })).status).toBe(405);
  });

  it('regenerates an answer as edit-and-rerun: a branch that then answers the chat', async () => {
    const chatId = 'regen';
    const u1 = user('first');
    const a1 = await send(chatId, [u1]);
    const root = a1.message.metadata!.sessionId;
    const regenerated = await collect(
      await transport().sendMessages({ chatId, messages: [u1], trigger: 'regenerate-message', messageId: a1.message.id, abortSignal: undefined }),
    );
    expect(regenerated.errors).toEqual([]);
    const branch = regenerated.message.metadata!.sessionId;
    expect(branch).not.toBe(root);
    expect(regenerated.message.metadata).toMatchObject({ chatId, reason: 'completed', turn: 1 });
    const branchRow = await app.services.store.requireSession({ tenant: 'tenant-a' }, branch);
    expect(branchRow.parentId).toBe(root);

    // The next message goes to the branch; the chat's own session keeps its one turn.
    const a2 = await send(chatId, [u1, regenerated.message, user('second')]);
    expect(a2.message.metadata).toMatchObject({ sessionId: branch, turn: 2 });
    expect((await app.services.store.requireSession({ tenant: 'tenant-a' }, root)).turnCount).toBe(1);
  });
});

describe('a long conversation (useChat resends all of it)', () => {
  it('2,000 messages the client made, tool parts and all, are sent again and the next one is answered; past the limit the transport sees the 413', async () => {
    const chatId = 'long-chat';
    const question = user('what time is it\n!call clock {}');
    const first = await send(chatId, [question]);
    expect(first.errors).toEqual([]);
    expect(first.message.parts.some((p) => p.type === 'dynamic-tool')).toBe(true);
    // The page after 1,000 such exchanges: each message as useChat holds it (ids of its own).
    const history = Array.from({ length: 1_000 }, (_, i) => [
      { ...question, id: `long-u${i}` },
      { ...first.message, id: `long-a${i}` },
    ]).flat();
    // The transport's own body, counted before it is parsed: its JSON values are within the bound five times over (the
    // 10,000 messages one request may carry), its distinct keys fifty times (core/resent-conversation.ts).
    const sent: string[] = [];
    const capturing = new DefaultChatTransport({
      api,
      headers: auth(),
      fetch: (url, init) => (sent.push(String(init?.body)), fetch(url, init)),
    });
    const next = await collect(
      await capturing.sendMessages({
        chatId,
        messages: [...history.slice(0, 1_999), user('and now?')],
        trigger: 'submit-message',
        messageId: undefined,
        abortSignal: undefined,
      }),
    );
    expect(sent).toHaveLength(1);
    expect(jsonTextPast(sent[0], DEFAULT_MAX_REQUEST_VALUES / 5, MAX_JSON_TEXT_DEPTH, DEFAULT_MAX_REQUEST_KEYS / 50)).toBeUndefined();
    expect(next.errors).toEqual([]);
    expect(next.message.metadata).toMatchObject({ chatId, turn: 2, reason: 'completed' });
    expect(next.message.parts.flatMap((p) => (p.type === 'text' ? [p.text] : []))).toEqual(['Echo: and now?']);

    const tooLong = Array.from({ length: 6 }, () => history).flat();
    const refused = transport().sendMessages({
      chatId,
      messages: [...tooLong, user('again')],
      trigger: 'submit-message',
      messageId: undefined,
      abortSignal: undefined,
    });
    await expect(refused).rejects.toThrow(tooManyMessages(12_001, DEFAULT_MAX_REQUEST_MESSAGES));
  });
});

describe('GET /chat/<id>/stream', () => {
  it('answers 204 when no answer is in progress', async () => {
    expect((await fetch(`${api}/never-used/stream`, { headers: auth() })).status).toBe(204);
    await send('idle-chat', [user('hi')]);
    expect((await fetch(`${api}/idle-chat/stream`, { headers: auth() })).status).toBe(204);
  });

  it('resumes the answer in progress from its start, then live, to the same message', async () => {
    const chatId = 'resume';
    // The first request is dropped once the answer has started streaming text.
    const abort = new AbortController();
    const stream = await transport().sendMessages({
      chatId,
      messages: [user('one two three four five six seven eight\n!slow 150')],
      trigger: 'submit-message',
      messageId: undefined,
      abortSignal: abort.signal,
    });
    const reader = stream.getReader();
    const before: UIMessageChunk[] = [];
    while (!before.some((c) => c.type === 'text-delta')) before.push((await reader.read()).value!);
    abort.abort();
    await reader.cancel().catch(() => {});

    const resumed = await transport().reconnectToStream({ chatId });
    expect(resumed).not.toBeNull();
    const { chunks, message, errors } = await collect(resumed!);
    expect(errors).toEqual([]);
    expect(chunks[0]).toEqual(before[0]); // the same start: the same message id and metadata
    expect(chunks.filter((c) => c.type === 'text-start')).toHaveLength(1);
    const stored = (await storedLog(message.metadata!.sessionId)).filter((e) => e.type === 'model/message').at(-1)!;
    expect(
      message.parts
        .filter((p) => p.type === 'text')
        .map((p) => (p as { text: string }).text)
        .join(''),
    ).toBe(stored.data.text);
    expect(stored.data.text).toBe('Echo: one two three four five six seven eight');
    expect(chunks.at(-1)).toMatchObject({ type: 'finish', finishReason: 'stop' });
  });
});

describe('tool approval over /chat', () => {
  const ARGS = { key: 'greeting', value: 'hello' };
  type ToolPart = { type: string; toolCallId: string; toolName: string; state: string; approval?: { id: string }; output?: unknown; errorText?: string };
  const toolParts = (m: UIMessage) => m.parts.filter((p) => p.type === 'dynamic-tool') as unknown as ToolPart[];

  /** A chat whose session asks before note_write runs, and its first answer: stopped at the call. */
  async function askedChat(chatId: string) {
    const first = await send(chatId, [user('hi')]);
    await app.services.controller.setSessionToolApproval({ tenant: 'tenant-a' }, first.message.metadata!.sessionId, ['note_write']);
    const question = user(`!call note_write ${JSON.stringify(ARGS)}`);
    const asked = await send(chatId, [user('hi'), first.message, question]);
    return { history: [user('hi'), first.message, question], asked };
  }

  /** What useChat sends after addToolApprovalResponse: the answer with the call's part `approval-responded`. */
  function responded(answer: UIMessage<Metadata>, approved: boolean, reason?: string): UIMessage<Metadata> {
    return {
      ...answer,
      parts: answer.parts.map((p) =>
        (p as unknown as ToolPart).state === 'approval-requested'
          ? ({ ...p, state: 'approval-responded', approval: { id: (p as unknown as ToolPart).approval!.id, approved, reason } } as typeof p)
          : p,
      ),
    };
  }

  async function respond(chatId: string, history: UIMessage[], answer: UIMessage<Metadata>, token?: string) {
    const stream = await transport(token).sendMessages({
      chatId,
      messages: [...history, answer],
      trigger: 'submit-message',
      messageId: answer.id,
      abortSignal: undefined,
    });
    return collect(stream, true, structuredClone(answer));
  }

  it('asks with a tool-approval-request part, shows it again on resume, and approving streams the rest of the turn into the same message', async () => {
    const chatId = 'approve-chat';
    const { history, asked } = await askedChat(chatId);
    expect(asked.errors).toEqual([]);
    expect(asked.chunks.map((c) => c.type)).toEqual([
      'start',
      'message-metadata',
      'start-step',
      'tool-input-available',
      'tool-approval-request',
      'finish-step',
      'finish',
    ]);
    const [call] = toolParts(asked.message);
    expect(call).toMatchObject({ toolName: 'note_write', input: ARGS, state: 'approval-requested', approval: { id: call.toolCallId } });
    expect(asked.chunks.at(-1)).toMatchObject({ type: 'finish', finishReason: 'tool-calls', messageMetadata: { awaitingApproval: call.toolCallId, turn: 2 } });

    // The chat's active stream is the waiting turn: a resume shows the request again, in the same message.
    const resumed = await collect((await transport().reconnectToStream({ chatId }))!);
    expect(resumed.errors).toEqual([]);
    expect(resumed.message.id).toBe(asked.message.id);
    expect(toolParts(resumed.message)).toEqual(toolParts(asked.message));

    // Another tenant cannot decide it.
    const other = await fetch(api, {
      method: 'POST',
      headers: { ...auth('token-b'), 'content-type': 'application/json' },
      body: JSON.stringify({
        id: asked.message.metadata!.sessionId,
        messages: [...history, responded(asked.message, true)],
        trigger: 'submit-message',
        messageId: asked.message.id,
      }),
    });
    expect(other.status).toBe(404);
    expect((await other.json()).errors[0].extensions.code).toBe('SESSION_NOT_FOUND');

    const approved = responded(asked.message, true, 'go ahead');
    const rest = await respond(chatId, history, approved);
    expect(rest.errors).toEqual([]);
    expect(rest.chunks[0]).toMatchObject({ type: 'start', messageId: asked.message.id });
    // It goes on from the decision: the call's input is not sent again.
    expect(rest.chunks.filter((c) => c.type === 'tool-input-available')).toEqual([]);
    expect(rest.chunks.at(-1)).toMatchObject({ type: 'finish', finishReason: 'stop' });
    const log = await storedLog(asked.message.metadata!.sessionId);
    const decision = log.find((e) => e.type === 'tool/approval')!;
    expect(decision.data).toMatchObject({ callId: call.toolCallId, decision: 'approved', reason: 'go ahead', by: expect.stringMatching(/^env-token:/) });
    const result = log.find((e) => e.type === 'tool/result' && e.data.callId === call.toolCallId)!;
    expect(result.data.status).toBe('ok');
    // One message: the call with its output, then the answer's text, whole.
    expect(toolParts(rest.message)).toEqual([expect.objectContaining({ toolCallId: call.toolCallId, state: 'output-available', output: result.data.content })]);
    const answer = log.filter((e) => e.type === 'model/message').at(-1)!;
    expect(
      rest.message.parts
        .filter((p) => p.type === 'text')
        .map((p) => (p as { text: string }).text)
        .join(''),
    ).toBe(answer.data.text);
    expect(rest.message.metadata).toMatchObject({ reason: 'completed', turn: 2 });

    // The same response again: the call no longer awaits approval (a second decision is refused).
    const again = await fetch(api, {
      method: 'POST',
      headers: { ...auth(), 'content-type': 'application/json' },
      body: JSON.stringify({ id: chatId, messages: [...history, approved], trigger: 'submit-message', messageId: asked.message.id }),
    });
    expect(again.status).toBe(400);
    expect((await again.json()).errors[0]).toMatchObject({ extensions: { code: 'BAD_USER_INPUT', rule: 'approval pairing' } });
  });

  /** POSTs a useChat request by hand (what a hostile client may send instead of useChat's own). */
  const post = (body: unknown, token?: string) =>
    fetch(api, { method: 'POST', headers: { ...auth(token), 'content-type': 'application/json' }, body: JSON.stringify(body) });
  const statusOf = async (sessionId: string) => (await app.services.store.forTenant({ tenant: 'tenant-a' }).requireSession(sessionId)).status;

  it('a POST whose responses contradict each other, or whose second response is refused, decides nothing', async () => {
    const chatId = 'contradicting-chat';
    const { history, asked } = await askedChat(chatId);
    const sessionId = asked.message.metadata!.sessionId;
    const [call] = toolParts(asked.message);
    const approved = responded(asked.message, true);
    const part = approved.parts.find((p) => (p as unknown as ToolPart).toolCallId === call.toolCallId)!;
    const withParts = (...parts: unknown[]) => ({ ...approved, parts: [...approved.parts, ...parts] });
    const attempts = [
      // Approved, then denied, in one message.
      withParts({ ...part, approval: { id: call.toolCallId, approved: false } }),
      // Approved, then a call that awaits nothing.
      withParts({ ...part, approval: { id: 'no-such-call', approved: true } }),
      // Approved, then a reason past the limit.
      withParts({ ...part, toolCallId: 'x', approval: { id: 'x', approved: false, reason: 'r'.repeat(20_000) } }),
    ];
    for (const answer of attempts) {
      const r = await post({ id: chatId, messages: [...history, answer], trigger: 'submit-message', messageId: answer.id });
      expect(r.status).toBe(400);
      expect((await r.json()).errors[0].extensions.code).toBe('BAD_USER_INPUT');
      expect((await storedLog(sessionId)).filter((e) => e.type === 'tool/approval')).toEqual([]);
      expect(await statusOf(sessionId)).toBe('WAITING');
    }
    // The call still waits: a well-formed response decides it.
    const rest = await respond(chatId, history, approved);
    expect(rest.errors).toEqual([]);
    expect((await storedLog(sessionId)).filter((e) => e.type === 'tool/approval').map((e) => e.data.decision)).toEqual(['approved']);
  });

  it("a reason of 1 MB, sent by the AI SDK's own transport, is refused at the door (400, naming it) before any chat is read", async () => {
    const chatId = 'long-reason-chat';
    const { history, asked } = await askedChat(chatId);
    const sessionId = asked.message.metadata!.sessionId;
    const long = responded(asked.message, true, 'r'.repeat(1_000_000));
    const at = `messages.${history.length}.parts.${long.parts.findIndex((p) => (p as unknown as ToolPart).state === 'approval-responded')}.approval.reason`;
    // The chat's own, another tenant's, and one that does not exist: the same refusal, nothing read or decided.
    for (const [id, token] of [
      [chatId, undefined],
      [chatId, 'token-b'],
      ['no-such-chat', undefined],
    ] as const) {
      const refused = transport(token).sendMessages({
        chatId: id,
        messages: [...history, long],
        trigger: 'submit-message',
        messageId: long.id,
        abortSignal: undefined,
      });
      const error = await refused.then(
        () => undefined,
        (e: Error) => e,
      );
      const body = JSON.parse(error!.message);
      expect(body.errors[0].extensions.code).toBe('BAD_USER_INPUT');
      expect(body.errors[0].message).toContain(`${at}: `);
      expect(body.errors[0].message).toContain('10000');
    }
    const r = await post({ id: 'no-such-chat', messages: [...history, long], trigger: 'submit-message', messageId: long.id });
    expect(r.status).toBe(400);
    expect((await storedLog(sessionId)).filter((e) => e.type === 'tool/approval')).toEqual([]);
    expect(await statusOf(sessionId)).toBe('WAITING');
    // One at the limit is taken whole.
    const rest = await respond(chatId, history, responded(asked.message, false, 'r'.repeat(10_000)));
    expect(rest.errors).toEqual([]);
    expect((await storedLog(sessionId)).find((e) => e.type === 'tool/approval')!.data).toMatchObject({ decision: 'denied', reason: 'r'.repeat(10_000) });
  });

  it('denying shows the call’s error output, and the model’s answer to it', async () => {
    const chatId = 'deny-chat';
    const { history, asked } = await askedChat(chatId);
    const rest = await respond(chatId, history, responded(asked.message, false, 'not today'));
    expect(rest.errors).toEqual([]);
    const [call] = toolParts(rest.message);
    expect(call).toMatchObject({ state: 'output-error', errorText: `Tool call "note_write" (${call.toolCallId}) was denied: not today. It did not run.` });
    expect(rest.message.parts.some((p) => p.type === 'text')).toBe(true);
    expect(rest.chunks.at(-1)).toMatchObject({ type: 'finish', finishReason: 'stop' });
    // The tool never ran: its only result is the denial.
    const log = await storedLog(rest.message.metadata!.sessionId);
    expect(log.filter((e) => e.type === 'tool/result').map((e) => e.data.status)).toEqual(['error']);
  });
});

describe('docs/api.md', () => {
  it('shows the useChat example the browser test runs, whole', () => {
    const docs = fs.readFileSync(path.join(PROJECT_ROOT, 'docs/api.md'), 'utf8');
    const section = docs.slice(docs.indexOf('## useChat (AI SDK UI)'));
    const block = section.slice(section.indexOf('```tsx\n') + 7, section.indexOf('```', section.indexOf('```tsx\n') + 7));
    expect(block).toBe(fs.readFileSync(path.join(PROJECT_ROOT, 'client/examples/use-chat/main.tsx'), 'utf8'));
  });
});
