// A live session's waiting inputs are bounded (docs/contract.md#append-rules, rule `inbox`): at most
// MAX_PENDING_INPUTS of them, weighing at most MAX_PENDING_INPUT_BYTES, on every door that queues one.
// sendMessage checked nothing, so one token could queue millions of inputs or gigabytes of text, which the
// process running the session then held (its agent's next input, Session.pendingInputs, /chat). The sessions
// are a runner pool's: no agent of this process takes their inputs, so the inbox only moves as the test says.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
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

/** A runner pool's session imported with `count` inputs of `bytes` each waiting (POST /recordings, streamed). */
async function waitingSession(pool: string, count: number, bytes: number): Promise<string> {
  const text = 'q'.repeat(bytes);
  const encoder = new TextEncoder();
  let seq = 0;
  const body = new ReadableStream<Uint8Array>({
    pull(controller) {
      if (seq === 0)
        controller.enqueue(encoder.encode(`${JSON.stringify({ format: 'forkline.recording', version: 4, session: { id: 'ses_inbox', runner: pool } })}\n`));
      if (seq < count) controller.enqueue(encoder.encode(`${JSON.stringify({ seq, type: 'inbox/add', data: { inputId: `in_${seq++}`, text } })}\n`));
      else controller.close();
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
  expect(answer.session.eventCount).toBe(count);
  return answer.session.id;
}

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
