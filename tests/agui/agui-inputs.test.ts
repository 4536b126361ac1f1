// POST /agui under the input rules of every door: the message and
// id limits GraphQL applies, refused with a 400 before anything is stored, and
// a retried run (same runId) that answers from the log instead of hanging or
// recording itself twice. Driven by @ag-ui/client's HttpAgent and raw HTTP.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { HttpAgent } from '@ag-ui/client';
import { EventType, type BaseEvent } from '@ag-ui/core';
import { EventSchemas } from '@ag-ui/core/schemas';
import { startTestApp, type TestApp } from '../helpers/app.ts';
import { anyData } from '../helpers/event-data.ts';
import { DEFAULT_MAX_REQUEST_KEYS, DEFAULT_MAX_REQUEST_MESSAGES, DEFAULT_MAX_REQUEST_VALUES, tooManyMessages } from '../../src/core/resent-conversation.ts';
import { MAX_JSON_TEXT_DEPTH, jsonTextPast } from '../../src/core/storable.ts';

let app: TestApp;
let url: string;
beforeAll(async () => {
  app = await startTestApp();
  url = app.url.replace(/\/graphql$/, '/agui');
});
afterAll(async () => {
  await app?.close();
});

const counts = async () =>
  (
    await app.db.pool.query<{ sessions: number; events: number }>(
      'SELECT (SELECT count(*)::int FROM "Session") AS sessions, (SELECT count(*)::int FROM "Event") AS events',
    )
  ).rows[0];
const runInput = (over: Record<string, unknown> = {}) => ({
  threadId: 'inputs-thread',
  runId: 'inputs-run',
  state: {},
  tools: [],
  context: [],
  forwardedProps: {},
  messages: [{ id: 'm1', role: 'user', content: 'hello' }],
  ...over,
});
const SSE = { 'content-type': 'application/json', accept: 'text/event-stream' };
const post = (body: unknown) => fetch(url, { method: 'POST', headers: SSE, body: JSON.stringify(body) });

/** A run through HttpAgent: its events (each schema-checked) and the error it ended with, if any. */
async function agentRun(threadId: string, runId: string, text: string, messageId = 'u1') {
  const agent = new HttpAgent({ url, threadId });
  agent.addMessage({ id: messageId, role: 'user', content: text });
  const events: BaseEvent[] = [];
  let error: unknown;
  await agent.runAgent({ runId }, { onEvent: ({ event }) => void events.push(event) }).catch((err) => (error = err));
  for (const e of events) expect(() => EventSchemas.parse(e)).not.toThrow();
  return { events, error, agent };
}

/** Reads a raw SSE answer to its end: the event types in order. */
async function rawRun(body: unknown): Promise<string[]> {
  const res = await post(body);
  expect(res.status).toBe(200);
  const text = await res.text();
  return [...text.matchAll(/^data: (.*)$/gm)].map((m) => JSON.parse(m[1]).type);
}

describe('AG-UI input rules (the same as GraphQL)', () => {
  it('refuses a message over 200,000 characters with a 400, storing nothing, as sendMessage does', async () => {
    const before = await counts();
    const res = await post(runInput({ messages: [{ id: 'm1', role: 'user', content: 'x'.repeat(1_000_000) }] }));
    expect(res.status).toBe(400);
    const body = await res.json();
    expect(body.errors[0]).toMatchObject({ extensions: { code: 'BAD_USER_INPUT' }, message: expect.stringMatching(/last user message: .*200000/) });
    // GraphQL says the same of the same text.
    const session = (await app.ok('mutation { createSession(input: {}) { id } }')).createSession.id;
    const viaGraphQL = await app.gql('mutation($id: ID!, $t: String!) { sendMessage(input: { sessionId: $id, text: $t }) { inputId } }', {
      id: session,
      t: 'x'.repeat(1_000_000),
    });
    expect(viaGraphQL.errors![0].message).toMatch(/200000/);
    const after = await counts();
    expect(after.sessions).toBe(before.sessions + 1); // only GraphQL's createSession
    expect(after.events).toBe(before.events);

    // HttpAgent sees the 400 as the run's error, with no events.
    const agent = await agentRun('inputs-thread', 'big-run', 'x'.repeat(1_000_000));
    expect(agent.events).toEqual([]);
    expect(String(agent.error)).toMatch(/400/);
  });

  it('refuses ids that are not 1-200 storable characters with a 400, never a 500', async () => {
    const random = Array.from({ length: 5000 }, () => String.fromCodePoint(0x20 + Math.floor(Math.random() * 0xd000))).join('');
    const cases: Array<[string, Record<string, unknown>]> = [
      ['runId', { runId: random }],
      ['runId', { runId: 'run\u0000nul' }],
      ['runId', { runId: '' }],
      ['threadId', { threadId: 'x'.repeat(201) }],
      ['threadId', { threadId: 'thread\u0000' }],
      ['threadId', { threadId: 'lone \ud800 surrogate' }],
      ['parentRunId', { parentRunId: 'p'.repeat(5000) }],
      ['messages.0.id', { messages: [{ id: 'm\u0000', role: 'user', content: 'hello' }] }],
      [
        'messages.1.id',
        {
          messages: [
            { id: 'ok', role: 'user', content: 'a' },
            { id: 'i'.repeat(300), role: 'user', content: 'b' },
          ],
        },
      ],
      ['the last user message', { messages: [{ id: 'm1', role: 'user', content: 'nul \u0000 inside' }] }],
    ];
    const before = await counts();
    for (const [field, over] of cases) {
      const res = await post(runInput(over));
      expect(res.status, field).toBe(400);
      const body = await res.json();
      expect(body.errors[0].extensions.code).toBe('BAD_USER_INPUT');
      expect(body.errors[0].message.startsWith(`${field}: `), body.errors[0].message).toBe(true);
    }
    expect(await counts()).toEqual(before);
    // HttpAgent: the 5,000-character runId is a 400 too.
    const agent = await agentRun('inputs-thread', random, 'hello');
    expect(String(agent.error)).toMatch(/400/);
  });
});

describe('AG-UI: a long thread (HttpAgent resends all of it)', () => {
  it('2,000 messages the client holds, tool calls and results among them, are sent again and the run is answered; past the limit its error is the 413', async () => {
    const first = await agentRun('long-thread', 'long-1', 'what time is it\n!call clock');
    expect(first.error).toBeUndefined();
    const threadId = (first.events[0] as BaseEvent & { threadId: string }).threadId;
    const exchange = first.agent.messages;
    expect(exchange.map((m) => m.role)).toEqual(['user', 'assistant', 'tool', 'assistant']);
    // The client after 500 such exchanges: each message as HttpAgent holds it (ids of its own).
    const history = Array.from({ length: 500 }, (_, i) => exchange.map((m) => ({ ...m, id: `${m.id}-${i}` }))).flat();
    // HttpAgent's own body, counted before it is parsed: its JSON values are within the bound five times over (the 10,000
    // messages one request may carry), its distinct keys fifty times (core/resent-conversation.ts).
    const sent: string[] = [];
    const agent = new HttpAgent({ url, threadId, fetch: (to, init) => (sent.push(String(init.body)), fetch(to, init)) });
    agent.addMessages([...history.slice(0, 1_999), { id: 'long-next', role: 'user', content: 'and now?' }]);
    const events: BaseEvent[] = [];
    await agent.runAgent({ runId: 'long-2' }, { onEvent: ({ event }) => void events.push(event) });
    expect(sent).toHaveLength(1);
    expect(jsonTextPast(sent[0], DEFAULT_MAX_REQUEST_VALUES / 5, MAX_JSON_TEXT_DEPTH, DEFAULT_MAX_REQUEST_KEYS / 50)).toBeUndefined();
    for (const e of events) expect(() => EventSchemas.parse(e)).not.toThrow();
    expect(events.at(-1)).toMatchObject({ type: EventType.RUN_FINISHED, threadId, result: { sessionId: threadId, turn: 2 } });
    expect(agent.messages.at(-1)).toMatchObject({ role: 'assistant', content: 'Echo: and now?' });

    const tooLong = new HttpAgent({ url, threadId });
    tooLong.addMessages([...Array.from({ length: 6 }, () => history).flat(), { id: 'long-again', role: 'user', content: 'again' }]);
    const refused = await tooLong.runAgent({ runId: 'long-3' }).catch((err: unknown) => err);
    expect(String(refused)).toMatch(/413/);
    expect(String(refused)).toContain(tooManyMessages(12_001, DEFAULT_MAX_REQUEST_MESSAGES));
  });
});

describe('AG-UI: a retried run (the same runId)', () => {
  const runEvents = async (sessionId: string, runId: string) =>
    (await app.services.store.log.page(sessionId, -1, 10_000)).filter((e) => e.type === 'plugin/agui/run' && anyData(e).runId === runId);

  it('of a finished run answers at once from the log with RUN_FINISHED, recording nothing new (HttpAgent)', async () => {
    const first = await agentRun('retry-thread', 'retry-1', 'first question');
    expect(first.error).toBeUndefined();
    const threadId = (first.events[0] as BaseEvent & { threadId: string }).threadId;
    const answer = (first.agent.messages.at(-1) as { content: string }).content;
    const before = await counts();

    // A client that lost the stream sends the same run again (its threadId as it first sent it).
    const retry = await agentRun('retry-thread', 'retry-1', 'first question');
    expect(retry.error).toBeUndefined();
    expect(retry.events[0]).toMatchObject({ type: EventType.RUN_STARTED, threadId, runId: 'retry-1' });
    expect(retry.events.at(-1)).toMatchObject({ type: EventType.RUN_FINISHED, threadId, runId: 'retry-1', result: { sessionId: threadId, turn: 1 } });
    // The client ends up with the exchange once: the question, then the answer from the log.
    expect(retry.agent.messages.map((m) => [m.role, (m as { content?: string }).content])).toEqual([
      ['user', 'first question'],
      ['assistant', answer],
    ]);
    expect(await counts()).toEqual(before);
    expect(await runEvents(threadId, 'retry-1')).toHaveLength(1);

    // Retried with the session's own id: the same.
    const again = await agentRun(threadId, 'retry-1', 'first question');
    expect(again.events.at(-1)).toMatchObject({ type: EventType.RUN_FINISHED, runId: 'retry-1' });
    expect(await counts()).toEqual(before);
  });

  it('of a failed run answers its RUN_ERROR again; raw HTTP sees each stream end', async () => {
    const body = runInput({ threadId: 'retry-raw', runId: 'retry-raw-1', messages: [{ id: 'm1', role: 'user', content: '!fail it broke' }] });
    const first = await rawRun(body);
    expect(first.at(-1)).toBe(EventType.RUN_ERROR);
    const before = await counts();
    for (let i = 0; i < 2; i++) {
      const retried = await rawRun(body);
      expect(retried[0]).toBe(EventType.RUN_STARTED);
      expect(retried.at(-1)).toBe(EventType.RUN_ERROR);
    }
    expect(await counts()).toEqual(before);

    // A finished run's retry over raw HTTP ends with RUN_FINISHED.
    const ok = runInput({ threadId: 'retry-raw-ok', runId: 'retry-raw-2' });
    expect((await rawRun(ok)).at(-1)).toBe(EventType.RUN_FINISHED);
    const okBefore = await counts();
    expect((await rawRun(ok)).at(-1)).toBe(EventType.RUN_FINISHED);
    expect(await counts()).toEqual(okBefore);
  });

  it('of a run still going follows it to its end, recording nothing new', async () => {
    const body = runInput({
      threadId: 'retry-slow',
      runId: 'retry-slow-1',
      messages: [{ id: 'm1', role: 'user', content: '!slow 100\nfive slow words for you' }],
    });
    // The first request is left after RUN_STARTED (a client whose connection dropped).
    const controller = new AbortController();
    const first = await fetch(url, { method: 'POST', headers: SSE, body: JSON.stringify(body), signal: controller.signal });
    const reader = first.body!.getReader();
    const head = new TextDecoder().decode((await reader.read()).value);
    expect(head).toContain(EventType.RUN_STARTED);
    controller.abort();
    const retried = await rawRun(body);
    expect(retried[0]).toBe(EventType.RUN_STARTED);
    expect(retried).toContain(EventType.TEXT_MESSAGE_START);
    expect(retried.at(-1)).toBe(EventType.RUN_FINISHED);
    const threadId = JSON.parse(/^data: (.*)$/m.exec(head)![1]).threadId;
    expect(await runEvents(threadId, 'retry-slow-1')).toHaveLength(1);
  });
});
