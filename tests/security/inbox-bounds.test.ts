// A live session's waiting inputs are bounded (docs/contract.md#append-rules, rule `inbox`): at most
// MAX_PENDING_INPUTS of them, weighing at most MAX_PENDING_INPUT_BYTES, on every door that queues one.
// sendMessage checked nothing, so one token could queue millions of inputs or gigabytes of text, which the
// process running the session then held (its agent's next input, Session.pendingInputs, /chat). The sessions
// are a runner pool's: no agent of this process takes their inputs, so the inbox only moves as the test says.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DefaultChatTransport, type UIMessage } from 'ai';
import { HttpAgent } from '@ag-ui/client';
import { EventType, type BaseEvent, type RunAgentInput } from '@ag-ui/core';
import { startTestApp, type TestApp } from '../helpers/app.ts';
import { wsClient } from '../helpers/subscribe.ts';
import { MAX_PENDING_INPUT_BYTES, MAX_PENDING_INPUTS } from '../../src/core/log-state.ts';

let app: TestApp;
beforeAll(async () => {
  app = await startTestApp();
});
afterAll(() => app?.close());

const MiB = 2 ** 20;
const SEND = `mutation($id: ID!, $text: String!) { sendMessage(input: {sessionId: $id, text: $text}) { inputId } }`;
const CLAIM = `mutation($input: ClaimSessionInput!) { claimSession(input: $input) { lease { token } } }`;
const APPEND = `mutation($input: AppendEventsInput!) { appendEvents(input: $input) { eventCount } }`;
const FORK = `mutation($input: ForkSessionInput!) { forkSession(input: $input) { inputId } }`;
const STATE = `query($id: ID!) { session(id: $id) { eventCount pendingInputs { inputId } } }`;

/** A line of a recording: an event, its seq given by its place. */
type Line = { type: string; data: Record<string, unknown> };

/** `count` inbox/adds (in_<from>, in_<from+1>, …) of `bytes` each. */
function* inputs(count: number, bytes: number, from = 0): Generator<Line> {
  const text = 'q'.repeat(bytes);
  for (let i = from; i < from + count; i++) yield { type: 'inbox/add', data: { inputId: `in_${i}`, text } };
}

/** A runner pool's session imported from `lines` (POST /recordings, streamed). */
async function importSession(pool: string, lines: Iterable<Line>): Promise<string> {
  const encoder = new TextEncoder();
  const it = lines[Symbol.iterator]();
  let seq = 0;
  const body = new ReadableStream<Uint8Array>({
    pull(controller) {
      if (seq === 0)
        controller.enqueue(encoder.encode(`${JSON.stringify({ format: 'forkline.recording', version: 4, session: { id: 'ses_inbox', runner: pool } })}\n`));
      const next = it.next();
      if (next.done) controller.close();
      else controller.enqueue(encoder.encode(`${JSON.stringify({ seq: seq++, ...next.value })}\n`));
    },
  });
  const res = await fetch(app.url.replace(/\/graphql$/, '/recordings'), {
    method: 'POST',
    headers: { 'content-type': 'application/x-ndjson' },
    body,
    duplex: 'half',
  } as RequestInit);
  const answer = (await res.json()) as { session: { id: string; eventCount: number } };
  expect(res.status).toBe(201);
  expect(answer.session.eventCount).toBe(seq);
  return answer.session.id;
}

/** A runner pool's session imported with `count` inputs of `bytes` each waiting. */
const waitingSession = (pool: string, count: number, bytes: number) => importSession(pool, inputs(count, bytes));

const state = async (id: string) => (await app.ok(STATE, { id })).session as { eventCount: number; pendingInputs: Array<{ inputId: string }> };

/** A runner takes the oldest waiting input (inbox/remove, turn/start): the inbox has room for one more. */
async function takeOne(id: string, pool: string) {
  const token = (await app.ok(CLAIM, { input: { sessionId: id, runnerId: pool } })).claimSession.lease.token;
  const { eventCount, pendingInputs } = await state(id);
  const inputId = pendingInputs[0].inputId;
  await app.ok(APPEND, {
    input: {
      sessionId: id,
      leaseToken: token,
      expectedEventCount: eventCount,
      events: [
        { type: 'inbox/remove', data: { inputId, reason: 'taken' } },
        { type: 'turn/start', data: { turn: 1, inputId } },
      ],
    },
  });
  return token as number;
}

const inboxError = (extra: Record<string, unknown>) => ({
  code: 'BAD_USER_INPUT',
  rule: 'inbox',
  limit: MAX_PENDING_INPUTS,
  byteLimit: MAX_PENDING_INPUT_BYTES,
  ...extra,
});

describe(`the inbox of a live session holds at most ${MAX_PENDING_INPUTS} inputs`, () => {
  it('messages racing at the bound never pass it, and nothing of a refused one is written', async () => {
    const id = await waitingSession('inbox-race', MAX_PENDING_INPUTS - 5, 1);
    const sent = await Promise.all(Array.from({ length: 20 }, (_, i) => app.gql(SEND, { id, text: `racing ${i}` })));
    const refused = sent.filter((r) => r.errors);
    expect(sent.length - refused.length).toBe(5);
    for (const r of refused) {
      expect(r.errors![0].extensions).toMatchObject(inboxError({ pendingInputs: MAX_PENDING_INPUTS }));
      expect(r.errors![0].message).toContain(`more than ${MAX_PENDING_INPUTS} inputs waiting at once (${MAX_PENDING_INPUTS} wait`);
    }
    const full = await state(id);
    expect(full.eventCount).toBe(MAX_PENDING_INPUTS);
    expect(full.pendingInputs).toHaveLength(MAX_PENDING_INPUTS);
  }, 60_000);

  it('once an input is taken one more fits, and then no other; a runner queues none of its own', async () => {
    const id = await waitingSession('inbox-take', MAX_PENDING_INPUTS, 1);
    const token = await takeOne(id, 'inbox-take');
    await app.ok(SEND, { id, text: 'fits again' });
    const again = await app.gql(SEND, { id, text: 'no room' });
    expect(again.errors?.[0].extensions).toMatchObject(inboxError({ pendingInputs: MAX_PENDING_INPUTS }));
    const after = await state(id);
    expect(after.eventCount).toBe(MAX_PENDING_INPUTS + 3);
    expect(after.pendingInputs).toHaveLength(MAX_PENDING_INPUTS);

    // inbox/add is the service's to write, not a runner's (runner-protocol.ts): refused, full inbox or not, nothing written.
    const forged = await app.gql(APPEND, {
      input: {
        sessionId: id,
        leaseToken: token,
        expectedEventCount: after.eventCount,
        events: [{ type: 'inbox/add', data: { inputId: 'forged', text: 'x' } }],
      },
    });
    expect(forged.errors?.[0].extensions?.code).toBe('BAD_USER_INPUT');
    expect((await state(id)).eventCount).toBe(after.eventCount);
  }, 60_000);

  it('a message over GraphQL on a WebSocket is held to the same bound', async () => {
    const id = await waitingSession('inbox-ws', MAX_PENDING_INPUTS, 1);
    const client = wsClient(app.url);
    try {
      const answers: Array<{ errors?: ReadonlyArray<{ message: string; extensions?: Record<string, unknown> }> }> = [];
      for await (const r of client.iterate({ query: SEND, variables: { id, text: 'over a socket' } })) answers.push(r);
      expect(answers).toHaveLength(1);
      expect(answers[0].errors?.[0].extensions).toMatchObject(inboxError({ pendingInputs: MAX_PENDING_INPUTS }));
    } finally {
      await client.dispose();
    }
    expect((await state(id)).eventCount).toBe(MAX_PENDING_INPUTS);
  }, 60_000);

  it("a fork carrying a full inbox is refused a message of its own (the append rules' check), and nothing is written", async () => {
    const id = await waitingSession('inbox-fork', MAX_PENDING_INPUTS, 1);
    const sessions = async () => (await app.db.pool.query<{ n: number }>('SELECT count(*)::int AS n FROM "Session"')).rows[0].n;
    const before = await sessions();
    const fork = await app.gql(FORK, { input: { sessionId: id, atSeq: MAX_PENDING_INPUTS - 1, message: 'one more' } });
    // The message would follow the child's own marker (session/end-seed, at the seq after the cut).
    expect(fork.errors?.[0].extensions).toMatchObject(inboxError({ pendingInputs: MAX_PENDING_INPUTS, seq: MAX_PENDING_INPUTS + 1 }));
    expect(await sessions()).toBe(before);
    // Without a message the fork carries them all: at the bound, not past it.
    await app.ok(FORK, { input: { sessionId: id, atSeq: MAX_PENDING_INPUTS - 1 } });
    expect(await sessions()).toBe(before + 1);
  }, 60_000);
  it('a fan-out whose children would carry a full inbox and a message each is refused whole, making no child', async () => {
    const id = await waitingSession('inbox-fan', MAX_PENDING_INPUTS, 1);
    const sessions = async () => (await app.db.pool.query<{ n: number }>('SELECT count(*)::int AS n FROM "Session"')).rows[0].n;
    const before = await sessions();
    const FAN = `mutation($input: FanOutInput!) { fanOut(input: $input) { children { id } } }`;
    const fan = await app.gql(FAN, { input: { sessionId: id, atSeq: MAX_PENDING_INPUTS - 1, variants: [{ message: 'a' }, { message: 'b' }] } });
    expect(fan.errors?.[0].extensions).toMatchObject(inboxError({ pendingInputs: MAX_PENDING_INPUTS, seq: MAX_PENDING_INPUTS + 1 }));
    expect(await sessions()).toBe(before);
  }, 60_000);
});

describe(`the inbox of a live session holds at most ${MAX_PENDING_INPUT_BYTES} bytes of text`, () => {
  it('messages racing past it are refused with nothing written, and one fits once an input is taken', async () => {
    // 63 MiB wait: 1 MiB is left, so of five messages of 400,000 bytes (200,000 two-byte characters) two fit.
    const waiting = MAX_PENDING_INPUT_BYTES / MiB - 1;
    const id = await waitingSession('inbox-bytes', waiting, MiB);
    const text = 'é'.repeat(200_000);
    const sent = await Promise.all(Array.from({ length: 5 }, () => app.gql(SEND, { id, text })));
    const refused = sent.filter((r) => r.errors);
    expect(sent.length - refused.length).toBe(2);
    for (const r of refused) {
      expect(r.errors![0].extensions).toMatchObject(inboxError({ pendingInputs: waiting + 2, pendingInputBytes: waiting * MiB + 800_000 }));
      expect(r.errors![0].message).toContain(`hold more than ${MAX_PENDING_INPUT_BYTES} bytes of text with this one of 400000`);
    }
    expect(await state(id)).toMatchObject({ eventCount: waiting + 2 });

    // Taking an input gives its bytes back: a third fits now.
    await takeOne(id, 'inbox-bytes');
    await app.ok(SEND, { id, text });
    const { eventCount, pendingInputs } = await state(id);
    expect(eventCount).toBe(waiting + 5);
    expect(pendingInputs).toHaveLength(waiting + 2);
  }, 60_000);
});

/** HttpAgent with the protocol's parentRunId (runAgent's parameters do not carry it). */
class BranchingAgent extends HttpAgent {
  parentRunId?: string;
  protected requestInit(input: RunAgentInput): RequestInit {
    return super.requestInit(this.parentRunId ? { ...input, parentRunId: this.parentRunId } : input);
  }
}

/**
 * A run of `text` in thread `threadId` through @ag-ui/client's HttpAgent: its events and the error it ended with.
 * The thread's agent is a runner pool's that never answers: a run that queued its message is let go once it started.
 */
async function aguiRun(threadId: string, runId: string, text: string, parentRunId?: string) {
  const agent = new BranchingAgent({ url: app.url.replace(/\/graphql$/, '/agui'), threadId });
  agent.parentRunId = parentRunId;
  agent.addMessage({ id: `m_${runId}`, role: 'user', content: text });
  const events: BaseEvent[] = [];
  let error: unknown;
  await agent
    .runAgent(
      { runId },
      {
        onEvent: ({ event }) => {
          events.push(event);
          if (event.type === EventType.MESSAGES_SNAPSHOT) agent.abortRun();
        },
      },
    )
    .catch((err) => (error = err));
  return { events, error };
}

const chatTransport = () => new DefaultChatTransport({ api: app.url.replace(/\/graphql$/, '/chat') });
const userMessage = (id: string, text: string): UIMessage => ({ id, role: 'user', parts: [{ type: 'text', text }] });

/** A useChat request through the AI SDK's DefaultChatTransport: the refusal's body, or undefined when the answer streams. */
async function chatSend(
  chatId: string,
  messages: UIMessage[],
  regenerate?: string,
): Promise<{ errors: Array<{ message: string; extensions: Record<string, unknown> }> } | undefined> {
  const abort = new AbortController();
  try {
    const stream = await chatTransport().sendMessages({
      chatId,
      messages,
      trigger: regenerate ? 'regenerate-message' : 'submit-message',
      messageId: regenerate,
      abortSignal: abort.signal,
    });
    // The message is queued once the answer streams; the runner pool's agent never answers it: let it go.
    abort.abort();
    await stream.cancel().catch(() => {});
    return undefined;
  } catch (err) {
    return JSON.parse((err as Error).message);
  }
}

/**
 * The sessions, and the events of sessions that exist: a branch taken back is deleted, its events left for the
 * deletion's reclaim, invisible (docs/contract.md#deletion).
 */
const counts = async () =>
  (
    await app.db.pool.query<{ sessions: number; events: number }>(
      `SELECT (SELECT count(*)::int FROM "Session") AS sessions,
              (SELECT count(*)::int FROM "Event" e WHERE EXISTS (SELECT 1 FROM "Session" s WHERE s.id = e."sessionId")) AS events`,
    )
  ).rows[0];

/** The session has `eventCount` events and a full inbox again. */
async function expectFull(id: string, eventCount: number) {
  const after = await state(id);
  expect(after.eventCount).toBe(eventCount);
  expect(after.pendingInputs).toHaveLength(MAX_PENDING_INPUTS);
}

/** The same refusal as sendMessage's, in a door's own shape: its message and its code. */
const inboxMessage = (id: string, detail: string) => expect.stringContaining(`session ${id} takes no more input now: inbox: ${detail}`);

describe('the inbox bounds hold at the AG-UI door (POST /agui)', () => {
  it('a run on a full thread ends in RUN_ERROR naming the rule, writes nothing, and the thread takes a run once an input is taken', async () => {
    const id = await waitingSession('agui-full', MAX_PENDING_INPUTS, 1);
    const before = await counts();
    const refused = await aguiRun(id, 'agui-full-1', 'one more');
    expect(refused.events.map((e) => e.type)).toEqual([EventType.RUN_STARTED, EventType.RUN_ERROR]);
    expect(refused.events[1]).toMatchObject({ code: 'BAD_USER_INPUT', message: inboxMessage(id, `more than ${MAX_PENDING_INPUTS} inputs waiting at once`) });
    expect(await counts()).toEqual(before);

    await takeOne(id, 'agui-full');
    const taken = await aguiRun(id, 'agui-full-2', 'fits again');
    // The run started and showed its message; then the client let it go (HttpAgent ends an aborted run in its own RUN_ERROR).
    expect(taken.events.map((e) => e.type)).toEqual([EventType.RUN_STARTED, EventType.MESSAGES_SNAPSHOT, EventType.RUN_ERROR]);
    expect(taken.events[2]).toMatchObject({ code: 'abort' });
    // Taken (inbox/remove, turn/start), then the run's message and its record (plugin/agui/run).
    await expectFull(id, MAX_PENDING_INPUTS + 4);
  }, 60_000);

  it('a run whose message would pass the byte bound ends in RUN_ERROR, writing nothing', async () => {
    const id = await waitingSession('agui-bytes', MAX_PENDING_INPUT_BYTES / MiB, MiB);
    const before = await counts();
    const refused = await aguiRun(id, 'agui-bytes-1', 'é'.repeat(200_000));
    expect(refused.events.map((e) => e.type)).toEqual([EventType.RUN_STARTED, EventType.RUN_ERROR]);
    expect(refused.events[1]).toMatchObject({
      code: 'BAD_USER_INPUT',
      message: inboxMessage(id, `the inputs waiting at once hold more than ${MAX_PENDING_INPUT_BYTES} bytes of text with this one of 400000`),
    });
    expect(await counts()).toEqual(before);
  }, 60_000);

  it('a run branching from a run whose end had a full inbox is refused with no branch left behind', async () => {
    // in_0 … in_9999 wait; run r1 takes in_0 and, while it runs, in_10000 fills the inbox again; r1 ends.
    const id = await importSession('agui-branch', [
      ...inputs(MAX_PENDING_INPUTS, 1),
      { type: 'plugin/agui/run', data: { runId: 'r1', inputId: 'in_0' } },
      { type: 'inbox/remove', data: { inputId: 'in_0', reason: 'taken' } },
      { type: 'turn/start', data: { turn: 1, inputId: 'in_0' } },
      ...inputs(1, 1, MAX_PENDING_INPUTS),
      { type: 'turn/end', data: { turn: 1, reason: 'completed' } },
    ]);
    const before = await counts();
    for (const attempt of [1, 2]) {
      const refused = await aguiRun(id, 'agui-branch-2', `from r1, attempt ${attempt}`, 'r1');
      expect(refused.events.map((e) => e.type)).toEqual([EventType.RUN_STARTED, EventType.RUN_ERROR]);
      expect(refused.events[1]).toMatchObject({
        code: 'BAD_USER_INPUT',
        message: expect.stringContaining(`inbox: more than ${MAX_PENDING_INPUTS} inputs waiting at once`),
      });
      expect(await counts()).toEqual(before);
    }
  }, 60_000);
});

describe('the inbox bounds hold at the AI SDK chat door (POST /chat)', () => {
  it("a message to a full chat is refused with /chat's 400 and the rule, writes nothing, and fits once an input is taken", async () => {
    const id = await waitingSession('chat-full', MAX_PENDING_INPUTS, 1);
    const before = await counts();
    const refused = await chatSend(id, [userMessage('u1', 'one more')]);
    expect(refused?.errors[0]).toMatchObject({
      message: inboxMessage(id, `more than ${MAX_PENDING_INPUTS} inputs waiting at once`),
      extensions: inboxError({ pendingInputs: MAX_PENDING_INPUTS }),
    });
    const raw = await fetch(app.url.replace(/\/graphql$/, '/chat'), {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ id, messages: [userMessage('u2', 'and another')], trigger: 'submit-message' }),
    });
    expect(raw.status).toBe(400);
    expect(await counts()).toEqual(before);

    await takeOne(id, 'chat-full');
    expect(await chatSend(id, [userMessage('u3', 'fits again')])).toBeUndefined();
    await expectFull(id, MAX_PENDING_INPUTS + 3);
  }, 60_000);

  it('a message that would pass the byte bound is refused, writing nothing', async () => {
    const id = await waitingSession('chat-bytes', MAX_PENDING_INPUT_BYTES / MiB, MiB);
    const before = await counts();
    const refused = await chatSend(id, [userMessage('u1', 'é'.repeat(200_000))]);
    expect(refused?.errors[0]).toMatchObject({
      message: inboxMessage(id, `the inputs waiting at once hold more than ${MAX_PENDING_INPUT_BYTES} bytes of text with this one of 400000`),
      extensions: inboxError({ pendingInputs: MAX_PENDING_INPUT_BYTES / MiB, pendingInputBytes: MAX_PENDING_INPUT_BYTES }),
    });
    expect(await counts()).toEqual(before);
  }, 60_000);

  it('a regenerate whose new text would pass the byte bound is refused with no branch made and the head unmoved', async () => {
    // 64 MiB less 100 bytes wait before in_64 (1 byte): a branch before it carries them, and 400,000 bytes more do not fit.
    const id = await importSession('chat-regen', [...inputs(63, MiB), ...inputs(1, MiB - 100, 63), ...inputs(1, 1, 64)]);
    const before = await counts();
    const refused = await chatSend(id, [userMessage('u1', 'é'.repeat(200_000))], 'ans_in_64');
    expect(refused?.errors[0]).toMatchObject({
      message: expect.stringContaining(`inbox: the inputs waiting at once hold more than ${MAX_PENDING_INPUT_BYTES} bytes of text with this one of 400000`),
      extensions: { code: 'BAD_USER_INPUT', rule: 'inbox' },
    });
    expect(await counts()).toEqual(before);
    // The chat is answered where it was: a message that fits goes to the chat's own session.
    await takeOne(id, 'chat-regen');
    expect(await chatSend(id, [userMessage('u2', 'fits')])).toBeUndefined();
    expect((await state(id)).eventCount).toBe(65 + 3);
  }, 120_000);
});

describe('one input heavier than the whole byte bound', () => {
  it('is refused at /agui and /chat by the body limit (413), before anything is written', async () => {
    const id = await waitingSession('one-heavy', 1, 1);
    const before = await counts();
    const text = 'q'.repeat(MAX_PENDING_INPUT_BYTES + 1);
    const agui = await aguiRun(id, 'heavy', text);
    expect(agui.events).toEqual([]);
    expect(agui.error).toMatchObject({ status: 413 });
    const chat = await chatSend(id, [userMessage('u', text)]);
    expect(chat?.errors[0].extensions).toMatchObject({ code: 'REQUEST_ENTITY_TOO_LARGE' });
    expect(await counts()).toEqual(before);
    // Still usable: a message that fits is queued.
    expect(await chatSend(id, [userMessage('u2', 'light')])).toBeUndefined();
    expect((await state(id)).pendingInputs).toHaveLength(2);
  }, 60_000);
});
