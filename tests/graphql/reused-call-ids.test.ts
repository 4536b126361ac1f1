// A call id reused across steps (ids are unique per step only: docs/contract.md#append-rules) with the later call left
// unanswered. Written through appendEvents (an external runner) or imported, and then continued by forkline's own agent,
// against a Chat Completions provider that refuses, as OpenAI does, a call without its answer right after it: every
// next request must pair calls and results by step, in the session and in its forks (cut between the two steps, or
// after them), or the session and every fork of it stay broken.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp, type TestApp } from '../helpers/app.ts';
import { callFirstBatches } from '../helpers/runner-batches.ts';
import { chatMessagesRefusal, startChatProvider, type ChatRequest } from '../helpers/chat-completions.ts';

let app: TestApp;
let provider: { url: string; close(): void };
const requests: ChatRequest[] = [];

beforeAll(async () => {
  provider = await startChatProvider(
    (r) => {
      requests.push(r);
      return { text: 'carrying on' };
    },
    { strict: true },
  );
  app = await startTestApp({
    providers: { openaiCompatible: { baseUrl: provider.url, apiKey: 'sk-compat' } },
    modelRetries: { maxRetries: 0, initialDelayMs: 10, maxDelayMs: 10 },
  });
});
afterAll(async () => {
  await app?.close();
  provider?.close();
});

const MODEL = { provider: 'openai-compatible', model: 'fake-model' };
const call = (id: string) => ({ id, name: 'clock', arguments: '{}' });
/** Turn `turn` taking `inputId`: step 1 calls c1 and gets its result; step 2 calls c1 again and ends without one. */
const reusingTurn = (turn: number, inputId: string) => [
  { type: 'inbox/remove', data: { inputId, reason: 'taken' } },
  { type: 'turn/start', data: { turn, inputId } },
  { type: 'step/start', data: { turn, step: 1 } },
  { type: 'model/message', data: { turn, step: 1, text: '', toolCalls: [call('c1')] } },
  { type: 'tool/result', data: { turn, step: 1, callId: 'c1', resultId: `r_${turn}_1`, status: 'ok', content: '12:00' } },
  { type: 'step/end', data: { turn, step: 1, reason: 'completed' } },
  { type: 'step/start', data: { turn, step: 2 } },
  { type: 'model/message', data: { turn, step: 2, text: 'once more', toolCalls: [call('c1')] } },
  { type: 'step/end', data: { turn, step: 2, reason: 'failed' } },
  { type: 'turn/end', data: { turn, reason: 'failed' } },
];

const EVENTS = `query($id: ID!) { session(id: $id) { eventCount events(first: 200) { edges { node { seq type data } } } } }`;
const events = async (id: string) => (await app.ok(EVENTS, { id })).session.events.edges.map((e: any) => e.node);
const send = async (id: string, text: string) =>
  (await app.ok(`mutation($id: ID!, $t: String!) { sendMessage(input: {sessionId: $id, text: $t}) { inputId } }`, { id, t: text })).sendMessage
    .inputId as string;
const fork = async (id: string, atSeq: number, message?: string) =>
  (
    await app.ok(`mutation($i: ForkSessionInput!) { forkSession(input: $i) { session { id } } }`, {
      i: { sessionId: id, atSeq, ...(message ? { message } : {}) },
    })
  ).forkSession.session.id as string;
const seqOf = (log: any[], type: string, data: Record<string, unknown>) =>
  log.find((e) => e.type === type && Object.entries(data).every(([k, v]) => e.data[k] === v)).seq as number;

/** Appends as an external runner: claims the session, appends `batch` (it continues the log; each call before its result), gives the lease back. */
async function append(id: string, batch: Array<{ type: string; data: unknown }>) {
  const { claimSession } = await app.ok(`mutation($id: ID!) { claimSession(input: {sessionId: $id, runnerId: "r"}) { lease { token } } }`, { id });
  let { eventCount } = (await app.ok(EVENTS, { id })).session;
  const batches = callFirstBatches(batch);
  for (const [i, events] of batches.entries()) {
    const release = i === batches.length - 1;
    await app.ok(`mutation($input: AppendEventsInput!) { appendEvents(input: $input) { eventCount } }`, {
      input: { sessionId: id, leaseToken: claimSession.lease.token, expectedEventCount: eventCount, events, release },
    });
    eventCount += events.length;
  }
}

/** What the provider answers the session's next request (Session.modelRequest, what forkline's own agent sends). */
async function providerAnswers(id: string): Promise<number> {
  const { messages } = (await app.ok(`query($id: ID!) { session(id: $id) { modelRequest { messages } } }`, { id })).session.modelRequest;
  const res = await fetch(`${provider.url}/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ model: 'fake-model', messages }),
  });
  return res.status;
}

describe('a call id reused across steps, the later call unanswered', () => {
  it("appended by an external runner: the session's next request and a fork's (cut between the two steps, the id reused again there) are accepted", async () => {
    const id = (await app.ok(`mutation($i: CreateSessionInput!) { createSession(input: $i) { id } }`, { i: { runner: 'ext', model: MODEL } })).createSession.id;
    await append(id, reusingTurn(1, await send(id, 'what time is it?')));
    await send(id, 'and now?');
    expect(await providerAnswers(id)).toBe(200);

    // Forked between the two steps (the turn is closed by the fork's repair), and the id reused by the child's next turn.
    const child = await fork(id, seqOf(await events(id), 'step/end', { turn: 1, step: 1 }));
    const inputId = await send(child, 'again?');
    await append(child, [
      { type: 'inbox/remove', data: { inputId, reason: 'taken' } },
      { type: 'turn/start', data: { turn: 2, inputId } },
      { type: 'step/start', data: { turn: 2, step: 1 } },
      { type: 'model/message', data: { turn: 2, step: 1, text: 'checking', toolCalls: [call('c1')] } },
      { type: 'step/end', data: { turn: 2, step: 1, reason: 'failed' } },
      { type: 'turn/end', data: { turn: 2, reason: 'failed' } },
    ]);
    await send(child, 'and now?');
    expect(await providerAnswers(child)).toBe(200);
  });

  it("imported, then continued by forkline's own agent: its turn and a fork's after the two steps complete", async () => {
    const lines = [
      { format: 'forkline.recording', version: 4, session: { id: 'ses_reused_ids', title: 'reused ids' } },
      { type: 'session/model', data: MODEL },
      { type: 'inbox/add', data: { inputId: 'in_1', text: 'what time is it?' } },
      ...reusingTurn(1, 'in_1'),
    ].map((l, i) => JSON.stringify(i === 0 ? l : { seq: i - 1, ...l }));
    const { importRecording } = await app.ok(`mutation($r: String!) { importRecording(recording: $r) { id } }`, { r: lines.join('\n') + '\n' });
    const id = importRecording.id as string;
    const before = requests.length;
    await send(id, 'and now?');
    await app.services.host.idle();
    const log = await events(id);
    expect(log.at(-1)).toMatchObject({ type: 'turn/end', data: { turn: 2, reason: 'completed' } });
    expect(log.filter((e: any) => e.type === 'model/message').at(-1).data.text).toBe('carrying on');
    // The provider was sent step 1's call with its result, and step 2's message without its unanswered call.
    const sent = requests.slice(before);
    expect(sent).toHaveLength(1);
    expect(chatMessagesRefusal(sent[0].messages)).toBeUndefined();
    expect(sent[0].messages.filter((m) => m.role === 'assistant').map((m) => (m.tool_calls ?? []).map((c) => c.id))).toEqual([['c1'], []]);

    // A fork cut right after the two steps: its first turn is sent the same history, and completes.
    const child = await fork(id, seqOf(log, 'step/end', { turn: 1, step: 2 }), 'in the fork?');
    await app.services.host.idle();
    expect((await events(child)).at(-1)).toMatchObject({ type: 'turn/end', data: { turn: 2, reason: 'completed' } });
  });
});
